// Package explain tells a person what an OpenPlaybook document does, from
// the document alone, so they can decide whether to trust it: which steps
// can move money or contact customers, which data they write, which MCP
// servers they call, which tool calls need approval, which gates a person
// must pass, what input a run takes and what a harness must provide. With
// a registry ([Options.Registry]), every value the document declares of a
// tool that the registry does not confirm is marked as a claim.
//
// [Build] (or [BuildWith]) computes an [Explanation] once from a document
// that may be partly invalid; [Render] writes it in any of [Formats]. The
// JSON encoding of Explanation is the output of `openplaybook explain
// --format json` and a public contract, documented in docs/explain.md.
//
// Explain never guesses: a riskClass, sideEffecting or requiresApproval the
// document does not declare is "unknown" (JSON null for the booleans), never
// "read" or false, and a tool named in allowedTools without an embedded
// definition is marked undefined.
package explain

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/internal/credential"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/policy"
	"github.com/openplaybook/openplaybook/registry"
)

// Values of [Tool.Family].
const (
	FamilyBuiltIn   = "built-in"
	FamilyConnector = "connector"
	FamilyMCP       = "mcp"
	FamilyUnknown   = "unknown"
)

// Risk values beyond [playbook.RiskClasses] used by [Step.RiskClass],
// [Tool.RiskClass] and [Summary.RiskClass].
const (
	// RiskUnknown: a tool's riskClass is absent or not one of
	// [playbook.RiskClasses], or the tool has no definition; for a step, at
	// least one of its tools is unknown and none is "money".
	RiskUnknown = "unknown"
	// RiskNone: a step that can call no tool (a gate, or an agent with an
	// empty allowedTools).
	RiskNone = "none"
)

// UndefinedNote is what every format shows for a tool named in allowedTools
// that has no embedded definition.
const UndefinedNote = "undefined — the runtime will refuse it / not explainable"

// Explanation is what a playbook does, computed by [Build]. Slices are never
// nil (they encode as []) except where a field's comment says null means
// "not declared".
type Explanation struct {
	// Problems are the diagnostics passed to Build, sorted by position.
	Problems      []Problem     `json:"problems"`
	ProblemCounts ProblemCounts `json:"problemCounts"`
	// OpenPlaybook is the document's format version ("" when absent).
	OpenPlaybook string `json:"openplaybook"`
	// DocumentDigest is the SHA-256 (64 lowercase hex digits) of the
	// document's bytes exactly as read: the file (or standard input) as
	// it is, with no parsing, normalisation or newline conversion. A run
	// records the same value as its documentDigest, so a review ties to
	// the exact bytes a run executes. "" when nothing could be read.
	DocumentDigest string   `json:"documentDigest"`
	Manifest       Manifest `json:"manifest"`
	// InputSchema is the document's inputSchema as written (with any
	// credential redacted), or null when the document has none: the JSON
	// Schema a run's input must match.
	InputSchema Schema `json:"inputSchema"`
	// Input lists the top-level properties inputSchema declares, in
	// document order ([] when it declares none or there is none).
	Input []InputField `json:"input"`
	// Registry says whether the tool definitions were checked against a
	// registry; without one, everything is as the document claims.
	Registry Registry `json:"registry"`
	// EntryStep names the first step (see [Step.Ref]); "" when there are
	// no steps.
	EntryStep string  `json:"entryStep"`
	Summary   Summary `json:"summary"`
	// Steps are all steps in document order.
	Steps    []Step   `json:"steps"`
	Requires Requires `json:"requires"`
}

// InputField is one top-level property of the document's inputSchema.
type InputField struct {
	Name string `json:"name"`
	// Type is the property's "type" ("string"; several joined by " or "),
	// with its "format" in parentheses ("string (email)"); "" when the
	// property says none.
	Type string `json:"type"`
	// Required is true when the schema's top-level "required" lists it.
	Required    bool   `json:"required"`
	Description string `json:"description"`
}

// Registry says what the tool definitions were checked against.
type Registry struct {
	// Consulted is false when explain was given no registry: every value
	// shown is as the document claims, and no [Tool.Claims] is set.
	Consulted bool `json:"consulted"`
	// Source names what was consulted ([Options.Source]), "" when nothing
	// was.
	Source string `json:"source"`
	// Unavailable lists the parts of the registry that could not be
	// consulted ([Options.Unavailable]): their tools are not in it.
	Unavailable []string `json:"unavailable"`
}

