package serve

import (
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// openAPIDescription is the OpenAPI 3.1 description of the API, served
// at /api/v1/openapi.json. A test holds it and [apiTable] to each other.
//
//go:embed openapi.json
var openAPIDescription []byte

// MaxAPIBodyBytes bounds the body of an API request (8 MiB); a longer
// one is answered 413.
const MaxAPIBodyBytes = 8 << 20

// Bounds of the free text a person gives with a decision or a
// cancellation, in bytes.
const (
	maxByBytes     = 256
	maxReasonBytes = 4096
)

// defaultBy is who a decision, a cancellation or a token is recorded as
// made by when the request does not say.
const defaultBy = "operator"

// apiRoute is one endpoint of the HTTP API (docs/api.md).
type apiRoute struct {
	method string
	// path is both the [http.ServeMux] pattern's path and the OpenAPI
	// path template ("/api/v1/runs/{run}").
	path string
	// public endpoints are served without operator authentication.
	public bool
	// query lists the query parameters the endpoint takes; any other is
	// answered 400.
	query []string
	serve func(s *Server, w http.ResponseWriter, r *http.Request) error
}

// apiTable is every endpoint of the API: the one list the server
// registers and the test compares with the OpenAPI description.
func apiTable() []apiRoute {
	return []apiRoute{
		{method: "GET", path: "/api/v1/openapi.json", public: true, serve: (*Server).apiDescription},
		{method: "GET", path: "/api/v1/runs", query: []string{"status", "playbook", "decide", "since", "until", "limit", "cursor"}, serve: (*Server).apiListRuns},
		{method: "POST", path: "/api/v1/runs", serve: (*Server).apiCreateRun},
		{method: "GET", path: "/api/v1/runs/{run}", serve: (*Server).apiGetRun},
		{method: "POST", path: "/api/v1/runs/{run}/cancel", serve: (*Server).apiCancel},
		{method: "POST", path: "/api/v1/runs/{run}/resume", serve: (*Server).apiResume},
		{method: "GET", path: "/api/v1/runs/{run}/pending", query: []string{"mine"}, serve: (*Server).apiRunPending},
		{method: "GET", path: "/api/v1/pending", query: []string{"mine"}, serve: (*Server).apiAllPending},
		{method: "POST", path: "/api/v1/runs/{run}/decisions/{id}", serve: (*Server).apiDecide},
		{method: "POST", path: "/api/v1/runs/{run}/approvals/{id}/view", serve: (*Server).apiView},
		{method: "GET", path: "/api/v1/runs/{run}/audit", query: []string{"verify"}, serve: (*Server).apiAudit},
		{method: "POST", path: "/api/v1/runs/{run}/agent-token", serve: (*Server).apiIssueToken},
		{method: "DELETE", path: "/api/v1/runs/{run}/agent-token", query: []string{"id", "by"}, serve: (*Server).apiRevokeTokens},
		{method: "GET", path: "/api/v1/runs/{run}/events", serve: (*Server).apiRunEvents},
		{method: "GET", path: "/api/v1/events", serve: (*Server).apiEvents},
	}
}

// apiRoutes registers the HTTP API under /api/v1/ (docs/api.md): one
// handler per path, which answers a method the path does not take with
// 405 and an Allow header, and a catch-all that answers 404, both as
// JSON errors.
func (s *Server) apiRoutes() {
	byPath := map[string][]apiRoute{}
	var paths []string
	for _, rt := range apiTable() {
		if byPath[rt.path] == nil {
			paths = append(paths, rt.path)
		}
		byPath[rt.path] = append(byPath[rt.path], rt)
	}
	for _, p := range paths {
		s.mux.Handle(p, s.apiPath(p, byPath[p]))
	}
	s.mux.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		writeError(w, http.StatusNotFound, fmt.Sprintf("there is no API endpoint %s; GET /api/v1/openapi.json describes them all", s.redact(r.URL.Path)))
	})
}

