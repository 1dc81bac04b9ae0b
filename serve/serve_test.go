package serve_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/serve"
	"github.com/openplaybook/openplaybook/store"
)

const operatorToken = "op-token-for-tests-0123456789"

// rig is a server over a harness in a temporary directory: the reference
// memory server (its graph in the directory), an agent "outside" bound to
// driver mcp, and a store file.
type rig struct {
	t      *testing.T
	dir    string
	srv    *serve.Server
	ts     *httptest.Server
	st     store.Store      // the engine OPENPLAYBOOK_TEST_STORE selects (internal/teststore)
	h      *harness.Harness // the harness, for raw writes to its store (teststore.Exec)
	memory string           // the memory server's graph file
}

func newRig(t *testing.T, extra string) *rig {
	t.Helper()
	return newRigAgents(t, "", extra)
}

// newRigAgents is newRig with more agents: agents is their lines of the
// harness's agents section ("  model: {driver: openai, ...}\n").
func newRigAgents(t *testing.T, agents, extra string) *rig {
	t.Helper()
	root := mcptest.RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "node_modules/@modelcontextprotocol/server-memory/dist/index.js")); err != nil {
		t.Skip("the npm MCP reference servers are not installed (npm ci)")
	}
	t.Setenv("OPENPLAYBOOK_OPERATOR_TOKEN", operatorToken)
	dir := t.TempDir()
	mem := filepath.Join(dir, "memory.jsonl")
	harnessYAML := `mcpServers:
  memory:
    command: node
    args: [node_modules/@modelcontextprotocol/server-memory/dist/index.js]
    cwd: ` + root + `
    env: {MEMORY_FILE_PATH: ` + mem + `}
agents:
  outside: {driver: mcp}
  researcher: {driver: mcp}
  writer: {driver: mcp}
` + agents + teststore.YAML(t, "store.db", filepath.Join(root, "examples/data/customers.json")) + `serve:
  approvalWait: 2s
` + extra
	lh, st := loadHarness(t, dir, harnessYAML)
	r := &rig{t: t, dir: dir, st: st, h: lh.H, memory: mem}
	r.ts = httptest.NewUnstartedServer(nil)
	r.ts.Start()
	var err error
	r.srv, err = serve.New(serve.Options{Harness: lh, Store: st, BaseURL: r.ts.URL, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	r.ts.Config.Handler = r.srv
	t.Cleanup(func() {
		r.ts.Close()
		r.srv.Close()
		st.Close()
	})
	return r
}

// loadHarness writes yaml as dir/harness.yaml, loads it (failing the test
// on a problem) and opens its store (the caller closes it).
func loadHarness(t *testing.T, dir, yaml string) (*launch.Harness, store.Store) {
	t.Helper()
	hp := filepath.Join(dir, "harness.yaml")
	if err := os.WriteFile(hp, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	lh, err := launch.Load(hp)
	if err != nil {
		t.Fatal(err)
	}
	if bad := lh.Unusable(); bad != nil {
		t.Fatalf("harness: %v", bad)
	}
	st, err := host.OpenStore(context.Background(), lh.H)
	if err != nil {
		t.Fatal(err)
	}
	return lh, st
}

// startAgentRun creates a run of doc (named name) with input, waits until
// it waits for its external agent, and issues an agent token for it.
func (r *rig) startAgentRun(t *testing.T, name string, doc, input []byte) (string, serve.IssuedToken) {
	t.Helper()
	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, name, doc, input)
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	return run, tok
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitStatus waits until the run's status and pending kinds match.
func (r *rig) waitStatus(run, status, pendingKind string) runtime.RunStatus {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rs, err := r.srv.Run(context.Background(), run)
		if err != nil {
			r.t.Fatal(err)
		}
		ok := rs.Status == status && !r.srv.Runner().Executing(run)
		if status == "running" {
			ok = rs.Status == status
		}
		if pendingKind != "" {
			ok = ok && len(rs.Waiting) > 0 && rs.Waiting[0].Kind == pendingKind
		}
		if ok {
			return rs
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("run %s: status %s (waiting %+v), want %s/%s", run, rs.Status, rs.Waiting, status, pendingKind)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bearer adds an Authorization header to every request.
type bearer struct {
	tok  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.tok)
	return b.base.RoundTrip(req)
}

// agent is an MCP client session acting as a run's agent, which records
// the tools/list_changed notifications it gets.
type agent struct {
	cs      *mcp.ClientSession
	mu      sync.Mutex
	changed chan struct{}
	meta    mcp.Meta // the _meta of every call it makes (nil: none)
}

// sessionRevision is the revision the suite's go-sdk clients ask for
// (go-sdk's newest, 2026-07-28, is sessionless): the tests of sessions
// use it; stateless_test.go tests the sessionless revision.
var sessionRevision = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

// connect connects an agent at revision 2025-11-25, with a session.
func (r *rig) connect(url, tok string) *agent { return r.connectAt(url, tok, sessionRevision) }

// connectAt connects an agent with opts (nil: go-sdk's newest revision,
// 2026-07-28, sessionless).
func (r *rig) connectAt(url, tok string, opts *mcp.ClientSessionOptions) *agent {
	r.t.Helper()
	a := &agent{changed: make(chan struct{}, 16)}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case a.changed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{tok, http.DefaultTransport}}}, opts)
	if err != nil {
		r.t.Fatalf("connecting the agent: %v", err)
	}
	r.t.Cleanup(func() { cs.Close() })
	a.cs = cs
	return a
}