// Options configures [BuildWith]. A nil *Options means no registry.
type Options struct {
	// Registry, when set, is consulted for every allowed tool: a value the
	// document declares that the registry's definition of the same name
	// does not state equally is listed in [Tool.Claims]. Nil means none:
	// everything is as the document claims.
	Registry *registry.Registry
	// Source names the registry for people ("the harness h.yaml: the
	// built-ins, 22 connectors (openplaybook registry lists them), MCP servers memory").
	Source string
	// Unavailable lists the parts of the registry that could not be
	// consulted, one sentence each (an MCP server that did not answer).
	Unavailable []string
	// Policy, when set, is the harness's approval policy: each allowed
	// tool and gate lists the rules that may apply to it ([Tool.Policy],
	// [Step.Policy]).
	Policy *policy.Policy
}

// Problem is one validation diagnostic.
type Problem struct {
	File     string `json:"file"`
	Line     int    `json:"line"`   // 1-based; 0 when the problem has no place
	Column   int    `json:"column"` // 1-based byte column; 0 likewise
	Pointer  string `json:"pointer"`
	Severity string `json:"severity"` // "error", "warning" or "info"
	Rule     string `json:"rule"`
	Message  string `json:"message"`
}

// ProblemCounts counts [Explanation.Problems] by severity.
type ProblemCounts struct {
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
	Infos    int `json:"infos"`
}

// Manifest is the document's manifest; absent members are "".
type Manifest struct {
	ID                 string   `json:"id"`
	Name               string   `json:"name"`
	Version            string   `json:"version"`
	Description        string   `json:"description"`
	RequiredConnectors []string `json:"requiredConnectors"`
}

// Summary is the capability summary: what the playbook can do, step by
// step, as its embedded tool definitions declare it. Steps are named by
// [Step.Ref]. Every list is in document order (steps, then allowedTools).
type Summary struct {
	// RiskClass is the highest [Step.RiskClass] of all steps: one of
	// [playbook.RiskClasses], "unknown" or "none".
	RiskClass string `json:"riskClass"`
	// Money lists the steps that can call a tool of riskClass "money".
	Money []StepTools `json:"money"`
	// CustomerComms lists the steps that can call a tool of riskClass
	// "customer_comms".
	CustomerComms []StepTools `json:"customerComms"`
	// DataScopeWrites lists, per step, the union of the dataScopeWrites of
	// its tools (steps writing nothing declared are left out).
	DataScopeWrites []StepScopes `json:"dataScopeWrites"`
	// MCPServers lists, per step, the MCP servers its mcp.<server>.<tool>
	// names call.
	MCPServers []StepServers `json:"mcpServers"`
	// RequiresApproval lists the tools declaring requiresApproval true and
	// the steps that may call them.
	RequiresApproval []ToolSteps `json:"requiresApproval"`
	// Gates lists the gate steps a person must pass.
	Gates []Gate `json:"gates"`
	// UndefinedTools lists names in allowedTools with no embedded
	// definition (see [UndefinedNote]).
	UndefinedTools []ToolSteps `json:"undefinedTools"`
	// UnknownRisk lists defined tools whose riskClass is absent or not a
	// known class.
	UnknownRisk []ToolSteps `json:"unknownRisk"`
}

// StepTools names a step and the tools that give it a capability.
type StepTools struct {
	Step  string   `json:"step"`
	Tools []string `json:"tools"`
}

// StepScopes names a step and the data scopes its tools write.
type StepScopes struct {
	Step            string   `json:"step"`
	DataScopeWrites []string `json:"dataScopeWrites"`
}

// StepServers names a step, the MCP servers it calls and the MCP tools it
// calls them through.
type StepServers struct {
	Step    string   `json:"step"`
	Servers []string `json:"servers"`
	Tools   []string `json:"tools"`
}

// ToolSteps names a tool, its riskClass and the steps allowed to call it.
type ToolSteps struct {
	Tool      string   `json:"tool"`
	RiskClass string   `json:"riskClass"`
	Steps     []string `json:"steps"`
}

