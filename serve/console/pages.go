package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/explain"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// Login.

type loginData struct {
	Next  string
	Error string
	// SSO shows the single sign-on link; Token the operator token form.
	SSO, Token bool
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	sso, token := c.b.SSO()
	c.render(w, r, http.StatusOK, "login", "Log in", loginData{Next: localPath(r.URL.Query().Get("next"), "/"), SSO: sso, Token: token})
}

// login exchanges the operator token for a session cookie. A wrong token
// gets the form again, saying only that it is wrong.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.PostFormValue("next"), "/")
	sso, token := c.b.SSO()
	if !c.b.CheckOperatorToken(r.PostFormValue("token")) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="openplaybook"`)
		c.render(w, r, http.StatusUnauthorized, "login", "Log in", loginData{Next: next, SSO: sso, Token: token,
			Error: "That is not the operator token. Paste the value of the secret that the harness's serve.operatorTokenSecret names."})
		return
	}
	cookie, csrf, err := c.b.Login()
	if err != nil {
		c.errorPage(w, r, http.StatusInternalServerError, "The login could not be recorded: "+c.b.Redact(err.Error()))
		return
	}
	http.SetCookie(w, cookie)
	c.SignedIn(w, r, csrf, next)
}

// SignedIn answers a login that started a session whose CSRF token is
// csrf: the token goes to this origin's storage through this one answer
// (to the POST with the operator token, or the single sign-on callback),
// never in another page (console.js; docs/console.md, "Security"). next
// is where to go then; one that is not a path of this server is "/".
func (c *Console) SignedIn(w http.ResponseWriter, r *http.Request, csrf, next string) {
	c.render(w, r, http.StatusOK, "signedin", "Logged in", signedIn{CSRF: csrf, Next: localPath(next, "/")})
}

// signedIn is the answer to a login: the session's CSRF token, for the
// console's script to keep, and where to go next.
type signedIn struct {
	CSRF, Next string
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, c.b.Logout(r))
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// Runs.

type runRow struct {
	runtime.RunStatus
	Executing bool
	// Mine are the ids of what the run waits for that the logged-in
	// person may decide now (set on the "waiting on me" list only).
	Mine map[string]bool
}

// RunsPageSize is how many runs the runs page lists at a time.
const RunsPageSize = 50

// runsData is the runs page: one page of the runs the filters keep,
// newest first, read in one query (no count of every run: that would
// read every run).
type runsData struct {
	Rows []runRow
	// From and To are the 1-based positions shown (0 when none); Last
	// says this is the last page, so To is how many runs match.
	From, To int
	Last     bool
	// Status, Playbook, Decide and Mine are the filters (Decide: only
	// runs that wait for a gate or call decision; Mine: of those, only
	// the ones with a decision the logged-in person may make now, see
	// [Console.waitsOnMe]); Filtered says one is set. With Mine, Rows
	// are those of the page's runs that wait on the person, and From, To
	// and Last count the runs waiting for a decision.
	Status, Playbook       string
	Decide, Mine, Filtered bool
	// NotDecider, with Mine, says why nothing waits on this session (the
	// operator token, with serve.oidc; not one of serve.oidc.deciders).
	NotDecider string
	// Errors are the runs whose decisions could not be read.
	Errors []string
	// Statuses are the status filter's choices.
	Statuses []string
	// First and Next are the query strings of the first page and of the
	// next ("" for none).
	First, Next string
}

// listQuery is a page of the runs list as the console's URLs give it:
// the filters (status, playbook, decide, mine), cursor, limit, and from
// (the position of the page's first run, for display only). mine
// ("waiting on me") implies decide: the store pages the runs waiting for
// a decision, and the page shows those of them that wait on the person.
type listQuery struct {
	filter store.RunFilter
	mine   bool
	cursor string
	limit  int
	from   int
}

// listQueryOf reads a listQuery from a URL's query; a status that is not
// one of the five is an error.
func listQueryOf(q url.Values) (listQuery, error) {
	lq := listQuery{cursor: q.Get("cursor"), limit: RunsPageSize, from: 1}
	if st := q.Get("status"); st != "" {
		if !store.RunStatus(st).Valid() {
			return lq, fmt.Errorf("there is no run status %q", st)
		}
		lq.filter.Statuses = []store.RunStatus{store.RunStatus(st)}
	}
	lq.filter.Playbook = q.Get("playbook")
	lq.mine = flagOn(q.Get("mine"))
	lq.filter.Decide = flagOn(q.Get("decide")) || lq.mine
	if n, err := strconv.Atoi(q.Get("limit")); err == nil {
		lq.limit = store.ClampRunPage(n)
	}
	if n, err := strconv.Atoi(q.Get("from")); err == nil && n > 1 {
		lq.from = n
	}
	return lq, nil
}

// values is lq as a URL query (without its defaults).
func (lq listQuery) values() url.Values {
	v := url.Values{}
	if len(lq.filter.Statuses) == 1 {
		v.Set("status", string(lq.filter.Statuses[0]))
	}
	if lq.filter.Playbook != "" {
		v.Set("playbook", lq.filter.Playbook)
	}
	if lq.mine {
		v.Set("mine", "1")
	} else if lq.filter.Decide {
		v.Set("decide", "1")
	}
	if lq.cursor != "" {
		v.Set("cursor", lq.cursor)
	}
	if lq.limit != RunsPageSize {
		v.Set("limit", strconv.Itoa(lq.limit))
	}
	if lq.from > 1 {
		v.Set("from", strconv.Itoa(lq.from))
	}
	return v
}

func (c *Console) runsPage(w http.ResponseWriter, r *http.Request) {
	lq, err := listQueryOf(r.URL.Query())
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	lq.limit = RunsPageSize
	runs, next, err := c.b.RunsPage(r.Context(), lq.filter, lq.cursor, lq.limit)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	d := runsData{Playbook: lq.filter.Playbook, Decide: lq.filter.Decide, Mine: lq.mine, Last: next == "",
		Statuses: []string{string(store.RunRunning), string(store.RunWaiting), string(store.RunCompleted), string(store.RunRejected), string(store.RunFailed)}}
	if len(lq.filter.Statuses) == 1 {
		d.Status = string(lq.filter.Statuses[0])
	}
	d.Filtered = d.Status != "" || d.Playbook != "" || d.Decide || d.Mine
	if len(runs) > 0 {
		d.From, d.To = lq.from, lq.from+len(runs)-1
	}
	if lq.mine {
		d.NotDecider, err = c.notDecider(r.Context())
		if err != nil {
			c.fail(w, r, http.StatusInternalServerError, err)
			return
		}
	}
	for _, rs := range runs {
		row := runRow{RunStatus: rs, Executing: c.b.Executing(rs.Run)}
		if lq.mine {
			if d.NotDecider != "" {
				continue
			}
			mine, err := c.waitsOnMe(r.Context(), rs.Run)
			if err != nil {
				d.Errors = append(d.Errors, fmt.Sprintf("run %s: %v", rs.Run, err))
			}
			if len(mine) == 0 {
				continue
			}
			row.Mine = mine
		}
		d.Rows = append(d.Rows, row)
	}
	if lq.cursor != "" {
		first := lq
		first.cursor, first.from = "", 1
		d.First = "?" + first.values().Encode()
	}
	if next != "" {
		older := lq
		older.cursor, older.from = next, d.To+1
		d.Next = "?" + older.values().Encode()
	}
	events := lq.values()
	events.Set("since", c.runsState(runs))
	c.renderView(w, r, http.StatusOK, "runs", view{Title: "Runs", Nav: "runs", Events: "/events?" + events.Encode(), Data: d})
}

// notDecider says why the logged-in session may decide nothing ("" when
// it may decide something): with serve.oidc, the operator token, or a
// person outside serve.oidc.deciders.
func (c *Console) notDecider(ctx context.Context) (string, error) {
	err := c.b.MayDecide(ctx, "", "")
	if errors.Is(err, runtime.ErrNotDecider) {
		return "Nothing waits on you: " + err.Error() + ".", nil
	}
	return "", err
}

// decidable reports whether a person decides what p waits for (a gate, a
// call's approval, a call whose outcome is unknown).
func decidable(p runtime.Pending) bool {
	return p.Kind == "gate" || p.Kind == "call" || p.Kind == "outcome_unknown"
}

// waitsOnMe returns the ids of what run waits for that the logged-in
// person may approve now ([Backend.MayDecide]).
func (c *Console) waitsOnMe(ctx context.Context, run string) (map[string]bool, error) {
	pend, err := c.b.Pending(ctx, run)
	if err != nil {
		return nil, err
	}
	var mine map[string]bool
	for _, p := range pend {
		if decidable(p.Pending) && c.b.MayDecide(ctx, run, p.ID) == nil {
			if mine == nil {
				mine = map[string]bool{}
			}
			mine[p.ID] = true
		}
	}
	return mine, nil
}

// A run.

type runData struct {
	runRow
	Record  store.Run
	Ended   bool
	Waiting []pendingView
	Graph   template.HTML
	Steps   []stepView
	Other   []runtime.StepStatus // attempts of steps the document does not have
	Records []audit.Record
	Invalid []diag.Diagnostic // the document's errors, if it has any now
}

// stepView is a step of the run's document and its attempts.
type stepView struct {
	explain.Step
	Attempts []runtime.StepStatus
	Current  bool
}

func (c *Console) runPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("run")
	// The state the page's event stream compares with is read first:
	// whatever changes after it is announced to the page.
	executing := c.b.Executing(id)
	rec, err := c.b.RunRecord(ctx, id)
	if err != nil {
		c.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	since := fmt.Sprintf("%s-%d-%t", rec.Status, rec.AuditSeq, executing)
	rs, err := c.b.Run(ctx, id)
	if err != nil {
		c.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	au, err := c.b.Audit(ctx, id, false)
	if err != nil {
		c.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	rc := &runContext{rs: rs, rec: rec, checked: check("document of "+id, rec.Document), records: au.Records}
	d := runData{runRow: runRow{RunStatus: rs, Executing: executing}, Record: rec, Records: au.Records,
		Ended: store.RunStatus(rs.Status).Ended(), Graph: graph(rc.checked.Explanation)}
	for _, dg := range rc.checked.Diagnostics {
		if dg.Severity == diag.Error {
			d.Invalid = append(d.Invalid, dg)
		}
	}
	if apr, err := c.b.Approvals(ctx, id); err == nil {
		rc.approvals = apr
	}
	pend, err := c.b.Pending(ctx, id)
	if err != nil {
		c.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	csrf := "" // filled in by console.js (see renderView)
	for _, p := range pend {
		v := c.pendingView(rc, p, csrf, "/runs/"+id)
		v.SSO, _ = c.b.SSO()
		d.Waiting = append(d.Waiting, v)
	}
	seen := map[string]bool{}
	for _, st := range rc.checked.Explanation.Steps {
		sv := stepView{Step: st, Current: st.ID != "" && st.ID == rs.Step}
		if st.ID != "" && !seen[st.ID] {
			seen[st.ID] = true
			for _, a := range rs.Steps {
				if a.Step == st.ID {
					sv.Attempts = append(sv.Attempts, a)
				}
			}
		}
		d.Steps = append(d.Steps, sv)
	}
	for _, a := range rs.Steps {
		if !seen[a.Step] {
			d.Other = append(d.Other, a)
		}
	}
	c.renderView(w, r, http.StatusOK, "run", view{Title: "Run " + id, Nav: "runs", Events: "/events?run=" + urlQueryEscape(id) + "&since=" + urlQueryEscape(since), Data: d})
}

// runContext is what the pending items of one run are shown with.
type runContext struct {
	rs        runtime.RunStatus
	rec       store.Run
	checked   checked
	approvals []store.Approval
	records   []audit.Record
}

// pendingView is one thing a run waits for, with what a person reads to
// decide it.
type pendingView struct {
	Pending
	CSRF string
	// SSO hides the form's "By": the server records the verified person.
	SSO bool
	// Back is where the decision form returns to.
	Back string
	// Purpose is the step's purpose in the run's document.
	Purpose string
	// Def is the called tool's embedded definition, as explain reads
	// it; nil when the document embeds none.
	Def *explain.Tool
	// Approval is the stored approval (its bound digest, expiry); nil
	// when it is not pending in the store.
	Approval *store.Approval
	// Requested is the approval.requested audit record's data: the
	// embedded definition's digest, the digest the approval is bound to
	// and what serves the tool; nil when the log has none.
	Requested *runtime.ApprovalRequested
	// BindMismatch is set when the stored approval is bound to another
	// digest than the audit log recorded.
	BindMismatch bool
	// Prior are the run's step attempts before a gate, with their
	// outputs: what its reviewer reads.
	Prior []priorView

	// Args are the call's arguments, each with what the tool's
	// inputSchema says of it; Omitted the schema's properties the call
	// leaves out (with their defaults); Does the one line of what the
	// call does.
	Args    []decisionArg
	Omitted []omittedArg
	Does    string
	// GateSeq is the audit record of the last gate approval before the
	// call was asked (0 for none): the decision that led here.
	GateSeq int64
	// Unlocks are the steps a gate's approval runs (up to the run's end
	// or the next gate); Ends is set when the run ends after them;
	// OnReject is the step a rejection goes to ("" ends the run).
	Unlocks  []unlock
	Ends     bool
	OnReject string
	// Views are the read tools that show the current state of a call's
	// target; Viewed, on the page that answers a read, what it gave.
	Views  []viewTool
	Viewed *viewed
}

// priorView is an earlier step attempt before a gate: text first.
type priorView struct {
	runtime.StepStatus
	Text []priorText
}

func (c *Console) pendingView(rc *runContext, p Pending, csrf, back string) pendingView {
	v := pendingView{Pending: p, CSRF: csrf, Back: back}
	e := rc.checked.Explanation
	for _, st := range e.Steps {
		if st.ID != "" && st.ID == p.Step {
			v.Purpose = st.Purpose
			for _, t := range st.AllowedTools {
				if p.Tool != "" && t.Name == p.Tool && t.Defined {
					v.Def = &t
					break
				}
			}
			break
		}
	}
	if p.Kind == "call" || p.Kind == "outcome_unknown" {
		for i := range rc.approvals {
			if rc.approvals[i].ID == p.ID {
				v.Approval = &rc.approvals[i]
				break
			}
		}
		for _, rec := range rc.records {
			if rec.Kind != string(runtime.KindApprovalRequested) {
				continue
			}
			var ar runtime.ApprovalRequested
			if json.Unmarshal(rec.Data, &ar) == nil && ar.Approval == p.ID {
				v.Requested = &ar
				break
			}
		}
	gates:
		for _, rec := range rc.records {
			switch rec.Kind {
			case string(runtime.KindGateApproved):
				v.GateSeq = rec.Seq
			case string(runtime.KindApprovalRequested):
				var ar runtime.ApprovalRequested
				if json.Unmarshal(rec.Data, &ar) == nil && ar.Approval == p.ID {
					break gates
				}
			}
		}
		var schema jsontext.Value
		if rc.checked.Doc != nil {
			if t := rc.checked.Doc.ToolNamed(p.Tool); t != nil {
				schema = t.Definition(rc.rec.Document).InputSchema
			}
		}
		if p.Altered == "" {
			var with []string
			v.Args, v.Omitted, with = c.decisionArgs(p.Arguments, schema)
			v.Does = c.callSummary(p.Tool, v.Def, with, v.Omitted)
			v.Views = c.viewTools(rc, p)
		}
		if v.Approval != nil && v.Requested != nil && v.Requested.BindDigest != v.Approval.DefDigest {
			v.BindMismatch = true
		}
	}
	if p.Kind == "gate" {
		for _, a := range rc.rs.Steps {
			if a.Step != p.Step && (len(a.Output) > 0 || a.Error != "") {
				v.Prior = append(v.Prior, priorView{StepStatus: a, Text: c.outputText(a.Output)})
			}
		}
		v.Unlocks, v.Ends = unlocks(e, p.Step)
		for _, st := range e.Steps {
			if st.ID == p.Step {
				v.OnReject = st.OnReject
				break
			}
		}
	}
	return v
}

// Approvals across runs.

type approvalsData struct {
	Items  []pendingView
	Errors []string
	// Mine shows only what the logged-in person may decide now
	// (?mine=1); NotDecider says why nothing waits on this session.
	Mine       bool
	NotDecider string
}

func (c *Console) approvalsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	// The page shows what the runs that wait for a decision wait for;
	// its state is the list of those runs (up to the largest page).
	watch := listQuery{filter: store.RunFilter{Decide: true}, limit: store.MaxRunPage}.values()
	watch.Set("since", c.state(ctx, watch))
	pend, err := c.b.Pending(ctx, "")
	if err != nil {
		c.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	csrf := "" // filled in by console.js (see renderView)
	d := approvalsData{Mine: flagOn(r.URL.Query().Get("mine"))}
	if d.Mine {
		if d.NotDecider, err = c.notDecider(ctx); err != nil {
			c.fail(w, r, http.StatusInternalServerError, err)
			return
		}
	}
	runs := map[string]*runContext{}
	for _, p := range pend {
		if d.Mine && (d.NotDecider != "" || !decidable(p.Pending) || c.b.MayDecide(ctx, p.Run, p.ID) != nil) {
			continue
		}
		rc, ok := runs[p.Run]
		if !ok {
			rc, err = c.runContext(ctx, p.Run)
			if err != nil {
				d.Errors = append(d.Errors, fmt.Sprintf("run %s: %v", p.Run, err))
			}
			runs[p.Run] = rc
		}
		if rc == nil {
			continue
		}
		v := c.pendingView(rc, p, csrf, "/approvals")
		v.SSO, _ = c.b.SSO()
		d.Items = append(d.Items, v)
	}
	c.renderView(w, r, http.StatusOK, "approvals", view{Title: "Approvals", Nav: "approvals", Events: "/events?" + watch.Encode(), Data: d})
}

func (c *Console) runContext(ctx context.Context, id string) (*runContext, error) {
	rs, err := c.b.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	rec, err := c.b.RunRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	au, err := c.b.Audit(ctx, id, false)
	if err != nil {
		return nil, err
	}
	apr, err := c.b.Approvals(ctx, id)
	if err != nil {
		return nil, err
	}
	return &runContext{rs: rs, rec: rec, checked: check("document of "+id, rec.Document), approvals: apr, records: au.Records}, nil
}

// decide records a verdict on a gate or approval; the form's decision
// is "approve" or "deny".
func (c *Console) decide(w http.ResponseWriter, r *http.Request) {
	run := r.PathValue("run")
	var approve bool
	switch r.PostFormValue("decision") {
	case "approve":
		approve = true
	case "deny":
	default:
		c.errorPage(w, r, http.StatusBadRequest, `the form's decision must be "approve" or "deny"`)
		return
	}
	id := r.PostFormValue("id")
	if id == "" {
		c.errorPage(w, r, http.StatusBadRequest, "the form names no gate or approval (field id)")
		return
	}
	v := runtime.Verdict{Approve: approve, Reason: c.b.Redact(r.PostFormValue("reason")), By: c.by(r)}
	if _, err := c.b.Decide(r.Context(), run, id, v); err != nil {
		c.fail(w, r, http.StatusConflict, err)
		return
	}
	http.Redirect(w, r, localPath(r.PostFormValue("back"), "/runs/"+run), http.StatusSeeOther)
}