// apiPath serves the endpoints of one path.
func (s *Server) apiPath(path string, routes []apiRoute) http.Handler {
	handlers := map[string]http.Handler{}
	var methods []string
	for _, rt := range routes {
		methods = append(methods, rt.method)
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := checkQuery(r, rt.query); err != nil {
				s.apiFail(w, err)
				return
			}
			if err := rt.serve(s, w, r); err != nil {
				s.apiFail(w, err)
			}
		})
		if !rt.public {
			h = s.Operator(h)
		}
		handlers[rt.method] = h
	}
	allow := strings.Join(methods, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		h := handlers[r.Method]
		if h == nil {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s; it takes %s", r.Method, path, allow))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// checkQuery refuses a query parameter the endpoint does not take, or
// one given twice.
func checkQuery(r *http.Request, allowed []string) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return apiErrorf(http.StatusBadRequest, "the query string is malformed: %v", err)
	}
	names := make([]string, 0, len(q))
	for k := range q {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if !slices.Contains(allowed, k) {
			takes := "takes no query parameters"
			if len(allowed) > 0 {
				takes = "takes only " + quoteJoin(allowed)
			}
			return apiErrorf(http.StatusBadRequest, "unknown query parameter %q; this endpoint %s", k, takes)
		}
		if len(q[k]) > 1 {
			return apiErrorf(http.StatusBadRequest, "query parameter %q is given %d times; give it once", k, len(q[k]))
		}
	}
	return nil
}

// apiError is an error answered with its status and, for a document or
// harness that does not pass its checks, the diagnostics.
type apiError struct {
	status int
	msg    string
	diags  []diag.Diagnostic
}

func (e *apiError) Error() string { return e.msg }

func apiErrorf(status int, format string, args ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// apiFail answers err: an [*apiError] with its status; a missing run or
// record 404; a run busy elsewhere or in the wrong state, or a store whose
// rows disagree with the run's audit chain, 409; anything
// else 500 (and a line in the server's log). Secret values are redacted.
func (s *Server) apiFail(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		status := http.StatusInternalServerError
		switch {
		case IsNotFound(err):
			status = http.StatusNotFound
		case errors.Is(err, ErrNoSuchAgent):
			status = http.StatusUnprocessableEntity
		case errors.Is(err, ErrExecuting), errors.Is(err, runtime.ErrRunChanging), errors.Is(err, store.ErrRunBusy), errors.Is(err, store.ErrState), errors.Is(err, store.ErrExpired),
			errors.Is(err, runtime.ErrStoreAltered):
			status = http.StatusConflict
		}
		if status == http.StatusInternalServerError {
			fmt.Fprintf(s.opt.Log, "openplaybook serve: API: %s\n", s.redact(err.Error()))
		}
		ae = &apiError{status: status, msg: err.Error()}
	}
	msg := s.redact(ae.msg)
	if ae.diags == nil {
		writeError(w, ae.status, msg)
		return
	}
	s.reply(w, ae.status, struct {
		Error       string         `json:"error"`
		Diagnostics jsontext.Value `json:"diagnostics"`
	}{msg, s.diagnosticsJSON(ae.diags)})
}

// reply writes v as a JSON response.
func (s *Server) reply(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		fmt.Fprintf(s.opt.Log, "openplaybook serve: API: encoding a response: %v\n", err)
		writeError(w, http.StatusInternalServerError, "the response could not be encoded")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// notFoundRun is the error of a run id that names no run.
func notFoundRun(id string) error {
	return apiErrorf(http.StatusNotFound, "there is no run %q; GET /api/v1/runs lists the runs", id)
}

// runOf returns the run's status (with its steps), 404 for no such run.
func (s *Server) runOf(r *http.Request, id string) (runtime.RunStatus, error) {
	rs, err := s.Run(r.Context(), id)
	if IsNotFound(err) {
		return rs, notFoundRun(id)
	}
	return rs, err
}

// liveRunOf is runOf for a run that has not ended (409 for one that
// has); doing names what cannot be done to an ended run.
func (s *Server) liveRunOf(r *http.Request, id, doing string) (runtime.RunStatus, error) {
	rs, err := s.runOf(r, id)
	if err == nil && store.RunStatus(rs.Status).Ended() {
		return rs, apiErrorf(http.StatusConflict, "run %s has ended (%s); %s", id, rs.Status, doing)
	}
	return rs, err
}

// The endpoints.

func (s *Server) apiDescription(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDescription)
	return nil
}