// Gate is a decision a person must take.
type Gate struct {
	Step    string `json:"step"`
	Purpose string `json:"purpose"`
	// Next is the step run on approval; "" ends the run.
	Next        string `json:"next"`
	NextMissing bool   `json:"nextMissing"` // Next names no step
	// OnReject is the step run on rejection; "" ends the run as rejected.
	OnReject        string `json:"onReject"`
	OnRejectMissing bool   `json:"onRejectMissing"` // OnReject names no step
}

// Step is one step of the playbook.
type Step struct {
	// Index is the 0-based position in the document.
	Index int `json:"index"`
	// Policy, for a gate, lists the harness policy's rules about who
	// decides it; null otherwise or when no policy was given.
	Policy []PolicyRule `json:"policy"`
	// ID is the step's id, "" when absent.
	ID string `json:"id"`
	// Ref is how the summary and the graph name the step: its id, or
	// "#<n>" (1-based position) when the id is absent.
	Ref     string `json:"ref"`
	Kind    string `json:"kind"` // "agent", "gate", or whatever the document says
	Purpose string `json:"purpose"`
	Agent   string `json:"agent"`
	// Next is the id of the step that follows (for a gate: on approval);
	// "" means the run ends.
	Next string `json:"next"`
	// NextMissing is true when Next names no step of the document.
	NextMissing bool `json:"nextMissing"`
	// OnReject is a gate's step on rejection; "" on a gate means the run
	// ends rejected.
	OnReject        string `json:"onReject"`
	OnRejectMissing bool   `json:"onRejectMissing"`
	// RiskClass is the highest riskClass of the step's tools: one of
	// [playbook.RiskClasses], [RiskUnknown] or [RiskNone].
	RiskClass string `json:"riskClass"`
	// RiskClaimed is true when a registry was consulted and the step's
	// risk rests on a riskClass it does not confirm: at least one tool's
	// riskClass is a claim, and the step's risk is neither "unknown" nor
	// "money" that a confirmed tool gives.
	RiskClaimed bool `json:"riskClaimed"`
	// ApprovalTools are the step's allowed tools that declare
	// requiresApproval true, in document order: each call to one waits
	// for a person. The step graph marks such a step.
	ApprovalTools []string `json:"approvalTools"`
	// AllowedTools are the step's allowed tools in document order, each
	// explained from its embedded definition.
	AllowedTools []Tool `json:"allowedTools"`
}

// Tool is one allowed tool as its embedded definition declares it.
type Tool struct {
	Name string `json:"name"`
	// Defined is false when the document embeds no definition of Name;
	// every other member but Family and Server is then empty or null.
	Defined bool `json:"defined"`
	// Family is "built-in", "connector", "mcp" or "unknown": "mcp" for a
	// name mcp.<server>.<tool>, otherwise from source (primitive: built-in,
	// connector: connector).
	Family        string `json:"family"`
	Source        string `json:"source"`
	ConnectorType string `json:"connectorType"`
	// Server is the <server> of an mcp.<server>.<tool> name.
	Server      string `json:"server"`
	Description string `json:"description"`
	// RiskClass is one of [playbook.RiskClasses] or "unknown".
	RiskClass string `json:"riskClass"`
	// DeclaredRiskClass is the document's riskClass when it is present but
	// not a known class (RiskClass is then "unknown").
	DeclaredRiskClass string `json:"declaredRiskClass"`
	// SideEffecting and RequiresApproval are null when not declared.
	SideEffecting    *bool  `json:"sideEffecting"`
	RequiresApproval *bool  `json:"requiresApproval"`
	Scope            string `json:"scope"`
	// Permissions, DataScopeResources and DataScopeWrites are null when not
	// declared, [] when declared empty.
	Permissions        []string `json:"permissions"`
	DataScopeResources []string `json:"dataScopeResources"`
	DataScopeWrites    []string `json:"dataScopeWrites"`
	// InRegistry says where the consulted registry has the tool from
	// ("builtin", "connector stripe", "mcp server memory"); "" when it
	// does not have it, or no registry was consulted.
	InRegistry string `json:"inRegistry"`
	// Claims lists the members the document declares (of those above:
	// description, source, connectorType, scope, riskClass, sideEffecting,
	// requiresApproval, permissions, dataScopeResources, dataScopeWrites)
	// whose value the consulted registry does not state the same: each is
	// the document's claim. Null when no registry was consulted; [] when
	// it confirms every declared value; every declared member when it does
	// not have the tool.
	Claims []string `json:"claims"`
	// Policy lists the harness policy's rules that apply to calls of the
	// tool in this step (each perhaps only when its condition holds), in
	// the harness's order. Null when no policy was given; [] when no rule
	// is about it.
	Policy []PolicyRule `json:"policy"`
}

