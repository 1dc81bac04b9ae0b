package serve_test

import (
	"bufio"
	"bytes"
	"context"
	encjson "encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/openplaybook/openplaybook/serve"
)

// The OpenAPI description, parsed, with its schemas compiled on demand.
type apiSpec struct {
	doc map[string]any
	c   *jsonschema.Compiler

	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
}

const specURL = "mem:///openapi.json"

var (
	specOnce sync.Once
	spec     *apiSpec
	specErr  error
)

func loadSpec(t *testing.T) *apiSpec {
	t.Helper()
	specOnce.Do(func() {
		raw := serve.OpenAPIDescription()
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			specErr = fmt.Errorf("openapi.json is not JSON: %v", err)
			return
		}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		if err := c.AddResource(specURL, doc); err != nil {
			specErr = err
			return
		}
		var m map[string]any
		if err := encjson.Unmarshal(raw, &m); err != nil {
			specErr = err
			return
		}
		spec = &apiSpec{doc: m, c: c, compiled: map[string]*jsonschema.Schema{}}
	})
	if specErr != nil {
		t.Fatal(specErr)
	}
	return spec
}

// schema compiles the schema at the JSON Pointer ptr of the description.
func (s *apiSpec) schema(t *testing.T, ptr string) *jsonschema.Schema {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch := s.compiled[ptr]; sch != nil {
		return sch
	}
	sch, err := s.c.Compile(specURL + "#" + ptr)
	if err != nil {
		t.Fatalf("compiling the schema at %s: %v", ptr, err)
	}
	s.compiled[ptr] = sch
	return sch
}