// tools waits until the agent is offered exactly want (sorted names).
func (a *agent) tools(t *testing.T, want ...string) {
	t.Helper()
	slices.Sort(want)
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := a.cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tl := range res.Tools {
			got = append(got, tl.Name)
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools %v, want %v", got, want)
		}
		select {
		case <-a.changed:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (a *agent) call(t *testing.T, name string, args any) (string, bool) {
	t.Helper()
	res, err := a.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args, Meta: a.meta})
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return strings.Join(text, "\n"), res.IsError
}

// TestExternalAgentRunsSteps: an MCP client is the agent of both steps
// bound to driver mcp; it is offered only each step's tools, a call
// outside them is refused and never reaches the upstream, and what ran is
// seen where it ran (the store's notes, the memory server's graph file).
//
// It holds at both kinds of revision: 2025-11-25 (a session) and
// 2026-07-28 (sessionless: the token stays attached across the gate, and
// the tool list's change reaches the client on its subscriptions/listen
// stream).
func TestExternalAgentRunsSteps(t *testing.T) {
	for _, opts := range []*mcp.ClientSessionOptions{sessionRevision, {ProtocolVersion: "2026-07-28"}} {
		t.Run(opts.ProtocolVersion, func(t *testing.T) { externalAgentRunsSteps(t, opts) })
	}
}

func externalAgentRunsSteps(t *testing.T, opts *mcp.ClientSessionOptions) {
	r := newRig(t, "")
	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")

	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	a := r.connectAt(tok.MCPURL, tok.Token, opts)
	if v := a.cs.InitializeResult().ProtocolVersion; v != opts.ProtocolVersion {
		t.Fatalf("negotiated %q, want %q", v, opts.ProtocolVersion)
	}
	a.tools(t, "customer__get", "note__add", serve.FinishTool)

	// Not on the step's list (it is the next step's): refused, not run.
	text, isErr := a.call(t, "mcp__memory__create_entities", map[string]any{"entities": []any{map[string]any{"name": "Mallory", "entityType": "person", "observations": []string{"x"}}}})
	if !isErr || !strings.Contains(text, "not") {
		t.Fatalf("a call outside allowedTools: %q (isError %v)", text, isErr)
	}
	if b, _ := os.ReadFile(r.memory); strings.Contains(string(b), "Mallory") {
		t.Fatal("the refused call reached the memory server")
	}
	// A case variant of an allowed name is another name: refused.
	if _, isErr := a.call(t, "Customer__get", map[string]any{"customerId": "cus_ada"}); !isErr {
		t.Fatal("a case variant of an allowed tool ran")
	}
	text, isErr = a.call(t, "customer__get", map[string]any{"customerId": "cus_ada"})
	if isErr || !strings.Contains(text, "Ada Lovelace") {
		t.Fatalf("customer.get: %q (isError %v)", text, isErr)
	}
	if _, isErr := a.call(t, "note__add", map[string]any{"customerId": "cus_ada", "body": "looked up by the outside agent"}); isErr {
		t.Fatal("note.add failed")
	}
	if text, isErr := a.call(t, serve.FinishTool, map[string]any{"output": map[string]any{"found": "Ada Lovelace"}}); isErr {
		t.Fatalf("finish: %s", text)
	}
	rs := r.waitStatus(run, "waiting", "gate")
	if rs.Waiting[0].ID != "review" {
		t.Fatalf("waiting for %+v", rs.Waiting)
	}
	a.tools(t, serve.FinishTool)
	if text, isErr := a.call(t, "note__add", map[string]any{"customerId": "cus_ada", "body": "at the gate"}); !isErr {
		t.Fatalf("a call while the run waits at a gate ran: %s", text)
	}

	for len(a.changed) > 0 {
		<-a.changed
	}
	if _, err := r.srv.Decide(ctx, run, "review", runtime.Verdict{Approve: true, By: "tester"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed reached the client when the run moved to its next step")
	}
	a.tools(t, "mcp__memory__create_entities", "mcp__memory__search_nodes", serve.FinishTool)
	if text, isErr := a.call(t, "mcp__memory__create_entities", map[string]any{"entities": []any{map[string]any{"name": "Ada Lovelace", "entityType": "customer", "observations": []string{"looked up"}}}}); isErr {
		t.Fatalf("create_entities: %s", text)
	}
	if _, isErr := a.call(t, serve.FinishTool, map[string]any{"output": "done"}); isErr {
		t.Fatal("finish failed")
	}
	r.waitStatus(run, "completed", "")

	// What ran is where it ran.
	notes := countNotes(t, r.st, "cus_ada")
	if notes != 1 {
		t.Fatalf("%d notes on cus_ada, want 1", notes)
	}
	if b, _ := os.ReadFile(r.memory); !strings.Contains(string(b), "Ada Lovelace") || strings.Contains(string(b), "Mallory") {
		t.Fatalf("memory graph: %s", b)
	}
	au, err := r.srv.Audit(ctx, run, true)
	if err != nil || au.Verified == nil || !*au.Verified {
		t.Fatalf("audit: %v %+v", err, au.Problems)
	}
	var kinds []string
	for _, rec := range au.Records {
		kinds = append(kinds, rec.Kind)
	}
	for _, k := range []string{"agent.token-issued", "agent.attached", "call.refused", "call.succeeded", "gate.approved", "run.completed"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("no %s record in %v", k, kinds)
		}
	}
	// The token ends with the run.
	if _, err := serve.AgentToken(ctx, r.st, run, tok.Token); err == nil {
		t.Error("the agent token still works after the run completed")
	}
}

func countNotes(t *testing.T, st store.Store, customer string) int {
	t.Helper()
	ns, err := st.(builtin.Data).ListNotes(context.Background(), customer, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	return len(ns)
}