// by is who the form says decides, "console" when it says nothing.
func (c *Console) by(r *http.Request) string {
	if by := strings.TrimSpace(r.PostFormValue("by")); by != "" {
		return c.b.Redact(by)
	}
	return "console"
}

func (c *Console) cancel(w http.ResponseWriter, r *http.Request) {
	run := r.PathValue("run")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if reason == "" {
		reason = "cancelled in the console"
	}
	if err := c.b.CancelRun(r.Context(), run, c.by(r), c.b.Redact(reason)); err != nil {
		c.fail(w, r, http.StatusConflict, err)
		return
	}
	http.Redirect(w, r, "/runs/"+run, http.StatusSeeOther)
}

func (c *Console) resume(w http.ResponseWriter, r *http.Request) {
	run := r.PathValue("run")
	ds, err := c.b.ResumeRun(r.Context(), run)
	if err != nil {
		msg := err.Error()
		for _, d := range ds {
			if d.Severity == diag.Error {
				msg += "\n" + diagLine(d)
			}
		}
		c.fail(w, r, http.StatusConflict, errors.New(msg))
		return
	}
	http.Redirect(w, r, "/runs/"+run, http.StatusSeeOther)
}

func diagLine(d diag.Diagnostic) string {
	at := d.File
	if p := position(d); p != "" {
		at += ":" + p
	}
	return fmt.Sprintf("%s: %s: %s [%s]", at, d.Severity, d.Message, d.Rule)
}