func (s *Server) apiGetRun(w http.ResponseWriter, r *http.Request) error {
	rs, err := s.runOf(r, r.PathValue("run"))
	if err != nil {
		return err
	}
	s.reply(w, http.StatusOK, rs)
	return nil
}

// runStarted is the answer to creating or resuming a run.
type runStarted struct {
	Run    string            `json:"run"`
	Status runtime.RunStatus `json:"status"`
	// Diagnostics are the warnings and advice the checks found.
	Diagnostics jsontext.Value `json:"diagnostics"`
}

var createShape = bodyShape{
	example: `{"document": {...the playbook...}, "input": {...}}`,
	members: []member{
		{"document", "must be the playbook document, a JSON object"},
		{"input", "is the run's input, any JSON value the document's inputSchema accepts"},
	},
}

func (s *Server) apiCreateRun(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Document jsontext.Value `json:"document"`
		Input    jsontext.Value `json:"input"`
	}
	if err := readBody(w, r, &body, createShape, true); err != nil {
		return err
	}
	if len(body.Document) == 0 {
		return apiErrorf(http.StatusBadRequest, `the request body has no "document": send %s`, createShape.example)
	}
	if k := body.Document.Kind(); k != '{' {
		return apiErrorf(http.StatusBadRequest, `"document" must be the playbook document, a JSON object, not %s`, kindName(k))
	}
	id, ds, err := s.CreateRun(r.Context(), "document", body.Document, body.Input)
	switch {
	case errors.Is(err, runtime.ErrNotRunnable):
		return &apiError{status: http.StatusUnprocessableEntity, msg: fmt.Sprintf("%v (%s)", err, countDiags(ds)), diags: ds}
	case errors.Is(err, launch.ErrHarness):
		return &apiError{status: http.StatusInternalServerError, msg: fmt.Sprintf("the server's harness has errors (%s); nothing was started: fix the harness and restart the server", countDiags(ds)), diags: ds}
	case errors.Is(err, ErrInput):
		return apiErrorf(http.StatusUnprocessableEntity, "%s", inputMessage(err))
	case err != nil:
		return err
	}
	rs, err := s.Run(r.Context(), id)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/runs/"+url.PathEscape(id))
	s.reply(w, http.StatusCreated, runStarted{Run: id, Status: rs, Diagnostics: s.diagnosticsJSON(ds)})
	return nil
}

// inputMessage is the message of an [ErrInput] error, said once (the
// runner's error repeats the sentence the runtime's begins with).
func inputMessage(err error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, ErrInput.Error()+": "); ok && strings.HasPrefix(rest, ErrInput.Error()) {
		return rest
	}
	return msg
}

var cancelShape = bodyShape{
	example: `{"reason": "...", "by": "..."}`,
	members: []member{
		{"reason", "must be a string (why the run is cancelled)"},
		{"by", "must be a string (who cancels it)"},
	},
}

func (s *Server) apiCancel(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Reason string `json:"reason"`
		By     string `json:"by"`
	}
	if err := readBody(w, r, &body, cancelShape, false); err != nil {
		return err
	}
	by, err := checkPerson(body.By, body.Reason)
	if err != nil {
		return err
	}
	run := r.PathValue("run")
	if _, err := s.liveRunOf(r, run, "there is nothing to cancel"); err != nil {
		return err
	}
	if err := s.CancelRun(r.Context(), run, s.redact(by), s.redact(body.Reason)); err != nil {
		if errors.Is(err, store.ErrRunBusy) {
			return apiErrorf(http.StatusConflict, "run %s is being executed by another process; stop it there, or cancel it there", run)
		}
		return err
	}
	rs, err := s.runOf(r, run)
	if err != nil {
		return err
	}
	s.reply(w, http.StatusOK, rs)
	return nil
}