// PolicyRule is one harness policy rule as it applies to a tool or gate
// (docs/policy.md).
type PolicyRule struct {
	Rule string `json:"rule"`
	// Effect is "requireApproval" or "deny".
	Effect string `json:"effect"`
	// When is the rule's CEL condition ("": always).
	When string `json:"when"`
	// Deciders are who may decide (empty: anyone the server lets decide).
	Deciders policy.Principals `json:"deciders"`
	// Approvals is how many distinct people must approve.
	Approvals    int  `json:"approvals"`
	SelfApproval bool `json:"selfApproval"`
}

// Requires is what a harness must provide: names and purposes, never
// credentials.
type Requires struct {
	Connections []Connection `json:"connections"`
	MCPServers  []MCPServer  `json:"mcpServers"`
	Secrets     []Secret     `json:"secrets"`
}

// Connection is one provider connection.
type Connection struct {
	Provider     string   `json:"provider"`
	AuthKind     string   `json:"authKind"`
	Scopes       []string `json:"scopes"`
	Capabilities []string `json:"capabilities"`
}

// MCPServer is one MCP server by logical name.
type MCPServer struct {
	Name      string   `json:"name"`
	ToolNames []string `json:"toolNames"`
}

// Secret is one named secret: its name and purpose, never a value.
type Secret struct {
	Name    string `json:"name"`
	Purpose string `json:"purpose"`
}

// Build computes the explanation of doc. doc may be partly invalid or nil:
// every field may be absent, and Build explains what it can without
// panicking. problems are the document's diagnostics (from reading and
// validating it); Build sorts a copy of them.
//
// No string of the explanation holds a credential: every one (but the
// digest, which Build computes), whether taken from the document (ids, names, purposes, descriptions, scopes,
// anything) or from problems, is passed through [credential.Redact]
// (pointers through [credential.RedactPointer]), after the explanation is
// computed from the strings as the document has them. So no format shows
// a credential the document holds; the validator reports it instead.
func Build(doc *playbook.Document, problems []diag.Diagnostic) *Explanation {
	return BuildWith(doc, problems, nil)
}

// BuildWith is [Build] with options: with a registry, each allowed tool's
// declared values are checked against it ([Tool.Claims]). A nil opts is
// Build.
func BuildWith(doc *playbook.Document, problems []diag.Diagnostic, opts *Options) *Explanation {
	if opts == nil {
		opts = &Options{}
	}
	e := explainDocument(doc, problems, opts)
	for i := range e.Problems {
		e.Problems[i].Pointer = credential.RedactPointer(e.Problems[i].Pointer)
	}
	redactStrings(reflect.ValueOf(e))
	e.InputSchema = redactJSON(e.InputSchema)
	// The digest is computed here, not taken from the document: set after
	// the redaction, so no credential rule can ever mistake its hex digits
	// for a secret.
	if doc != nil && doc.Source != nil {
		sum := sha256.Sum256(doc.Source)
		e.DocumentDigest = hex.EncodeToString(sum[:])
	}
	return e
}

// redactStrings replaces every string reachable from v through pointers,
// structs and slices with [credential.Redact] of it.
func redactStrings(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			redactStrings(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			redactStrings(v.Field(i))
		}
	case reflect.Slice:
		for i := range v.Len() {
			redactStrings(v.Index(i))
		}
	case reflect.String:
		if s := v.String(); len(s) >= credential.MinLen {
			if r := credential.Redact(s); r != s {
				v.SetString(r)
			}
		}
	}
}