// Audit.

type auditData struct {
	Run      string
	Records  []audit.Record
	Verified *bool
	Problems []Problem
}

func (c *Console) auditPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("run")
	verify := r.URL.Query().Get("verify") != ""
	au, err := c.b.Audit(r.Context(), id, verify)
	if err != nil {
		c.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	c.renderView(w, r, http.StatusOK, "audit", view{Title: "Audit of " + id, Nav: "runs",
		Data: auditData{Run: id, Records: au.Records, Verified: au.Verified, Problems: au.Problems}})
}

// Playbooks.

type playbooksData struct {
	Name string
	// Document and Input are shown again in the form, redacted and with
	// unsafe characters escaped as \uXXXX: inside a JSON string (the
	// only place a valid document can hold them) that is the same
	// value, so sending the form again sends the same document.
	Document string
	Input    string
	// Checked is set once a document was checked or a run of it refused.
	Checked     bool
	Diagnostics []diag.Diagnostic
	Counts      [3]int // errors, warnings, infos
	Explain     string // explain's text
	Graph       template.HTML
	// Error says why a run was not started.
	Error string
}

func (c *Console) playbooksPage(w http.ResponseWriter, r *http.Request) {
	c.renderView(w, r, http.StatusOK, "playbooks", view{Title: "Playbooks", Nav: "playbooks", Data: playbooksData{Input: "{}"}})
}