func (s *Server) apiResume(w http.ResponseWriter, r *http.Request) error {
	if err := readBody(w, r, &struct{}{}, bodyShape{example: "{}"}, false); err != nil {
		return err
	}
	run := r.PathValue("run")
	if _, err := s.liveRunOf(r, run, "it cannot be resumed"); err != nil {
		return err
	}
	ds, err := s.ResumeRun(r.Context(), run)
	switch {
	case errors.Is(err, ErrExecuting):
		return apiErrorf(http.StatusConflict, "run %s is already executing here", run)
	case errors.Is(err, store.ErrRunBusy):
		return apiErrorf(http.StatusConflict, "run %s is being executed by another process", run)
	case errors.Is(err, runtime.ErrNotRunnable):
		return &apiError{status: http.StatusUnprocessableEntity, msg: fmt.Sprintf("the run's document no longer passes validation and check against this harness (%s); nothing was resumed", countDiags(ds)), diags: ds}
	case errors.Is(err, launch.ErrHarness):
		return &apiError{status: http.StatusInternalServerError, msg: fmt.Sprintf("the server's harness has errors (%s); nothing was resumed", countDiags(ds)), diags: ds}
	case errors.Is(err, runtime.ErrHarnessChanged):
		return apiErrorf(http.StatusConflict, "%s", err)
	case err != nil:
		return err
	}
	rs, err := s.runOf(r, run)
	if err != nil {
		return err
	}
	s.reply(w, http.StatusAccepted, runStarted{Run: run, Status: rs, Diagnostics: s.diagnosticsJSON(ds)})
	return nil
}

func (s *Server) apiRunPending(w http.ResponseWriter, r *http.Request) error {
	run := r.PathValue("run")
	p, err := s.Pending(r.Context(), run)
	if IsNotFound(err) {
		return notFoundRun(run)
	}
	if err != nil {
		return err
	}
	if p, err = s.mineOnly(r, p); err != nil {
		return err
	}
	if err := s.withViews(r.Context(), p); err != nil {
		return err
	}
	s.reply(w, http.StatusOK, map[string]any{"pending": p})
	return nil
}

func (s *Server) apiAllPending(w http.ResponseWriter, r *http.Request) error {
	p, err := s.Pending(r.Context(), "")
	if err != nil {
		return err
	}
	if p, err = s.mineOnly(r, p); err != nil {
		return err
	}
	if err := s.withViews(r.Context(), p); err != nil {
		return err
	}
	s.reply(w, http.StatusOK, map[string]any{"pending": p})
	return nil
}

// mineOnly keeps, with ?mine=true (or 1), only the gates and approvals
// the person r authenticates may approve now ([Server.MayDecide], as the
// console's "waiting on me"); p as it is without it. Another value than
// true, 1, false or 0 is a 400.
func (s *Server) mineOnly(r *http.Request, p []PendingItem) ([]PendingItem, error) {
	switch v := r.URL.Query().Get("mine"); v {
	case "", "false", "0":
		return p, nil
	case "true", "1":
	default:
		return nil, apiErrorf(http.StatusBadRequest, `"mine" is %q; it takes true or false`, s.redact(v))
	}
	out := []PendingItem{}
	for _, it := range p {
		if it.Kind != "gate" && it.Kind != "call" && it.Kind != "outcome_unknown" {
			continue
		}
		if err := s.MayDecide(r.Context(), it.Run, it.ID); err == nil {
			out = append(out, it)
		}
	}
	return out, nil
}

var decisionShape = bodyShape{
	example: `{"approve": true, "reason": "...", "by": "..."}`,
	members: []member{
		{"approve", "must be true (approve) or false (deny or reject)"},
		{"reason", "must be a string (why)"},
		{"by", "must be a string (who decides)"},
	},
}

// decided is the answer to a decision.
type decided struct {
	Decided struct {
		Kind string `json:"kind"`
		ID   string `json:"id"`
		// Approvals and Needed: see [runtime.Decided].
		Approvals int `json:"approvals,omitzero"`
		Needed    int `json:"needed,omitzero"`
	} `json:"decided"`
	Run runtime.RunStatus `json:"run"`
}

