package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/policy"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/store"
)

// ViewTool is a read tool that shows the current state of what a call
// waiting for approval acts on (the charge a refund moves money back to,
// the issue a comment goes on): a tool of the same connector, MCP server
// or the built-ins, on the same step's allowedTools, declared
// sideEffecting false and not requiresApproval, whose inputSchema's
// required arguments the waiting call has, by exact name.
type ViewTool struct {
	// Name is the read tool's name, as the step's allowedTools spell it.
	Name string
	// Description is its embedded definition's description.
	Description string
	// Arguments are the read's arguments: the waiting call's values of
	// the read tool's required arguments, and nothing else (a JSON
	// object, RFC 8785 canonical form).
	Arguments jsontext.Value
}

// ViewTools returns the read tools an approver may call to see the
// current state of the target of a call to tool with args (a JSON
// object) in step of doc, in allowedTools order; none when the step is
// not an agent step of doc, tool is not on its allowedTools or has no
// embedded definition, or args is not an object. Only the document is
// read (embedded definitions); [Session.View] checks the tools against
// the registry too.
func ViewTools(doc *playbook.Document, step, tool string, args jsontext.Value) []ViewTool {
	if doc == nil {
		return nil
	}
	st := doc.StepWithID(step)
	if st == nil || st.AllowedTools == nil || !st.AllowedTools.Has(tool) {
		return nil
	}
	called := doc.ToolNamed(tool)
	if called == nil {
		return nil
	}
	var given map[string]jsontext.Value
	if json.Unmarshal(args, &given) != nil || given == nil {
		return nil
	}
	from := viewOrigin(tool, called.Definition(doc.Source))
	var out []ViewTool
	for _, name := range st.AllowedTools.Values() {
		if name == tool || slices.ContainsFunc(out, func(v ViewTool) bool { return v.Name == name }) {
			continue
		}
		t := doc.ToolNamed(name)
		if t == nil {
			continue
		}
		def := t.Definition(doc.Source)
		if def.SideEffecting == nil || *def.SideEffecting || (def.RequiresApproval != nil && *def.RequiresApproval) {
			continue
		}
		if o := viewOrigin(name, def); o == "" || o != from {
			continue
		}
		var schema struct {
			Required []string `json:"required"`
		}
		if json.Unmarshal(def.InputSchema, &schema) != nil || len(schema.Required) == 0 {
			continue // a read of no target would be a listing, not a view
		}
		picked := map[string]jsontext.Value{}
		for _, r := range schema.Required {
			v, ok := given[r]
			if !ok {
				picked = nil
				break
			}
			picked[r] = v
		}
		if picked == nil {
			continue
		}
		raw, err := json.Marshal(picked, json.Deterministic(true))
		if err != nil {
			continue
		}
		canon := jsontext.Value(raw)
		if canon.Canonicalize() != nil {
			continue
		}
		out = append(out, ViewTool{Name: name, Description: def.Description, Arguments: canon})
	}
	return out
}

// viewOrigin is what serves a tool by its embedded definition, for
// [ViewTools]: "connector:" and its connectorType, "mcp:" and its
// server, "builtin"; "" when nothing says.
func viewOrigin(name string, def playbook.Definition) string {
	switch playbook.Family(name, def.Source) {
	case playbook.FamilyMCP:
		if server, _, ok := playbook.MCPParts(name); ok {
			return "mcp:" + server
		}
	case playbook.FamilyConnector:
		if def.ConnectorType != "" {
			return "connector:" + def.ConnectorType
		}
	case playbook.FamilyBuiltIn:
		return "builtin"
	}
	return ""
}

// MaxViewsPerApproval is the most views of one approval's target
// [Session.View] reads: each is a request at the provider and an audit
// record, so a person (or a script with their session) cannot make either
// grow without bound; past it, decide from what was read. The count is
// of the view.read records committed when a view starts, so views that
// start at the same moment may each pass it: the bound is 20 plus those
// in flight at once, never unbounded.
const MaxViewsPerApproval = 20

