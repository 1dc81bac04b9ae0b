package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/runtime"
)

// viewTool is a read tool a call's card offers for the current state of
// the call's target ([runtime.ViewTools]).
type viewTool struct {
	Name        string
	Description string
	// With is the read's arguments in a few words ("chargeId ch_…").
	With string
}

// viewed is what a read of the target gave, as the card shows it: the
// result's members with what the tool's outputSchema says of each.
type viewed struct {
	Run  string
	Tool string
	With string
	Rows []decisionArg
	// Error says why there is no result.
	Error string
	// Seq is the view.read audit record.
	Seq int64
}

// schemaOf returns the embedded input and output schemas of tool in rc's
// document (nil when it embeds none).
func (rc *runContext) schemaOf(tool string) (in, out jsontext.Value) {
	if rc.checked.Doc == nil {
		return nil, nil
	}
	t := rc.checked.Doc.ToolNamed(tool)
	if t == nil {
		return nil, nil
	}
	d := t.Definition(rc.rec.Document)
	return d.InputSchema, d.OutputSchema
}

// viewTools are the read tools offered on the card of p, a call.
func (c *Console) viewTools(rc *runContext, p Pending) []viewTool {
	var out []viewTool
	for _, vt := range runtime.ViewTools(rc.checked.Doc, p.Step, p.Tool, p.Arguments) {
		in, _ := rc.schemaOf(vt.Name)
		_, _, with := c.decisionArgs(vt.Arguments, in)
		out = append(out, viewTool{Name: c.line(vt.Name), Description: c.text(vt.Description), With: strings.Join(with, ", ")})
	}
	return out
}

// viewedOf is v as the card shows it.
func (c *Console) viewedOf(rc *runContext, v runtime.Viewed) *viewed {
	in, out := rc.schemaOf(v.Tool)
	_, _, with := c.decisionArgs(v.Arguments, in)
	s := &viewed{Run: rc.rs.Run, Tool: c.line(v.Tool), With: strings.Join(with, ", "), Error: c.text(v.Error), Seq: v.Seq}
	if v.Error == "" {
		s.Rows, _, _ = c.decisionArgs(v.Result, out)
	}
	return s
}

type viewData struct {
	Run  string
	Item *pendingView
	// Viewed is shown alone when the call no longer waits.
	Viewed *viewed
}

// view reads the current state of a waiting call's target (form fields
// id, the approval, and tool, the read tool) and shows the call's card
// with it. The page has no event stream: it does not reload (which would
// post the form again); its decision form decides as the run page's does.
func (c *Console) view(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	run := r.PathValue("run")
	id, tool := r.PostFormValue("id"), r.PostFormValue("tool")
	if id == "" || tool == "" {
		c.errorPage(w, r, http.StatusBadRequest, "the form names no approval (field id) or no read tool (field tool)")
		return
	}
	got, err := c.b.View(ctx, run, id, tool, c.by(r))
	if err != nil {
		status := http.StatusConflict
		if errors.Is(err, runtime.ErrNotDecider) {
			status = http.StatusForbidden
		}
		c.fail(w, r, status, err)
		return
	}
	rc, err := c.runContext(ctx, run)
	if err != nil {
		c.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	pend, err := c.b.Pending(ctx, run)
	if err != nil {
		c.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d := viewData{Run: run, Viewed: c.viewedOf(rc, got)}
	for _, p := range pend {
		if p.ID == id {
			v := c.pendingView(rc, p, "", "/runs/"+run)
			v.SSO, _ = c.b.SSO()
			v.Viewed = d.Viewed
			d.Item = &v
			break
		}
	}
	c.renderView(w, r, http.StatusOK, "view", view{Title: "The target now", Data: d})
}