func (s *Server) apiDecide(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Approve *bool  `json:"approve"`
		Reason  string `json:"reason"`
		By      string `json:"by"`
	}
	if err := readBody(w, r, &body, decisionShape, true); err != nil {
		return err
	}
	if body.Approve == nil {
		return apiErrorf(http.StatusBadRequest, `the request body needs "approve": true or false; send %s`, decisionShape.example)
	}
	by, err := checkPerson(body.By, body.Reason)
	if err != nil {
		return err
	}
	run, id := r.PathValue("run"), r.PathValue("id")
	if _, err := s.liveRunOf(r, run, "there is nothing to decide"); err != nil {
		return err
	}
	d, err := s.Decide(r.Context(), run, id, runtime.Verdict{Approve: *body.Approve, Reason: s.redact(body.Reason), By: s.redact(by)})
	if errors.Is(err, ErrNotDecider) {
		return apiErrorf(http.StatusForbidden, "%s", s.redact(err.Error()))
	}
	if err != nil {
		return s.decideError(r, run, id, err)
	}
	rs, err := s.runOf(r, run)
	if err != nil {
		return err
	}
	var out decided
	out.Decided.Kind, out.Decided.ID, out.Run = d.Kind, d.ID, rs
	out.Decided.Approvals, out.Decided.Needed = d.Approvals, d.Needed
	s.reply(w, http.StatusOK, out)
	return nil
}

var viewShape = bodyShape{
	example: `{"tool": "charge.get", "by": "..."}`,
	members: []member{
		{"tool", "must be a string (the read tool, one of the approval's views)"},
		{"by", "must be a string (who reads)"},
	},
}

// viewAnswer is the answer to a view: what the read tool gave.
type viewAnswer struct {
	Tool      string         `json:"tool"`
	Arguments jsontext.Value `json:"arguments"`
	Result    jsontext.Value `json:"result,omitempty"`
	Error     string         `json:"error,omitempty"`
	Seq       int64          `json:"seq"`
}

// apiView reads the current state of the target of the call approval id
// waits on ([Server.View]).
func (s *Server) apiView(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Tool *string `json:"tool"`
		By   string  `json:"by"`
	}
	if err := readBody(w, r, &body, viewShape, true); err != nil {
		return err
	}
	if body.Tool == nil {
		return apiErrorf(http.StatusBadRequest, `the request body needs "tool": the read tool (GET .../pending lists each call's "views"); send %s`, viewShape.example)
	}
	by, err := checkPerson(body.By, "")
	if err != nil {
		return err
	}
	run, id := r.PathValue("run"), r.PathValue("id")
	if _, err := s.liveRunOf(r, run, "there is nothing to read a view for"); err != nil {
		return err
	}
	v, err := s.View(r.Context(), run, id, *body.Tool, s.redact(by))
	switch {
	case errors.Is(err, ErrNotDecider):
		return apiErrorf(http.StatusForbidden, "%s", s.redact(err.Error()))
	case errors.Is(err, runtime.ErrNotViewable):
		return apiErrorf(http.StatusConflict, "%s", s.redact(err.Error()))
	case err != nil:
		return err
	}
	s.reply(w, http.StatusOK, viewAnswer{Tool: v.Tool, Arguments: v.Arguments, Result: v.Result, Error: v.Error, Seq: v.Seq})
	return nil
}

// decideError explains why id of run could not be decided: 404 when the
// run has no such gate or approval, 409 when it has but it does not wait
// (already decided), each saying what the run waits for; an id that is
// still waiting is a failure of the server (500).
func (s *Server) decideError(r *http.Request, run, id string, err error) error {
	ctx := r.Context()
	pend, perr := s.Pending(ctx, run)
	if perr != nil {
		return err
	}
	var waiting []string
	for _, p := range pend {
		if !decidable(p.Kind) {
			continue
		}
		if p.ID == id {
			return err
		}
		what := "gate " + strconv.Quote(p.ID)
		if p.Kind != "gate" {
			what = fmt.Sprintf("approval %q (%s)", p.ID, p.Summary)
		}
		waiting = append(waiting, what)
	}
	waits := "it waits for no decision"
	if len(waiting) > 0 {
		waits = "it waits for " + strings.Join(waiting, ", ")
	}
	known := false
	if strings.HasPrefix(id, "apr_") {
		a, aerr := s.st.GetApproval(ctx, id)
		known = aerr == nil && a.Run == run
	} else if gates, gerr := s.st.Gates(ctx, run); gerr == nil {
		known = slices.ContainsFunc(gates, func(g store.Gate) bool { return g.Step == id })
	}
	if !known {
		return apiErrorf(http.StatusNotFound, "run %s has no gate or approval %q; %s", run, id, waits)
	}
	return apiErrorf(http.StatusConflict, "%v; %s", err, waits)
}