// ErrNotViewable is the error of a view that may not be read: nothing of
// it ran, nothing was recorded.
var ErrNotViewable = errors.New("no current view is read")

// Viewed is what [Session.View] read: the read tool, its arguments and
// its result (redacted, as a call's result is stored), or why it failed.
type Viewed struct {
	Tool      string
	Arguments jsontext.Value
	// Result is the tool's result (JSON) when it ran; Error, when not
	// empty, says why there is none (the tool failed, its result was too
	// large or did not match its outputSchema).
	Result jsontext.Value
	Error  string
	// Seq is the sequence number of the view.read audit record.
	Seq int64
}

// View reads the current state of the target of the call that approval
// approvalID of run runID waits on (or whose outcome is unknown), with
// the read tool named tool, for a person (by) deciding it
// (docs/console.md, "The target's current view"). The read goes through
// the decision path as a call of the waiting call's step would: tool must
// be one of [ViewTools] for the waiting call (by exact name), pass checks
// 1 to 3 with the arguments ViewTools builds from the waiting call's
// (never arguments from the person), resolve to what serves the waiting
// call's tool, be a read in the registry too, have a live definition that
// has not drifted, and not be refused or sent for approval by the
// harness policy. It runs within the session's CallTimeout and is
// recorded as a view.read audit record (its arguments' and result's
// digests, who asked, and why it failed) before its result is returned;
// it makes no call row and does not count against the step's calls. At
// most [MaxViewsPerApproval] views of one approval are read.
//
// Errors: [ErrNotViewable] (wrapped, with the reason) when it may not
// run, and nothing ran; [ErrStoreAltered] when the approval's rows
// disagree with the run's audit log; store errors as they are (a read
// that ran but could not be recorded is not returned).
func (s *Session) View(ctx context.Context, runID, approvalID, tool, by string) (Viewed, error) {
	refuse := func(format string, a ...any) (Viewed, error) {
		return Viewed{}, fmt.Errorf("%w: %s", ErrNotViewable, fmt.Sprintf(format, a...))
	}
	st := s.opt.Store
	a, err := st.GetApproval(ctx, approvalID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && a.Run != runID) {
		return refuse("run %s has no approval %q", runID, approvalID)
	}
	if err != nil {
		return Viewed{}, err
	}
	if a.Status != store.ApprovalPending || a.Call == nil {
		return refuse("approval %s is %s: only a call waiting for a decision has a current view", approvalID, a.Status)
	}
	if err := approvable(ctx, st, runID, approvalID); err != nil {
		return Viewed{}, err
	}
	recs, err := st.Audit(ctx, runID)
	if err != nil {
		return Viewed{}, err
	}
	viewed := 0
	for _, r := range recs {
		var ev ViewRead
		if r.Kind == string(KindViewRead) && json.Unmarshal(r.Data, &ev) == nil && ev.Approval == approvalID {
			viewed++
		}
	}
	if viewed >= MaxViewsPerApproval {
		return refuse("the target of approval %s was read %d times, the most (MaxViewsPerApproval); decide from what was read", approvalID, viewed)
	}
	calls, err := st.Calls(ctx, runID, store.CallFilter{Step: a.Call.Step, Attempt: a.Call.Attempt})
	if err != nil {
		return Viewed{}, err
	}
	var call *store.Call
	for i := range calls {
		if calls[i].Index == a.Call.Index {
			call = &calls[i]
		}
	}
	if call == nil || call.Tool != a.Tool || call.ArgsDigest != a.ArgsDigest {
		return refuse("the call approval %s waits on is not in the store as it was asked", approvalID)
	}
	if digest(call.Args) != call.ArgsDigest {
		// A secret value was redacted from the stored arguments: what
		// they name now is not what the call names.
		return refuse("the stored arguments of the call to %s are not those it was asked with (a secret value was redacted from them)", quote(call.Tool))
	}
	var vt *ViewTool
	views := ViewTools(s.im.Doc, a.Step, call.Tool, call.Args)
	for i := range views {
		if views[i].Name == tool {
			vt = &views[i]
		}
	}
	if vt == nil {
		var names []string
		for _, v := range views {
			names = append(names, quote(v.Name))
		}
		list := "none"
		if len(names) > 0 {
			list = strings.Join(names, ", ")
		}
		return refuse("%s is not a read tool step %s may call for the target of this call to %s (those that are: %s)", quote(tool), quote(a.Step), quote(call.Tool), list)
	}
	d := s.im.Decide(a.Step, tool, vt.Arguments)
	if !d.Allowed {
		return refuse("%s", d.Reason)
	}
	waiting := s.im.tools[call.Tool]
	switch {
	case d.tool.entry.Tool == nil:
		return refuse("tool %s resolves to %s, but nothing connected runs it", quote(tool), d.tool.entry.Origin)
	case d.tool.sideEff || d.tool.approval:
		return refuse("tool %s may have side effects or asks for approval in the registry; a view only reads", quote(tool))
	case waiting == nil || waiting.entry.Origin.Binding() != d.tool.entry.Origin.Binding():
		return refuse("tool %s is served by %s, not by what serves %s", quote(tool), d.tool.entry.Origin.Binding(), quote(call.Tool))
	}
	c := &Caller{s: s, run: runID, step: a.Step, attempt: a.Call.Attempt}
	if si := s.im.steps[a.Step]; si != nil {
		c.agent = playbook.Str(si.step.Agent)
	}
	if reason, _ := c.confirm(ctx, d.tool); reason != "" {
		return refuse("%s", reason)
	}
	if pol := s.opt.Policy; pol.Len() > 0 {
		v, err := c.askPolicy(ctx, d)
		switch {
		case err != nil:
			return refuse("%v; a policy that fails to evaluate refuses", err)
		case v.Effect == policy.Deny:
			return refuse("policy rule %q refuses calls to %s", v.Rule, quote(tool))
		case v.Effect == policy.RequireApproval:
			return refuse("policy rule %q asks for approval of calls to %s; a view never asks", v.Rule, quote(tool))
		}
	}
	cctx, cancel := context.WithTimeout(ctx, s.opt.CallTimeout)
	cctx = registry.WithCallInfo(cctx, registry.CallInfo{Run: runID, Step: a.Step, Attempt: a.Call.Attempt, Index: -1, Agent: c.agent, Redact: s.opt.Redact})
	res, cerr := d.tool.entry.Tool.Call(cctx, d.Args)
	cancel()
	var failure string
	switch {
	case cerr != nil:
		failure = fmt.Sprintf("the call to %s failed: %s", quote(tool), clipText(s.opt.Redact(cerr.Error()), maxErrorBytes))
	case res.Commit != nil:
		failure = fmt.Sprintf("the call to %s would change the runtime's store; a view only reads", quote(tool))
	}
	o := c.evaluate(tool, d.tool, res.Content, failure)
	if o.failure != "" {
		o.failure = s.opt.Redact(o.failure)
	}
	ev := ViewRead{Approval: approvalID, Attempt: a.Call.Attempt, Index: a.Call.Index, ArgsDigest: d.ArgsDigest,
		ResultDigest: o.resultDigest, By: by, Error: o.failure}
	var seq int64
	err = st.Tx(ctx, func(tx store.Tx) error {
		r, err := tx.Append(newRecord(s.opt.Redact, runID, a.Step, tool, ev))
		seq = r.Seq
		return err
	})
	if err != nil {
		return Viewed{}, fmt.Errorf("run %s: recording the view with %s: %w; it is not shown", runID, quote(tool), err)
	}
	return Viewed{Tool: tool, Arguments: c.redactJSON(d.Args), Result: o.out, Error: o.failure, Seq: seq}, nil
}