func escapePtr(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// at returns the value at a JSON Pointer of the description.
func (s *apiSpec) at(ptr string) any {
	var v any = s.doc
	for _, tok := range strings.Split(ptr, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[tok]
	}
	return v
}

// template returns the description's path template that matches path.
func (s *apiSpec) template(path string) string {
	segs := strings.Split(path, "/")
	best, bestWild := "", 1<<30
	for tmpl := range s.doc["paths"].(map[string]any) {
		ts := strings.Split(tmpl, "/")
		if len(ts) != len(segs) {
			continue
		}
		wild, ok := 0, true
		for i := range ts {
			if strings.HasPrefix(ts[i], "{") {
				wild++
				ok = ok && segs[i] != ""
			} else if ts[i] != segs[i] {
				ok = false
			}
		}
		if ok && wild < bestWild {
			best, bestWild = tmpl, wild
		}
	}
	return best
}

// responseSchema returns the pointer of the schema the description gives
// for the answer of method path with status and media type, following a
// $ref to components/responses; "" when it describes no such answer.
func (s *apiSpec) responseSchema(method, tmpl string, status int, media string) string {
	ptr := "/paths/" + escapePtr(tmpl) + "/" + strings.ToLower(method) + "/responses/" + fmt.Sprint(status)
	r, ok := s.at(ptr).(map[string]any)
	if !ok {
		return ""
	}
	if ref, ok := r["$ref"].(string); ok {
		ptr = strings.TrimPrefix(ref, "#")
		if r, ok = s.at(ptr).(map[string]any); !ok {
			return ""
		}
	}
	content, _ := r["content"].(map[string]any)
	if _, ok := content[media]; !ok {
		return ""
	}
	return ptr + "/content/" + escapePtr(media) + "/schema"
}

// apiClient calls the rig's API over HTTP as an operator (or not) and
// checks every answer against the OpenAPI description: its status is
// described for the endpoint, a JSON answer is application/json and
// valid against the described schema.
type apiClient struct {
	t      *testing.T
	base   string
	token  string
	cookie *http.Cookie
	csrf   string
	origin string
	spec   *apiSpec
}

type apiResp struct {
	status int
	header http.Header
	body   []byte
}

func (r *rig) api(token string) *apiClient {
	return &apiClient{t: r.t, base: r.ts.URL, token: token, spec: loadSpec(r.t)}
}

// do sends body (nil: none; []byte or string: as is; else its JSON) as
// application/json.
func (c *apiClient) do(method, path string, body any) apiResp {
	c.t.Helper()
	var raw []byte
	ctype := ""
	switch b := body.(type) {
	case nil:
	case []byte:
		raw, ctype = b, "application/json"
	case string:
		raw, ctype = []byte(b), "application/json"
	default:
		var err error
		if raw, err = encjson.Marshal(b); err != nil {
			c.t.Fatal(err)
		}
		ctype = "application/json"
	}
	return c.send(method, path, ctype, raw)
}

func (c *apiClient) send(method, path, ctype string, raw []byte) apiResp {
	c.t.Helper()
	var rd io.Reader
	if raw != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	c.auth(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	out := apiResp{status: res.StatusCode, header: res.Header, body: b}
	c.check(method, path, out)
	return out
}

func (c *apiClient) auth(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.cookie != nil {
		req.AddCookie(c.cookie)
	}
	if c.csrf != "" {
		req.Header.Set("X-CSRF-Token", c.csrf)
	}
	if c.origin != "" {
		req.Header.Set("Origin", c.origin)
	}
}

// check holds an answer to the description.
func (c *apiClient) check(method, path string, res apiResp) {
	c.t.Helper()
	if u, err := url.Parse(path); err == nil {
		path = u.Path
	}
	mt, _, _ := mime.ParseMediaType(res.header.Get("Content-Type"))
	if mt != "application/json" {
		c.t.Errorf("%s %s: %d with Content-Type %q, want application/json: %s", method, path, res.status, res.header.Get("Content-Type"), res.body)
		return
	}
	tmpl := c.spec.template(path)
	ptr := "/components/schemas/Error"
	if tmpl != "" && res.status != http.StatusMethodNotAllowed {
		ptr = c.spec.responseSchema(method, tmpl, res.status, mt)
		if ptr == "" {
			c.t.Errorf("%s %s: the description has no %d %s answer for %s %s: %s", method, path, res.status, mt, method, tmpl, res.body)
			return
		}
	}
	c.validate(ptr, res.body, fmt.Sprintf("%s %s (%d)", method, path, res.status))
}

func (c *apiClient) validate(ptr string, body []byte, what string) {
	c.t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		c.t.Errorf("%s: the body is not JSON: %v: %s", what, err, body)
		return
	}
	if err := c.spec.schema(c.t, ptr).Validate(v); err != nil {
		c.t.Errorf("%s: the body does not match %s: %v\n%s", what, ptr, err, body)
	}
}

// decode decodes a JSON answer.
func decode[T any](t *testing.T, res apiResp) T {
	t.Helper()
	var v T
	if err := encjson.Unmarshal(res.body, &v); err != nil {
		t.Fatalf("decoding %s: %v", res.body, err)
	}
	return v
}

// want fails unless res has status and its body holds every one of subs.
func want(t *testing.T, what string, res apiResp, status int, subs ...string) {
	t.Helper()
	if res.status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, res.status, status, res.body)
	}
	for _, s := range subs {
		if !strings.Contains(string(res.body), s) {
			t.Errorf("%s: the answer does not say %q: %s", what, s, res.body)
		}
	}
}

type sseEvent struct {
	name, data, id string
}

// events opens an event stream and returns its events; it returns once
// the stream's opening comment arrived (so the subscription is live).
func (c *apiClient) events(path string) (<-chan sseEvent, func()) {
	c.t.Helper()
	return c.eventsSince(path, "")
}

// eventsSince is events with a Last-Event-ID header (none when "").
func (c *apiClient) eventsSince(path, lastID string) (<-chan sseEvent, func()) {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	c.auth(req)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(res.Body)
		c.t.Fatalf("GET %s: %d %s: %s", path, res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	br := bufio.NewReader(res.Body)
	first, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, ": ") {
		c.t.Fatalf("the stream opened with %q (%v), want a comment", first, err)
	}
	ch := make(chan sseEvent, 256)
	go func() {
		defer close(ch)
		var ev sseEvent
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				if ev.name != "" || ev.data != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				if ev.data != "" {
					ev.data += "\n" // a second data line: the test fails on it
				}
				ev.data += strings.TrimPrefix(line, "data: ")
			default:
				ev.data += "\nUNEXPECTED " + line
			}
		}
	}()
	return ch, func() { cancel(); res.Body.Close() }
}