// explainDocument is [BuildWith] before the strings are redacted.
func explainDocument(doc *playbook.Document, problems []diag.Diagnostic, opts *Options) *Explanation {
	e := &Explanation{
		Problems: []Problem{},
		Manifest: Manifest{RequiredConnectors: []string{}},
		Input:    []InputField{},
		Registry: Registry{Consulted: opts.Registry != nil, Source: opts.Source, Unavailable: slices.Clone(opts.Unavailable)},
		Summary: Summary{
			Money:            []StepTools{},
			CustomerComms:    []StepTools{},
			DataScopeWrites:  []StepScopes{},
			MCPServers:       []StepServers{},
			RequiresApproval: []ToolSteps{},
			Gates:            []Gate{},
			UndefinedTools:   []ToolSteps{},
			UnknownRisk:      []ToolSteps{},
		},
		Steps: []Step{},
		Requires: Requires{
			Connections: []Connection{},
			MCPServers:  []MCPServer{},
			Secrets:     []Secret{},
		},
	}
	ds := slices.Clone(problems)
	diag.Sort(ds)
	for _, d := range ds {
		e.Problems = append(e.Problems, Problem{
			File: d.File, Line: d.Line, Column: d.Column, Pointer: d.Pointer,
			Severity: d.Severity.String(), Rule: d.Rule, Message: d.Message,
		})
		switch d.Severity {
		case diag.Error:
			e.ProblemCounts.Errors++
		case diag.Warning:
			e.ProblemCounts.Warnings++
		default:
			e.ProblemCounts.Infos++
		}
	}
	if e.Registry.Unavailable == nil {
		e.Registry.Unavailable = []string{}
	}
	if doc == nil {
		e.Summary.RiskClass = RiskNone
		return e
	}
	e.OpenPlaybook = playbook.Str(doc.OpenPlaybook)
	e.InputSchema, e.Input = explainInput(doc)
	if m := doc.Manifest; m != nil {
		e.Manifest = Manifest{
			ID:                 playbook.Str(m.ID),
			Name:               playbook.Str(m.Name),
			Version:            playbook.Str(m.Version),
			Description:        playbook.Str(m.Description),
			RequiredConnectors: values(m.RequiredConnectors),
		}
	}
	buildSteps(e, doc, opts.Registry)
	if opts.Policy != nil {
		applyPolicy(e, opts.Policy, opts.Registry)
	}
	buildSummary(e)
	buildRequires(e, doc)
	return e
}

func buildSteps(e *Explanation, doc *playbook.Document, reg *registry.Registry) {
	defs := map[string]*playbook.Tool{}
	for _, t := range doc.Tools {
		if t == nil || t.Name == nil {
			continue
		}
		if _, dup := defs[t.Name.Value]; !dup {
			defs[t.Name.Value] = t
		}
	}
	ids := map[string]bool{}
	for _, s := range doc.Steps {
		if s != nil && s.ID != nil {
			ids[s.ID.Value] = true
		}
	}
	for _, s := range doc.Steps {
		if s == nil {
			continue
		}
		i := len(e.Steps)
		st := Step{
			Index:         i,
			ID:            playbook.Str(s.ID),
			Kind:          playbook.Str(s.Kind),
			Purpose:       playbook.Str(s.Purpose),
			Agent:         playbook.Str(s.Agent),
			Next:          playbook.Str(s.Next),
			OnReject:      playbook.Str(s.OnReject),
			ApprovalTools: []string{},
			AllowedTools:  []Tool{},
		}
		st.Ref = st.ID
		if s.ID == nil {
			st.Ref = "#" + strconv.Itoa(i+1)
		}
		st.NextMissing = s.Next != nil && !ids[st.Next]
		st.OnRejectMissing = s.OnReject != nil && !ids[st.OnReject]
		for _, name := range s.AllowedTools.Values() {
			t := explainTool(name, defs[name])
			if reg != nil {
				confirm(&t, reg)
			}
			st.AllowedTools = append(st.AllowedTools, t)
		}
		risks := make([]string, len(st.AllowedTools))
		for j, t := range st.AllowedTools {
			risks[j] = t.RiskClass
			if t.RequiresApproval != nil && *t.RequiresApproval {
				st.ApprovalTools = appendNew(st.ApprovalTools, t.Name)
			}
		}
		st.RiskClass = highest(risks)
		st.RiskClaimed = riskClaimed(st)
		e.Steps = append(e.Steps, st)
	}
	if len(e.Steps) > 0 {
		e.EntryStep = e.Steps[0].Ref
	}
}