// playbooksPost checks a document (action "check") or starts a run of it
// (action "run"). The document is the uploaded file (field "file") when
// one was chosen, else the text of field "document".
func (c *Console) playbooksPost(w http.ResponseWriter, r *http.Request) {
	// A browser sends a textarea's line breaks as CR LF (HTML, "form
	// submission"); the text had LF.
	crlf := strings.NewReplacer("\r\n", "\n")
	d := playbooksData{Name: "document.json", Document: crlf.Replace(r.PostFormValue("document")), Input: crlf.Replace(r.PostFormValue("input"))}
	if f, fh, err := r.FormFile("file"); err == nil {
		b, err := io.ReadAll(io.LimitReader(f, MaxDocumentBody))
		f.Close()
		if err != nil {
			c.errorPage(w, r, http.StatusBadRequest, "reading the uploaded file: "+err.Error())
			return
		}
		if len(b) > 0 || d.Document == "" {
			d.Document = string(b)
			if n := path.Base(strings.ReplaceAll(fh.Filename, `\`, "/")); n != "." && n != "/" && n != "" {
				d.Name = n
			}
		}
	}
	src := []byte(d.Document)
	// Shown again as text to edit: a CR left (whitespace between JSON
	// tokens; not allowed raw in a string) is a line break there.
	d.Document = strings.ReplaceAll(d.Document, "\r", "\n")
	action := r.PostFormValue("action")
	status := http.StatusOK
	switch action {
	case "check":
	case "run":
		var input jsontext.Value
		if s := strings.TrimSpace(d.Input); s != "" {
			input = jsontext.Value(s)
			if !input.IsValid() {
				d.Error = "the input is not valid JSON (RFC 8259); give a JSON value, such as {} or {\"customerId\": \"cus_ada\"}"
				status = http.StatusBadRequest
				break
			}
		}
		id, ds, err := c.b.CreateRun(r.Context(), d.Name, src, input)
		if err == nil {
			http.Redirect(w, r, "/runs/"+id, http.StatusSeeOther)
			return
		}
		d.Error = "no run was started: " + err.Error()
		status = http.StatusUnprocessableEntity
		if len(ds) > 0 {
			d.Diagnostics = ds
		}
	default:
		c.errorPage(w, r, http.StatusBadRequest, `the form's action must be "check" or "run"`)
		return
	}
	ch := check(d.Name, src)
	if d.Diagnostics == nil {
		d.Diagnostics = ch.Diagnostics
	}
	d.Checked = true
	for _, dg := range d.Diagnostics {
		switch dg.Severity {
		case diag.Error:
			d.Counts[0]++
		case diag.Warning:
			d.Counts[1]++
		default:
			d.Counts[2]++
		}
	}
	var buf bytes.Buffer
	if err := explain.Render(&buf, ch.Explanation, "text"); err == nil {
		d.Explain = buf.String()
	}
	d.Graph = graph(ch.Explanation)
	c.renderView(w, r, status, "playbooks", view{Title: "Playbooks", Nav: "playbooks", Data: d})
}

// flagOn reads a filter's value: on for "1", "true" and "on" (what a
// checkbox sends), off for anything else ("", "0", "false").
func flagOn(v string) bool { return v == "1" || v == "true" || v == "on" }