// waitEvent reads events until one named name about run arrives; each is
// checked against the description's Event schema.
func (c *apiClient) waitEvent(ch <-chan sseEvent, name, run string) serve.Event {
	c.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				c.t.Fatalf("the event stream ended before a %s event of %s", name, run)
			}
			if strings.Contains(ev.data, "\n") {
				c.t.Fatalf("an event's data is not one line: %q", ev.data)
			}
			c.validate("/components/schemas/Event", []byte(ev.data), "event "+ev.name)
			var e serve.Event
			if err := encjson.Unmarshal([]byte(ev.data), &e); err != nil {
				c.t.Fatal(err)
			}
			if e.Type != ev.name {
				c.t.Errorf("event %q carries type %q", ev.name, e.Type)
			}
			if ev.name == name && e.Run == run {
				return e
			}
		case <-timeout:
			c.t.Fatalf("no %s event of %s in 20s", name, run)
		}
	}
}

type runStarted struct {
	Run    string `json:"run"`
	Status struct {
		Status string `json:"status"`
	} `json:"status"`
	Diagnostics []map[string]any `json:"diagnostics"`
}

type pendingList struct {
	Pending []serve.PendingItem `json:"pending"`
}

func createBody(doc []byte, input string) []byte {
	return []byte(`{"document": ` + string(doc) + `, "input": ` + input + `}`)
}

