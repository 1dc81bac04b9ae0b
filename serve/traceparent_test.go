package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/internal/tracectx"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
	"github.com/openplaybook/openplaybook/obs"
	"github.com/openplaybook/openplaybook/serve"
)

// metaServer is an MCP server (go-sdk, streamable HTTP) that offers the
// memory server's search_nodes (a read) and create_entities (a side
// effect), defined as serve/testdata/agent.json embeds them, and records
// the _meta of every tools/call it receives.
type metaServer struct {
	mu    sync.Mutex
	metas []map[string]any // in the order received
	tools []string
}

func startMetaServer(t *testing.T) (*metaServer, string) {
	t.Helper()
	var doc struct {
		Tools []struct {
			Name         string          `json:"name"`
			Description  string          `json:"description"`
			InputSchema  json.RawMessage `json:"inputSchema"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(readTestdata(t, "agent.json"), &doc); err != nil {
		t.Fatal(err)
	}
	ms := &metaServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "memory", Version: "1"}, nil)
	for _, tl := range doc.Tools {
		name, ok := strings.CutPrefix(tl.Name, "mcp.memory.")
		if !ok {
			continue
		}
		srv.AddTool(&mcp.Tool{Name: name, Description: tl.Description, InputSchema: tl.InputSchema, OutputSchema: tl.OutputSchema},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				ms.mu.Lock()
				ms.metas = append(ms.metas, map[string]any(req.Params.Meta))
				ms.tools = append(ms.tools, name)
				ms.mu.Unlock()
				out := `{"entities":[]}`
				if name == "search_nodes" {
					out = `{"entities":[],"relations":[]}`
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}, StructuredContent: json.RawMessage(out)}, nil
			})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ms, ts.URL
}

func (ms *metaServer) received() ([]string, []map[string]any) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return append([]string(nil), ms.tools...), append([]map[string]any(nil), ms.metas...)
}

// traceDoc is a playbook of one step an external agent runs, which may
// call the MCP server's search_nodes and create_entities and Stripe's
// charge.get.
func traceDoc(t *testing.T) []byte {
	t.Helper()
	var agentDoc, apprDoc map[string]any
	if err := json.Unmarshal(readTestdata(t, "agent.json"), &agentDoc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(readTestdata(t, "approval.json"), &apprDoc); err != nil {
		t.Fatal(err)
	}
	var tools []any
	for _, d := range []map[string]any{agentDoc, apprDoc} {
		for _, tl := range d["tools"].([]any) {
			switch tl.(map[string]any)["name"] {
			case "mcp.memory.search_nodes", "mcp.memory.create_entities", "charge.get":
				tools = append(tools, tl)
			}
		}
	}
	req := agentDoc["requires"].(map[string]any)
	areq := apprDoc["requires"].(map[string]any)
	req["connections"], req["secrets"] = areq["connections"], areq["secrets"]
	req["connections"].([]any)[0].(map[string]any)["capabilities"] = []any{"charge.get"}
	agentDoc["manifest"].(map[string]any)["requiredConnectors"] = []any{"stripe"}
	agentDoc["tools"] = tools
	agentDoc["steps"] = []any{map[string]any{"id": "lookup", "kind": "agent", "agent": "outside", "purpose": "Look things up.",
		"allowedTools": []any{"mcp.memory.search_nodes", "mcp.memory.create_entities", "charge.get"}}}
	b, err := json.Marshal(agentDoc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// traceRig is a server (the store wrapped by obs, the handler Operated)
// over a harness whose MCP server is a [metaServer] and whose Stripe
// connection goes to stripe-mock through a recording proxy; exp, when
// not nil, receives the spans.
type traceRig struct {
	*rig
	o      *obs.Obs
	ms     *metaServer
	stripe *stripemock.Recorder
}

func newTraceRig(t *testing.T, exp sdktrace.SpanExporter) *traceRig {
	t.Helper()
	rec := stripemock.Proxy(t, stripemock.Start(t))
	ms, mcpURL := startMetaServer(t)
	t.Setenv("STRIPE_API_KEY", "sk_test_traceparent")
	t.Setenv("OPENPLAYBOOK_OPERATOR_TOKEN", operatorToken)
	dir := t.TempDir()
	hy := `mcpServers:
  memory:
    url: ` + mcpURL + `
connections:
  stripe:
    authKind: api_token
    secrets: {apiKey: STRIPE_API_KEY}
    baseURL: ` + rec.URL + `
agents:
  outside: {driver: mcp}
` + teststore.YAML(t, "store.db", filepath.Join(mcptest.RepoRoot(t), "examples/data/customers.json")) + `serve:
  approvalWait: 2s
`
	lh, st := loadHarness(t, dir, hy)
	o, err := obs.New(context.Background(), obs.Config{LogFormat: "json", Stderr: &syncBuf{}, SpanExporter: exp, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, dir: dir, st: st, h: lh.H}
	r.ts = httptest.NewServer(nil)
	r.srv, err = serve.New(serve.Options{Harness: lh, Store: o.Store(st), BaseURL: r.ts.URL, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	r.ts.Config.Handler = r.srv.Operated(o, obs.Proxies{})
	t.Cleanup(func() {
		r.ts.Close()
		r.srv.Close()
		st.Close()
		_ = o.Shutdown(context.Background())
	})
	return &traceRig{rig: r, o: o, ms: ms, stripe: rec}
}

// The agent's own trace contexts: the traceparent header of its HTTP
// requests that carry a tools/call, that of its other requests (the
// session's initialize, its lists), and the _meta.traceparent of two of
// its calls.
const (
	agentHeaderTP  = "00-11111111111111111111111111111111-2222222222222222-01"
	agentSessionTP = "00-77777777777777777777777777777777-8888888888888888-01"
	agentMetaTP1   = "00-33333333333333333333333333333333-4444444444444444-01"
	agentMetaTP2   = "00-55555555555555555555555555555555-6666666666666666-01"
)

// headerTP adds a traceparent header to every request: agentHeaderTP to
// one that carries a tools/call, agentSessionTP to the others. Each also
// carries a forged X-Openplaybook-Server-Span (the header through which
// obs's middleware hands a request's server span to the gateway), which
// must be ignored.
type headerTP struct{ base http.RoundTripper }

func (h headerTP) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	tp := agentSessionTP
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, []byte(`"tools/call"`)) {
			tp = agentHeaderTP
		}
	}
	req.Header.Set("traceparent", tp)
	req.Header.Set("X-Openplaybook-Server-Span", "00-99999999999999999999999999999999-aaaaaaaaaaaaaaaa-01")
	return h.base.RoundTrip(req)
}

// traceScenario runs traceDoc with an MCP client as the agent (every
// request with agentHeaderTP): search_nodes with agentMetaTP1 in _meta,
// create_entities with agentMetaTP2, charge.get with a malformed one,
// search_nodes again with a _meta.traceparent that is not a string.
func (r *traceRig) traceScenario(t *testing.T, rev *mcp.ClientSessionOptions) string {
	t.Helper()
	ctx := context.Background()
	run, tok := r.startAgentRun(t, "trace.json", traceDoc(t), []byte(`{"customerId":"cus_ada"}`))
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: tok.MCPURL,
		HTTPClient: &http.Client{Transport: headerTP{bearer{tok.Token, http.DefaultTransport}}}}, rev)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	a := &agent{cs: cs, changed: make(chan struct{}, 1)}
	a.tools(t, "mcp__memory__search_nodes", "mcp__memory__create_entities", "charge__get", serve.FinishTool)
	for _, c := range []struct {
		name string
		args map[string]any
		meta mcp.Meta
	}{
		{"mcp__memory__search_nodes", map[string]any{"query": "argument-value-query"}, mcp.Meta{"traceparent": agentMetaTP1, "tracestate": "agent=argument-value-state"}},
		{"mcp__memory__create_entities", map[string]any{"entities": []any{map[string]any{"name": "argument-value-entity", "entityType": "t", "observations": []string{"x"}}}}, mcp.Meta{"traceparent": agentMetaTP2}},
		{"charge__get", map[string]any{"chargeId": "ch_argumentvalue"}, mcp.Meta{"traceparent": "00-zz-not-a-trace-context-01"}},
		{"mcp__memory__search_nodes", map[string]any{"query": "second"}, mcp.Meta{"traceparent": 42}},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.name, Arguments: c.args, Meta: c.meta})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", c.name, err, res)
		}
	}
	if text, isErr := a.call(t, serve.FinishTool, map[string]any{"output": "done"}); isErr {
		t.Fatalf("finish: %s", text)
	}
	r.waitStatus(run, "completed", "")
	return run
}

// keptSpans is an in-memory exporter whose spans outlive its shutdown
// (obs's Shutdown flushes them).
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

// TestTraceparentCrossesGateway: with tracing on, each tools/call the
// MCP server receives and each request Stripe receives carries a W3C
// traceparent whose trace is the run's and whose parent is that call's
// execute_tool span (the spans exported); that span links to the
// agent's _meta.traceparent and to its HTTP request's traceparent; a
// malformed or non-string _meta.traceparent is ignored (the call runs);
// no link or attribute carries an argument value or the agent's
// tracestate.
func TestTraceparentCrossesGateway(t *testing.T) {
	// Both revisions: a 2025-11-25 session (the SDK runs its messages
	// under the session's context, its first request's) and the
	// sessionless 2026-07-28.
	for _, rev := range []*mcp.ClientSessionOptions{sessionRevision, nil} {
		t.Run(fmt.Sprintf("session=%v", rev != nil), func(t *testing.T) { testTraceparentCrossesGateway(t, rev) })
	}
}

func testTraceparentCrossesGateway(t *testing.T, rev *mcp.ClientSessionOptions) {
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	r := newTraceRig(t, exp)
	run := r.traceScenario(t, rev)
	if err := r.o.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	var runSpan tracetest.SpanStub
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
		if s.Name == "run "+run {
			runSpan = s
		}
	}
	if !runSpan.SpanContext.IsValid() {
		t.Fatalf("no span of run %s among %d", run, len(spans))
	}
	calls := map[string]int{}
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "execute_tool ") {
			calls[s.Name]++
		}
	}
	if want := map[string]int{"execute_tool mcp.memory.search_nodes": 2, "execute_tool mcp.memory.create_entities": 1, "execute_tool charge.get": 1}; !maps.Equal(calls, want) {
		t.Errorf("execute_tool spans %v, want one per call %v", calls, want)
	}
	// sentUnder checks that a traceparent a tool server received names
	// the execute_tool span of tool, in the run's trace, under the step.
	sentUnder := func(what, tp, tool string) tracetest.SpanStub {
		t.Helper()
		sc := tracectx.ExtractHeader(http.Header{"Traceparent": {tp}})
		if !sc.IsValid() {
			t.Fatalf("%s: traceparent %q is not a valid W3C trace context", what, tp)
		}
		if sc.TraceID() != runSpan.SpanContext.TraceID() {
			t.Errorf("%s: traceparent %q is not in the run's trace %s", what, tp, runSpan.SpanContext.TraceID())
		}
		sp, ok := byID[sc.SpanID()]
		if !ok {
			t.Fatalf("%s: traceparent %q names no exported span", what, tp)
		}
		if sp.Name != "execute_tool "+tool {
			t.Errorf("%s: traceparent names span %q, want execute_tool %s", what, sp.Name, tool)
		}
		if step := byID[sp.Parent.SpanID()]; step.Name != "step lookup" || step.Parent.SpanID() != runSpan.SpanContext.SpanID() {
			t.Errorf("%s: span %q is under %q, not under step lookup of the run", what, sp.Name, step.Name)
		}
		// The span sent is the one the call's audit records ended.
		outcome, index := "", ""
		for _, a := range sp.Attributes {
			switch a.Key {
			case "openplaybook.decision.outcome":
				outcome = a.Value.AsString()
			case "openplaybook.call.index":
				index = a.Value.Emit()
			}
		}
		if outcome != "succeeded" || index == "" {
			t.Errorf("%s: span %q has outcome %q and index %q, want the call's recorded outcome succeeded and its index", what, sp.Name, outcome, index)
		}
		return sp
	}
	tools, metas := r.ms.received()
	if len(metas) != 3 {
		t.Fatalf("the MCP server received %d tools/call (%v), want 3", len(metas), tools)
	}
	var callSpans []tracetest.SpanStub
	for i, m := range metas {
		tp, _ := m["traceparent"].(string)
		callSpans = append(callSpans, sentUnder("tools/call "+tools[i], tp, "mcp.memory."+tools[i]))
		if _, ok := m["tracestate"]; ok {
			t.Errorf("tools/call %s carried a tracestate (the run's trace has none): %v", tools[i], m)
		}
	}
	if callSpans[0].SpanContext.SpanID() == callSpans[2].SpanContext.SpanID() {
		t.Error("the two search_nodes calls were sent under one span")
	}
	var charges []stripemock.Request
	for _, rq := range r.stripe.Requests() {
		if strings.HasPrefix(rq.Path, "/v1/charges/") {
			charges = append(charges, rq)
		} else if tp := rq.Header.Values("traceparent"); len(tp) > 0 {
			t.Errorf("Stripe request %s %s (not a call's) carried traceparent %v", rq.Method, rq.Path, tp)
		}
	}
	if len(charges) != 1 {
		t.Fatalf("Stripe received %d requests for a charge, want 1", len(charges))
	}
	chargeSpan := sentUnder("Stripe "+charges[0].Path, charges[0].Header.Get("traceparent"), "charge.get")

	// Links: the agent's trace contexts, by their source.
	links := func(s tracetest.SpanStub) map[string]string {
		out := map[string]string{}
		for _, l := range s.Links {
			src := "span"
			for _, a := range l.Attributes {
				if a.Key == "openplaybook.link.source" {
					src = a.Value.AsString()
				}
			}
			out[src] = "00-" + l.SpanContext.TraceID().String() + "-" + l.SpanContext.SpanID().String() + "-01"
			if l.SpanContext.TraceState().Len() > 0 {
				t.Errorf("span %q links with a tracestate %q", s.Name, l.SpanContext.TraceState())
			}
		}
		return out
	}
	for i, c := range []struct {
		span tracetest.SpanStub
		meta string // "" none
	}{{callSpans[0], agentMetaTP1}, {callSpans[1], agentMetaTP2}, {chargeSpan, ""}, {callSpans[2], ""}} {
		got := links(c.span)
		if got["mcp._meta"] != c.meta {
			t.Errorf("call %d (%s): the _meta link is %q, want %q (links %v)", i, c.span.Name, got["mcp._meta"], c.meta, got)
		}
		if got["http.traceparent"] != agentHeaderTP {
			t.Errorf("call %d (%s): the HTTP traceparent link is %q, want %q (the request that carried the call, not the session's first)", i, c.span.Name, got["http.traceparent"], agentHeaderTP)
		}
		if sp, ok := got["span"]; ok {
			t.Errorf("call %d (%s): links to a request span %s (none by default; not the forged header's)", i, c.span.Name, sp)
		}
	}
	for _, s := range spans {
		b, _ := json.Marshal(struct {
			A any
			L any
		}{s.Attributes, s.Links})
		for _, bad := range []string{"argument-value", "ch_argumentvalue", "sk_test_traceparent"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("span %q holds %q: %s", s.Name, bad, b)
			}
		}
	}
}

// TestTraceparentOffSendsNone: with tracing off, the same calls reach
// the MCP server without _meta and Stripe without a traceparent header,
// although the agent sent its own.
func TestTraceparentOffSendsNone(t *testing.T) {
	r := newTraceRig(t, nil)
	if r.o.Tracing() {
		t.Fatal("tracing is on")
	}
	r.traceScenario(t, nil)
	_, metas := r.ms.received()
	if len(metas) != 3 {
		t.Fatalf("the MCP server received %d tools/call, want 3", len(metas))
	}
	for _, m := range metas {
		if len(m) != 0 {
			t.Errorf("a tools/call carried _meta %v with tracing off", m)
		}
	}
	for _, rq := range r.stripe.Requests() {
		if v := rq.Header.Values("traceparent"); len(v) != 0 {
			t.Errorf("Stripe received traceparent %v with tracing off", v)
		}
	}
}