// applyPolicy lists, for every allowed tool and gate, the rules of p that
// may apply to it. What serves a tool (a rule's connectors) is the
// registry's; without one, such rules match nothing.
func applyPolicy(e *Explanation, p *policy.Policy, reg *registry.Registry) {
	for i := range e.Steps {
		st := &e.Steps[i]
		if st.Kind == "gate" {
			st.Policy = policyRules(p.GateRules(st.ID))
		}
		for j := range st.AllowedTools {
			t := &st.AllowedTools[j]
			c := policy.Call{Tool: t.Name, Step: st.ID}
			if t.RiskClass != RiskUnknown {
				c.RiskClass = t.RiskClass
			}
			if reg != nil {
				if entry, ok := reg.Lookup(t.Name); ok {
					c.Connector = entry.Origin.Name
					if entry.Origin.Kind == registry.Builtin {
						c.Connector = "builtin"
					}
				}
			}
			t.Policy = policyRules(p.About(c))
		}
	}
}

func policyRules(ms []policy.Match) []PolicyRule {
	out := []PolicyRule{}
	for _, m := range ms {
		out = append(out, PolicyRule{Rule: m.Rule, Effect: m.Effect, When: m.When, Deciders: m.Deciders, Approvals: m.Approvals, SelfApproval: m.SelfApproval})
	}
	return out
}

// explainTool explains the allowed tool name from its definition def (nil
// when the document embeds none).
func explainTool(name string, def *playbook.Tool) Tool {
	t := Tool{Name: name, RiskClass: RiskUnknown, Family: FamilyUnknown}
	server, isMCP := mcpServerOf(name)
	if isMCP {
		t.Family, t.Server = FamilyMCP, server
	}
	if def == nil {
		return t
	}
	t.Defined = true
	t.Source = playbook.Str(def.Source)
	if !isMCP {
		switch t.Source {
		case "primitive":
			t.Family = FamilyBuiltIn
		case "connector":
			t.Family = FamilyConnector
		}
	}
	t.ConnectorType = playbook.Str(def.ConnectorType)
	t.Description = playbook.Str(def.Description)
	if rc := playbook.Str(def.RiskClass); playbook.RiskRank(rc) >= 0 {
		t.RiskClass = rc
	} else if def.RiskClass != nil {
		t.DeclaredRiskClass = rc
	}
	t.SideEffecting = boolPtr(def.SideEffecting)
	t.RequiresApproval = boolPtr(def.RequiresApproval)
	t.Scope = playbook.Str(def.Scope)
	t.Permissions = valuesOrNil(def.Permissions)
	t.DataScopeResources = valuesOrNil(def.DataScopeResources)
	t.DataScopeWrites = valuesOrNil(def.DataScopeWrites)
	return t
}

// riskClaimed reports whether st's highest risk rests on a riskClass the
// consulted registry does not confirm: some tool's is a claim, and the
// step's risk is neither unknown (which claims nothing) nor money that a
// confirmed tool already gives (nothing a claim says can change it).
func riskClaimed(st Step) bool {
	claimed, confirmedMoney := false, false
	for _, t := range st.AllowedTools {
		switch {
		case slices.Contains(t.Claims, "riskClass"):
			claimed = true
		case t.Claims != nil && t.RiskClass == "money":
			confirmedMoney = true
		}
	}
	if st.RiskClass == RiskUnknown || st.RiskClass == RiskNone || st.RiskClass == "money" && confirmedMoney {
		return false
	}
	return claimed
}

// mcpServerOf returns the <server> of a tool name mcp.<server>.<tool>
// (both parts non-empty; <tool> is everything after the second dot), and
// whether name is in the MCP family at all.
func mcpServerOf(name string) (server string, ok bool) {
	rest, ok := strings.CutPrefix(name, "mcp.")
	if !ok {
		return "", false
	}
	server, tool, ok := strings.Cut(rest, ".")
	if !ok || server == "" || tool == "" {
		return "", false
	}
	return server, true
}

// highest returns the highest of the risk values: "none" for no values,
// "money" when any is money (nothing is riskier), otherwise "unknown" when
// any is unknown or none, otherwise the highest known class. A "none"
// value (a step without tools) does not raise the result.
func highest(risks []string) string {
	top, unknown, seen := -1, false, false
	for _, r := range risks {
		if r == RiskNone {
			continue
		}
		seen = true
		if k := playbook.RiskRank(r); k >= 0 {
			top = max(top, k)
		} else {
			unknown = true
		}
	}
	switch {
	case !seen:
		return RiskNone
	case top == len(playbook.RiskClasses)-1:
		return playbook.RiskClasses[top]
	case unknown:
		return RiskUnknown
	}
	return playbook.RiskClasses[top]
}