// TestAPIDescriptionIsValidOpenAPI lints the embedded description
// against the official OpenAPI 3.1 schema (with the base dialect, so
// every Schema Object is checked too) and compiles every schema in it.
func TestAPIDescriptionIsValidOpenAPI(t *testing.T) {
	c := jsonschema.NewCompiler()
	for file, id := range map[string]string{
		"schema.json":              "https://spec.openapis.org/oas/3.1/schema/2022-10-07",
		"schema-base.json":         "https://spec.openapis.org/oas/3.1/schema-base/2022-10-07",
		"dialect-base.schema.json": "https://spec.openapis.org/oas/3.1/dialect/base",
		"meta-base.schema.json":    "https://spec.openapis.org/oas/3.1/meta/base",
	} {
		f, err := os.Open(filepath.Join("testdata", "oas-3.1", file))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if err := c.AddResource(id, doc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	oas, err := c.Compile("https://spec.openapis.org/oas/3.1/schema-base/2022-10-07")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(serve.OpenAPIDescription()))
	if err != nil {
		t.Fatal(err)
	}
	if err := oas.Validate(inst); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI 3.1 document: %v", err)
	}

	// The lint must be able to fail: a document with an operation
	// without responses and a misspelt member is refused.
	bad, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"openapi": "3.1.1", "info": {"title": "x", "version": "1"}, "paths": {"/x": {"get": {"respones": {}}}}}`))
	if oas.Validate(bad) == nil {
		t.Fatal("the OpenAPI schema accepts an operation with a misspelt member")
	}

	// Every schema compiles (their $refs resolve) under JSON Schema
	// 2020-12, the dialect the description declares.
	s := loadSpec(t)
	for name := range s.doc["components"].(map[string]any)["schemas"].(map[string]any) {
		s.schema(t, "/components/schemas/"+escapePtr(name))
	}
	for name, r := range s.doc["components"].(map[string]any)["responses"].(map[string]any) {
		for media := range r.(map[string]any)["content"].(map[string]any) {
			s.schema(t, "/components/responses/"+escapePtr(name)+"/content/"+escapePtr(media)+"/schema")
		}
	}
}

// TestAPIDescriptionMatchesRoutes: every endpoint the server registers is
// in the description with the same security and query parameters, and
// every operation of the description is an endpoint.
func TestAPIDescriptionMatchesRoutes(t *testing.T) {
	s := loadSpec(t)
	paths := s.doc["paths"].(map[string]any)
	registered := map[string]bool{}
	for _, rt := range serve.APIRoutes() {
		key := rt.Method + " " + rt.Path
		registered[key] = true
		item, _ := paths[rt.Path].(map[string]any)
		op, _ := item[strings.ToLower(rt.Method)].(map[string]any)
		if op == nil {
			t.Errorf("%s is served but not in openapi.json", key)
			continue
		}
		// Security: none for a public endpoint; the bearer token or the
		// session, and for the session outside GET the CSRF token too.
		sec, ok := op["security"].([]any)
		if !ok {
			t.Errorf("%s: no security of its own", key)
			continue
		}
		var schemes []string
		for _, req := range sec {
			var names []string
			for n := range req.(map[string]any) {
				names = append(names, n)
			}
			slices.Sort(names)
			schemes = append(schemes, strings.Join(names, "+"))
		}
		wantSec := []string{"bearer", "session"}
		switch {
		case rt.Public:
			wantSec = nil
		case rt.Method != "GET":
			wantSec = []string{"bearer", "csrf+session"}
		}
		if !slices.Equal(schemes, wantSec) {
			t.Errorf("%s: security %v, want %v", key, schemes, wantSec)
		}
		// Query parameters.
		var query []string
		opParams, _ := op["parameters"].([]any)
		for _, p := range opParams {
			if p := p.(map[string]any); p["in"] == "query" {
				query = append(query, p["name"].(string))
			}
		}
		if !slices.Equal(query, rt.Query) {
			t.Errorf("%s: query parameters %v in openapi.json, %v served", key, query, rt.Query)
		}
		// Path parameters: exactly the template's.
		var pathParams []string
		itemParams, _ := item["parameters"].([]any)
		for _, p := range itemParams {
			ref := p.(map[string]any)["$ref"].(string)
			pathParams = append(pathParams, s.at(strings.TrimPrefix(ref, "#")).(map[string]any)["name"].(string))
		}
		var inTemplate []string
		for _, seg := range strings.Split(rt.Path, "/") {
			if strings.HasPrefix(seg, "{") {
				inTemplate = append(inTemplate, strings.Trim(seg, "{}"))
			}
		}
		if !slices.Equal(pathParams, inTemplate) {
			t.Errorf("%s: path parameters %v, template has %v", key, pathParams, inTemplate)
		}
	}
	for p, item := range paths {
		for m := range item.(map[string]any) {
			if m == "parameters" {
				continue
			}
			if key := strings.ToUpper(m) + " " + p; !registered[key] {
				t.Errorf("%s is in openapi.json but not served", key)
			}
		}
	}
}

// TestAPIRunThroughGate drives a run over the API: created with the
// bearer token, its agent (an MCP client) given a token by the API, the
// gate seen pending and decided with a console session, the events
// streamed, and the audit log verified.
func TestAPIRunThroughGate(t *testing.T) {
	r := newRig(t, "")
	ctx := context.Background()
	c := r.api(operatorToken)
	doc := readTestdata(t, "agent.json")
	body := createBody(doc, `{"customerId": "cus_ada"}`)

	// Without a token, or with a wrong one: 401, and no run.
	res := r.api("").do("POST", "/api/v1/runs", body)
	want(t, "create without a token", res, 401, "operator token")
	if h := res.header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer") {
		t.Errorf("WWW-Authenticate %q", h)
	}
	want(t, "create with a wrong token", r.api("not-the-operator-token-at-all").do("POST", "/api/v1/runs", body), 401)
	want(t, "list with a wrong token", r.api("not-the-operator-token-at-all").do("GET", "/api/v1/runs", nil), 401)
	if runs, _ := r.srv.Runs(ctx); len(runs) != 0 {
		t.Fatalf("%d runs after refused requests", len(runs))
	}

	all, stopAll := c.events("/api/v1/events")
	defer stopAll()

	res = c.do("POST", "/api/v1/runs", body)
	want(t, "create", res, 201)
	started := decode[runStarted](t, res)
	run := started.Run
	if !strings.HasPrefix(run, "run_") || res.header.Get("Location") != "/api/v1/runs/"+run {
		t.Fatalf("created %q at %q", run, res.header.Get("Location"))
	}
	if got, _ := r.srv.Runs(ctx); len(got) != 1 || got[0].Run != run {
		t.Fatalf("the store has %+v", got)
	}
	c.waitEvent(all, "status", run)
	r.waitStatus(run, "waiting", "agent")

	events, stop := c.events("/api/v1/runs/" + run + "/events")
	defer stop()

	// The list and the run, as status --format json shows them.
	list := decode[struct {
		Runs []struct{ Run, Status string }
	}](t, c.do("GET", "/api/v1/runs", nil))
	if len(list.Runs) != 1 || list.Runs[0].Run != run || list.Runs[0].Status != "waiting" {
		t.Fatalf("runs %+v", list.Runs)
	}
	res = c.do("GET", "/api/v1/runs/"+run, nil)
	want(t, "get run", res, 200)
	rs, err := r.srv.Run(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "GET /api/v1/runs/{run}", res.body, rs)

	// The agent's token comes from the API; the agent runs the first step.
	res = c.do("POST", "/api/v1/runs/"+run+"/agent-token", map[string]any{"by": "tester"})
	want(t, "issue agent token", res, 201)
	tok := decode[serve.IssuedToken](t, res)
	if !strings.HasPrefix(tok.Token, "opa_") || tok.MCPURL != r.srv.MCPURL(run) {
		t.Fatalf("token %+v", tok)
	}
	a := r.connect(tok.MCPURL, tok.Token)
	a.tools(t, "customer__get", "note__add", serve.FinishTool)
	if text, isErr := a.call(t, "customer__get", map[string]any{"customerId": "cus_ada"}); isErr || !strings.Contains(text, "Ada Lovelace") {
		t.Fatalf("customer.get: %s", text)
	}
	if _, isErr := a.call(t, "note__add", map[string]any{"customerId": "cus_ada", "body": "looked up over the API"}); isErr {
		t.Fatal("note.add failed")
	}
	if text, isErr := a.call(t, serve.FinishTool, map[string]any{"output": map[string]any{"found": "Ada Lovelace"}}); isErr {
		t.Fatalf("finish: %s", text)
	}
	r.waitStatus(run, "waiting", "gate")
	c.waitEvent(events, "status", run)

	// Pending: the gate, with its id, for the run and across runs.
	pend := decode[pendingList](t, c.do("GET", "/api/v1/runs/"+run+"/pending", nil))
	if len(pend.Pending) != 1 || pend.Pending[0].Kind != "gate" || pend.Pending[0].ID != "review" || pend.Pending[0].Run != run {
		t.Fatalf("pending %+v", pend.Pending)
	}
	pend = decode[pendingList](t, c.do("GET", "/api/v1/pending", nil))
	if len(pend.Pending) != 1 || pend.Pending[0].ID != "review" || pend.Pending[0].Run != run {
		t.Fatalf("pending across runs %+v", pend.Pending)
	}

	// A console session: GET needs no CSRF token, POST does.
	cookie, csrf, err := r.srv.Login()
	if err != nil {
		t.Fatal(err)
	}
	cs := &apiClient{t: t, base: r.ts.URL, cookie: cookie, spec: c.spec}
	want(t, "get with the session", cs.do("GET", "/api/v1/runs/"+run, nil), 200)
	decision := map[string]any{"approve": true, "reason": "note reads well; " + operatorToken, "by": "Grace"}
	want(t, "decide with the session, no CSRF token", cs.do("POST", "/api/v1/runs/"+run+"/decisions/review", decision), 403, "CSRF")
	cs.csrf = "not-the-csrf-token"
	want(t, "decide with a wrong CSRF token", cs.do("POST", "/api/v1/runs/"+run+"/decisions/review", decision), 403, "CSRF")
	// Another site's page, even with the token.
	evil := &apiClient{t: t, base: r.ts.URL, token: operatorToken, origin: "https://evil.example", spec: c.spec}
	want(t, "decide from another origin", evil.do("POST", "/api/v1/runs/"+run+"/decisions/review", decision), 403, "Origin")

	// Bodies that are not a decision, ids that are not waiting, runs that
	// do not exist.
	dpath := "/api/v1/runs/" + run + "/decisions/review"
	want(t, "approve as a string", c.do("POST", dpath, `{"approve": "yes"}`), 400, "line 1, column 13", "/approve", "true (approve) or false", "not a string")
	want(t, "approve missing", c.do("POST", dpath, `{"reason": "why not"}`), 400, `needs \"approve\"`)
	want(t, "no body", c.do("POST", dpath, nil), 400, "empty")
	want(t, "not JSON", c.do("POST", dpath, "{\n  \"approve\": true,\n}"), 400, "line 2, column 18", "not valid JSON")
	want(t, "unknown member", c.do("POST", dpath, `{"approve": true, "aprove": false}`), 400, `unknown member \"aprove\"`, `\"approve\", \"reason\", \"by\"`)
	want(t, "member twice", c.do("POST", dpath, `{"approve": true, "approve": false}`), 400, "given twice")
	want(t, "form body", c.send("POST", dpath, "application/x-www-form-urlencoded", []byte("approve=true")), 415, "application/json")
	want(t, "unknown gate", c.do("POST", "/api/v1/runs/"+run+"/decisions/lookup", decision), 404, `has no gate or approval \"lookup\"`, `waits for gate \"review\"`)
	want(t, "unknown approval", c.do("POST", "/api/v1/runs/"+run+"/decisions/apr_nope", decision), 404, `waits for gate \"review\"`)
	want(t, "unknown run", c.do("POST", "/api/v1/runs/run_nope/decisions/review", decision), 404, `no run \"run_nope\"`)
	if p, _ := r.srv.Pending(ctx, run); len(p) != 1 || p[0].ID != "review" {
		t.Fatalf("after refused decisions the run waits for %+v", p)
	}

	// With the session's CSRF token: decided, and the run goes on.
	cs.csrf = csrf
	res = cs.do("POST", dpath, decision)
	want(t, "decide with the session and its CSRF token", res, 200, `"kind":"gate"`, `"id":"review"`)
	if strings.Contains(string(res.body), operatorToken) {
		t.Fatalf("the answer echoes the operator token: %s", res.body)
	}
	a.tools(t, "mcp__memory__create_entities", "mcp__memory__search_nodes", serve.FinishTool)
	want(t, "decide again", c.do("POST", dpath, map[string]any{"approve": false}), 409, "already decided")
	if text, isErr := a.call(t, "mcp__memory__create_entities", map[string]any{"entities": []any{map[string]any{"name": "Ada Lovelace", "entityType": "customer", "observations": []string{"looked up"}}}}); isErr {
		t.Fatalf("create_entities: %s", text)
	}
	if _, isErr := a.call(t, serve.FinishTool, map[string]any{"output": "done"}); isErr {
		t.Fatal("finish failed")
	}
	r.waitStatus(run, "completed", "")
	if e := c.waitEvent(events, "status", run); e.Text != "" && e.Text != "completed" && e.Text != "waiting" {
		t.Errorf("status event %+v", e)
	}

	// The audit log, verified, as audit --format json --verify has it.
	res = c.do("GET", "/api/v1/runs/"+run+"/audit?verify=true", nil)
	want(t, "audit verify", res, 200, `"verified":true`, `"problems":[]`)
	au := decode[struct {
		Records []struct {
			Kind string
			Data map[string]any
		}
	}](t, res)
	var gate map[string]any
	for _, rec := range au.Records {
		if rec.Kind == "gate.approved" {
			gate = rec.Data
		}
	}
	if gate == nil || gate["by"] != "Grace" || !strings.Contains(fmt.Sprint(gate["reason"]), "[redacted]") || strings.Contains(string(res.body), operatorToken) {
		t.Fatalf("gate.approved record %v (the reason must be recorded with the token redacted)", gate)
	}
	want2, err := r.srv.Audit(ctx, run, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(au.Records) != len(want2.Records) {
		t.Fatalf("%d records over the API, %d in the store", len(au.Records), len(want2.Records))
	}
	res = c.do("GET", "/api/v1/runs/"+run+"/audit", nil)
	want(t, "audit", res, 200)
	if strings.Contains(string(res.body), `"verified"`) {
		t.Error("an audit not asked to verify says verified")
	}
	want(t, "audit verify=maybe", c.do("GET", "/api/v1/runs/"+run+"/audit?verify=maybe", nil), 400, "true or false")
	if n := countNotes(t, r.st, "cus_ada"); n != 1 {
		t.Fatalf("%d notes, want 1", n)
	}
}