// decidable reports whether a pending kind is decided by a person.
func decidable(kind string) bool {
	return kind == "gate" || kind == "call" || kind == "outcome_unknown"
}

func (s *Server) apiAudit(w http.ResponseWriter, r *http.Request) error {
	verify := false
	if q := r.URL.Query(); q.Has("verify") {
		v, err := strconv.ParseBool(q.Get("verify"))
		if err != nil {
			return apiErrorf(http.StatusBadRequest, "query parameter verify is %q; it must be true or false", q.Get("verify"))
		}
		verify = v
	}
	run := r.PathValue("run")
	res, err := s.Audit(r.Context(), run, verify)
	if IsNotFound(err) {
		return notFoundRun(run)
	}
	if err != nil {
		return err
	}
	// The shape of `openplaybook audit --format json [--verify]`.
	out := map[string]any{"run": res.Run, "records": res.Records}
	if res.Verified != nil {
		probs := res.Problems
		if probs == nil {
			probs = []AuditProblem{}
		}
		out["verified"], out["problems"] = *res.Verified, probs
	}
	s.reply(w, http.StatusOK, out)
	return nil
}

var tokenShape = bodyShape{
	example: `{"by": "...", "agent": "..."}`,
	members: []member{{"by", "must be a string (who issues the token)"}, {"agent", "must be a string (the agent name the token is for; absent: every agent bound to driver mcp)"}},
}

func (s *Server) apiIssueToken(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		By    string `json:"by"`
		Agent string `json:"agent"`
	}
	if err := readBody(w, r, &body, tokenShape, false); err != nil {
		return err
	}
	by, err := checkPerson(body.By, "")
	if err != nil {
		return err
	}
	run := r.PathValue("run")
	if _, err := s.liveRunOf(r, run, "its agent needs no token"); err != nil {
		return err
	}
	tok, err := s.IssueAgentToken(r.Context(), run, body.Agent, s.redact(by))
	if err != nil {
		return err
	}
	s.reply(w, http.StatusCreated, tok)
	return nil
}

func (s *Server) apiRevokeTokens(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	by, err := checkPerson(q.Get("by"), "")
	if err != nil {
		return err
	}
	run, id := r.PathValue("run"), q.Get("id")
	if _, err := s.runOf(r, run); err != nil {
		return err
	}
	n, err := s.RevokeAgentTokens(r.Context(), run, id, s.redact(by))
	if err != nil {
		return err
	}
	if id != "" && n == 0 {
		return apiErrorf(http.StatusNotFound, "run %s has no unrevoked agent token %q", run, id)
	}
	s.reply(w, http.StatusOK, map[string]any{"run": run, "revoked": n})
	return nil
}

func (s *Server) apiRunEvents(w http.ResponseWriter, r *http.Request) error {
	run := r.PathValue("run")
	if _, err := s.st.GetRun(r.Context(), run); err != nil {
		if IsNotFound(err) {
			return notFoundRun(run)
		}
		return err
	}
	s.streamEvents(w, r, run)
	return nil
}

func (s *Server) apiEvents(w http.ResponseWriter, r *http.Request) error {
	s.streamEvents(w, r, "")
	return nil
}

// checkPerson checks the by and reason a person gives and returns by,
// [defaultBy] when empty.
func checkPerson(by, reason string) (string, error) {
	if len(by) > maxByBytes {
		return "", apiErrorf(http.StatusBadRequest, `"by" is %d bytes; at most %d are kept`, len(by), maxByBytes)
	}
	if len(reason) > maxReasonBytes {
		return "", apiErrorf(http.StatusBadRequest, `"reason" is %d bytes; at most %d are kept`, len(reason), maxReasonBytes)
	}
	if strings.TrimSpace(by) == "" {
		by = defaultBy
	}
	return by, nil
}

func countDiags(ds []diag.Diagnostic) string {
	n := func(k int, word string) string {
		if k == 1 {
			return "1 " + word
		}
		return strconv.Itoa(k) + " " + word + "s"
	}
	return n(diag.Count(ds, diag.Error), "error") + ", " + n(diag.Count(ds, diag.Warning), "warning")
}

func quoteJoin(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}