func buildSummary(e *Explanation) {
	s := &e.Summary
	risks := make([]string, len(e.Steps))
	approvals := newToolIndex()
	undefined := newToolIndex()
	unknown := newToolIndex()
	for i, st := range e.Steps {
		risks[i] = st.RiskClass
		if st.Kind == "gate" {
			s.Gates = append(s.Gates, Gate{Step: st.Ref, Purpose: st.Purpose,
				Next: st.Next, NextMissing: st.NextMissing, OnReject: st.OnReject, OnRejectMissing: st.OnRejectMissing})
		}
		var money, comms, writes, servers, mcpTools []string
		for _, t := range st.AllowedTools {
			switch t.RiskClass {
			case "money":
				money = appendNew(money, t.Name)
			case "customer_comms":
				comms = appendNew(comms, t.Name)
			}
			for _, w := range t.DataScopeWrites {
				writes = appendNew(writes, w)
			}
			if t.Family == FamilyMCP && t.Server != "" {
				servers = appendNew(servers, t.Server)
				mcpTools = appendNew(mcpTools, t.Name)
			}
			if t.RequiresApproval != nil && *t.RequiresApproval {
				approvals.add(t, st.Ref)
			}
			switch {
			case !t.Defined:
				undefined.add(t, st.Ref)
			case t.RiskClass == RiskUnknown:
				unknown.add(t, st.Ref)
			}
		}
		if money != nil {
			s.Money = append(s.Money, StepTools{Step: st.Ref, Tools: money})
		}
		if comms != nil {
			s.CustomerComms = append(s.CustomerComms, StepTools{Step: st.Ref, Tools: comms})
		}
		if writes != nil {
			slices.Sort(writes)
			s.DataScopeWrites = append(s.DataScopeWrites, StepScopes{Step: st.Ref, DataScopeWrites: writes})
		}
		if servers != nil {
			s.MCPServers = append(s.MCPServers, StepServers{Step: st.Ref, Servers: servers, Tools: mcpTools})
		}
	}
	s.RiskClass = highest(risks)
	s.RequiresApproval = approvals.list
	s.UndefinedTools = undefined.list
	s.UnknownRisk = unknown.list
}

// toolIndex collects tools and the steps using them, in first-use order.
type toolIndex struct {
	list []ToolSteps
	at   map[string]int
}

func newToolIndex() *toolIndex { return &toolIndex{list: []ToolSteps{}, at: map[string]int{}} }

func (x *toolIndex) add(t Tool, step string) {
	i, ok := x.at[t.Name]
	if !ok {
		i = len(x.list)
		x.at[t.Name] = i
		x.list = append(x.list, ToolSteps{Tool: t.Name, RiskClass: t.RiskClass, Steps: []string{}})
	}
	x.list[i].Steps = appendNew(x.list[i].Steps, step)
}

func buildRequires(e *Explanation, doc *playbook.Document) {
	q := doc.Requires
	if q == nil {
		return
	}
	for _, c := range q.Connections {
		if c == nil {
			continue
		}
		e.Requires.Connections = append(e.Requires.Connections, Connection{
			Provider:     playbook.Str(c.Provider),
			AuthKind:     playbook.Str(c.AuthKind),
			Scopes:       values(c.Scopes),
			Capabilities: values(c.Capabilities),
		})
	}
	for _, m := range q.MCPServers {
		if m == nil {
			continue
		}
		e.Requires.MCPServers = append(e.Requires.MCPServers, MCPServer{Name: playbook.Str(m.Name), ToolNames: values(m.ToolNames)})
	}
	for _, s := range q.Secrets {
		if s == nil {
			continue
		}
		e.Requires.Secrets = append(e.Requires.Secrets, Secret{Name: playbook.Str(s.Name), Purpose: playbook.Str(s.Purpose)})
	}
}

func values(l *playbook.StringList) []string {
	if v := l.Values(); v != nil {
		return v
	}
	return []string{}
}

func valuesOrNil(l *playbook.StringList) []string {
	if l == nil {
		return nil
	}
	return values(l)
}

func boolPtr(b *playbook.Bool) *bool {
	if b == nil {
		return nil
	}
	v := b.Value
	return &v
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