// sameJSON fails unless got is the JSON of v (as the CLI encodes it).
func sameJSON(t *testing.T, what string, got []byte, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x, y any
	if err := encjson.Unmarshal(got, &x); err != nil {
		t.Fatal(err)
	}
	if err := encjson.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(x, y) {
		t.Fatalf("%s:\n got %s\nwant %s", what, got, b)
	}
}

// TestAPIRefusals: bad documents, inputs, bodies, paths and methods get
// the right status and a message that says what is wrong; an agent token
// revoked over the API is refused at the MCP endpoint; a cancelled run
// takes nothing more.
func TestAPIRefusals(t *testing.T) {
	r := newRig(t, "")
	ctx := context.Background()
	c := r.api(operatorToken)
	doc := readTestdata(t, "agent.json")

	// The description is public, and is the file in the repository.
	res := r.api("").do("GET", "/api/v1/openapi.json", nil)
	want(t, "openapi.json", res, 200)
	file, err := os.ReadFile("openapi.json")
	if err != nil || !bytes.Equal(res.body, file) {
		t.Fatalf("the served description is not serve/openapi.json (%v)", err)
	}

	// Paths and methods.
	res = c.do("DELETE", "/api/v1/runs", nil)
	want(t, "DELETE /api/v1/runs", res, 405, "GET, POST")
	if res.header.Get("Allow") != "GET, POST" {
		t.Errorf("Allow %q", res.header.Get("Allow"))
	}
	want(t, "unknown path", c.do("GET", "/api/v1/nope", nil), 404, "/api/v1/nope")
	want(t, "unknown path under a run", c.do("GET", "/api/v1/runs/run_x/nope", nil), 404)
	want(t, "unknown query parameter", c.do("GET", "/api/v1/pending?status=waiting", nil), 400, `unknown query parameter \"status\"`, `takes only \"mine\"`)
	want(t, "a query parameter without a flag value", c.do("GET", "/api/v1/pending?mine=maybe", nil), 400, "true or false")
	want(t, "a query parameter where none is taken", c.do("GET", "/api/v1/runs/run_x?nope=1", nil), 400, "takes no query parameters")
	want(t, "query parameter twice", c.do("GET", "/api/v1/runs/run_x/audit?verify=true&verify=false", nil), 400, "2 times")

	// A document that does not pass check: 422, each diagnostic at its
	// place in the document as sent.
	bad := bytes.Replace(doc, []byte(`"customer.get",
        "note.add"`), []byte(`"customer.delete",
        "note.add"`), 1)
	if bytes.Equal(bad, doc) {
		t.Fatal("the fixture changed: no allowedTools to break")
	}
	res = c.do("POST", "/api/v1/runs", createBody(bad, `{"customerId": "cus_ada"}`))
	want(t, "invalid document", res, 422, "does not pass validation and check", "customer.delete")
	wantLine := bytes.Count(bad[:bytes.Index(bad, []byte(`"customer.delete"`))], []byte("\n")) + 1
	e := decode[struct {
		Error       string
		Diagnostics []struct {
			File, Pointer, Severity, Rule, Message string
			Line, Column                           int
		}
	}](t, res)
	found := false
	for _, d := range e.Diagnostics {
		if d.Severity == "error" && d.File == "document" && d.Pointer == "/steps/0/allowedTools/0" && d.Line == wantLine && d.Column == 9 && d.Rule != "" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no error at document:%d:9 /steps/0/allowedTools/0 in %+v", wantLine, e.Diagnostics)
	}
	// Not JSON inside the document: positioned in the document too.
	res = c.do("POST", "/api/v1/runs", `{"document": {"openplaybook": "1.6",}}`)
	want(t, "document with a syntax error", res, 400, "line 1, column 37", "/document")

	// Inputs the document does not take.
	res = c.do("POST", "/api/v1/runs", createBody(doc, `{"customer": "cus_ada"}`))
	want(t, "input mismatch", res, 422, "inputSchema")
	if n := strings.Count(string(res.body), "does not match"); n != 1 {
		t.Errorf("the input message says it %d times: %s", n, res.body)
	}
	want(t, "no input", c.do("POST", "/api/v1/runs", createBody(doc, `null`)), 422, "inputSchema")

	// Bodies that are not a request to create a run.
	want(t, "no document", c.do("POST", "/api/v1/runs", `{"input": {}}`), 400, `no \"document\"`)
	want(t, "document a string", c.do("POST", "/api/v1/runs", `{"document": "{}"}`), 400, "a JSON object, not a string")
	want(t, "body an array", c.do("POST", "/api/v1/runs", `[]`), 400, "must be a JSON object, not an array")
	want(t, "unknown member", c.do("POST", "/api/v1/runs", `{"document": {}, "inputs": {}}`), 400, `unknown member \"inputs\"`, `\"document\", \"input\"`)
	want(t, "text body", c.send("POST", "/api/v1/runs", "text/plain", []byte(`{}`)), 415)
	huge := append(append([]byte(`{"document": {"x": "`), bytes.Repeat([]byte("a"), serve.MaxAPIBodyBytes)...), `"}}`...)
	want(t, "body over 8 MiB", c.do("POST", "/api/v1/runs", huge), 413, "8 MiB")
	if runs, _ := r.srv.Runs(ctx); len(runs) != 0 {
		t.Fatalf("%d runs after refused creations", len(runs))
	}

	// Unknown runs, and no secret echoed back.
	for _, p := range []string{"", "/pending", "/audit", "/events"} {
		want(t, "GET unknown run"+p, c.do("GET", "/api/v1/runs/run_nope"+p, nil), 404, `no run \"run_nope\"`)
	}
	res = c.do("GET", "/api/v1/runs/"+operatorToken, nil)
	want(t, "a secret as a run id", res, 404, "[redacted]")
	if strings.Contains(string(res.body), operatorToken) {
		t.Fatalf("the answer echoes the operator token: %s", res.body)
	}

	// A run waiting for its agent: resume, token, revoke.
	res = c.do("POST", "/api/v1/runs", createBody(doc, `{"customerId": "cus_ada"}`))
	want(t, "create", res, 201)
	run := decode[runStarted](t, res).Run
	r.waitStatus(run, "waiting", "agent")
	res = c.do("POST", "/api/v1/runs/"+run+"/resume", nil)
	want(t, "resume", res, 202, `"run":"`+run+`"`)
	r.waitStatus(run, "waiting", "agent")
	res = c.do("POST", "/api/v1/runs/"+run+"/resume", `{"reason": "again"}`)
	want(t, "resume with a member", res, 400, `unknown member \"reason\"; the body has no members: send {} or nothing`)

	res = c.do("POST", "/api/v1/runs/"+run+"/agent-token", nil)
	want(t, "issue agent token", res, 201)
	tok := decode[serve.IssuedToken](t, res)
	if code := mcpInitialize(t, tok.MCPURL, tok.Token); code != 200 {
		t.Fatalf("the MCP endpoint answers %d to a fresh token", code)
	}
	want(t, "revoke an unknown token", c.do("DELETE", "/api/v1/runs/"+run+"/agent-token?id=tok_nope", nil), 404, "tok_nope")
	res = c.do("DELETE", "/api/v1/runs/"+run+"/agent-token?by=tester", nil)
	want(t, "revoke", res, 200, `"revoked":1`)
	if code := mcpInitialize(t, tok.MCPURL, tok.Token); code != 401 {
		t.Fatalf("the MCP endpoint answers %d to a revoked token, want 401", code)
	}
	want(t, "revoke again", c.do("DELETE", "/api/v1/runs/"+run+"/agent-token", nil), 200, `"revoked":0`)

	// Cancel; then the run takes nothing more.
	want(t, "cancel with a number for reason", c.do("POST", "/api/v1/runs/"+run+"/cancel", `{"reason": 5}`), 400, `\"reason\" must be a string (why the run is cancelled), not a number`)
	want(t, "cancel with a long reason", c.do("POST", "/api/v1/runs/"+run+"/cancel", map[string]any{"reason": strings.Repeat("x", 5000)}), 400, "4096")
	res = c.do("POST", "/api/v1/runs/"+run+"/cancel", map[string]any{"reason": "wrong customer", "by": "tester"})
	want(t, "cancel", res, 200, `"status":"failed"`, "cancelled by tester: wrong customer")
	want(t, "cancel again", c.do("POST", "/api/v1/runs/"+run+"/cancel", nil), 409, "has ended (failed)")
	want(t, "resume an ended run", c.do("POST", "/api/v1/runs/"+run+"/resume", nil), 409, "has ended")
	want(t, "token for an ended run", c.do("POST", "/api/v1/runs/"+run+"/agent-token", nil), 409, "has ended")
	want(t, "decide on an ended run", c.do("POST", "/api/v1/runs/"+run+"/decisions/review", `{"approve": true}`), 409, "nothing to decide")
	au, err := r.srv.Audit(ctx, run, true)
	if err != nil || au.Verified == nil || !*au.Verified {
		t.Fatalf("audit after cancel: %v %+v", err, au.Problems)
	}
	var kinds []string
	for _, rec := range au.Records {
		kinds = append(kinds, rec.Kind)
	}
	for _, k := range []string{"agent.token-issued", "agent.token-revoked", "run.cancelled"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("no %s record in %v", k, kinds)
		}
	}
}

// mcpInitialize sends an MCP initialize request with tok and returns the
// HTTP status.
func mcpInitialize(t *testing.T, endpoint, tok string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}`
	req, _ := http.NewRequest("POST", endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}
