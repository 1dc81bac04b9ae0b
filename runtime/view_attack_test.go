package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
	"github.com/openplaybook/openplaybook/runtime"
)

// The pk server: act (destructive; the document requires approval for
// it) and peek (read-only), whose answer the test picks per call.
const (
	actIn   = `{"type":"object","properties":{"id":{"type":"string"},"note":{"type":"string"}},"required":["id","note"],"additionalProperties":false}`
	actOut  = `{"type":"object"}`
	peekIn  = `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`
	peekOut = `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`
)

type pkServer struct {
	URL string
	srv *mcp.Server

	mu    sync.Mutex
	mode  string
	ran   map[string]int
	args  map[string][]string
	done  chan struct{}
	block chan struct{}
}

func startPk(t *testing.T, secret string) *pkServer {
	t.Helper()
	p := &pkServer{srv: mcp.NewServer(&mcp.Implementation{Name: "pk", Version: "1.0.0"}, nil),
		ran: map[string]int{}, args: map[string][]string{}, done: make(chan struct{}), mode: "ok"}
	p.srv.AddTool(&mcp.Tool{Name: "act", Description: "Acts on a widget.", InputSchema: rawSchema(actIn), OutputSchema: rawSchema(actOut),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: hintPtr(true)}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			p.record("act", req.Params.Arguments)
			return structured(map[string]any{"acted": true}), nil
		})
	p.addPeek(false)
	p.URL = mcptest.ServeHTTP(t, p.srv)
	t.Cleanup(func() { close(p.done) })
	_ = secret
	return p
}

func (p *pkServer) addPeek(destructive bool) {
	ann := &mcp.ToolAnnotations{ReadOnlyHint: true}
	if destructive {
		ann = &mcp.ToolAnnotations{DestructiveHint: hintPtr(true)}
	}
	p.srv.AddTool(&mcp.Tool{Name: "peek", Description: "Reads a widget as it stands now.", InputSchema: rawSchema(peekIn), OutputSchema: rawSchema(peekOut), Annotations: ann},
		p.peek)
}

func (p *pkServer) record(tool string, args json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ran[tool]++
	p.args[tool] = append(p.args[tool], string(args))
}

func (p *pkServer) runs(tool string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ran[tool]
}

func (p *pkServer) setMode(m string) {
	p.mu.Lock()
	p.mode = m
	p.mu.Unlock()
}

func (p *pkServer) peek(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p.record("peek", req.Params.Arguments)
	p.mu.Lock()
	mode := p.mode
	p.mu.Unlock()
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	switch {
	case mode == "ok":
		return structured(map[string]any{"id": "w1", "state": "open"}), nil
	case mode == "html":
		return structured(map[string]any{"id": "w1", "state": `<script>alert(1)</script><img src=x onerror=alert(2)>`}), nil
	case strings.HasPrefix(mode, "secret:"):
		return structured(map[string]any{"id": "w1", "state": "key is " + strings.TrimPrefix(mode, "secret:")}), nil
	case strings.HasPrefix(mode, "errsecret:"):
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "cannot read with " + strings.TrimPrefix(mode, "errsecret:")}}}, nil
	case mode == "huge":
		return structured(map[string]any{"id": "w1", "state": strings.Repeat("x", 5<<20)}), nil
	case mode == "invalid":
		return text(`{"id": "w1", "state": `), nil
	case mode == "badschema":
		return structured(map[string]any{"id": 5}), nil
	case mode == "hang":
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.done:
			return nil, errors.New("the test ended")
		}
	}
	return nil, errors.New("unknown mode " + mode)
}

// pkDoc: step act may call mcp.pk.act (requiresApproval) and mcp.pk.peek
// (a read of the same server).
func pkDoc(t *testing.T) []byte {
	t.Helper()
	def := func(name, in, out string, read bool) map[string]any {
		d := map[string]any{"name": name, "source": "mcp", "description": map[bool]string{true: "Reads a widget as it stands now.", false: "Acts on a widget."}[read],
			"permissions": []string{}, "riskClass": "read", "sideEffecting": false, "requiresApproval": false,
			"inputSchema": schemaOf(in), "outputSchema": schemaOf(out)}
		if !read {
			d["riskClass"], d["sideEffecting"], d["requiresApproval"], d["dataScopeWrites"] = "money", true, true, []string{"pk.widgets"}
		}
		return d
	}
	doc := map[string]any{
		"openplaybook": "1.6",
		"manifest": map[string]any{"id": "pkview", "name": "Test pkview", "version": "1.0.0",
			"description": "A playbook the runtime's tests run.", "requiredConnectors": []string{}},
		"requires": map[string]any{"connections": []any{}, "secrets": []any{},
			"mcpServers": []any{map[string]any{"name": "pk", "toolNames": []string{"mcp.pk.act", "mcp.pk.peek"}, "capabilities": []string{}}}},
		"tools": []any{def("mcp.pk.act", actIn, actOut, false), def("mcp.pk.peek", peekIn, peekOut, true)},
		"steps": []any{agentStep("act", "lou", []string{"mcp.pk.act", "mcp.pk.peek"}, "")},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestViewAttackHostileRead: a read tool of the waiting call's MCP server
// answering as a hostile server would (markup, the harness's secret in
// its result or its error, 5 MiB, broken JSON, a result its outputSchema
// refuses, no answer at all) reaches the server once per view, receives
// only the read's required argument (not the call's other members), and
// its answer is shown redacted or not at all, never with the secret, and
// the view ends within the session's CallTimeout. The views neither void
// the approval nor show up as calls: the approved call then runs once,
// and the chain verifies.
func TestViewAttackHostileRead(t *testing.T) {
	t.Parallel()
	const key = "sk_test_51Hviewattacksecretvalue77"
	url, _ := stripeMock(t)
	pk := startPk(t, key)
	r := newRig(t, rigConfig{stripe: url, http: map[string]string{"pk": pk.URL}, secrets: map[string]string{"STRIPE_API_KEY": key}}, pkDoc(t))
	if r.env.Secrets.Redact(key) == key {
		t.Fatal("the key is not among the redacted values")
	}
	ctx := context.Background()
	tr := map[string]string{"lou": transcriptOf(map[string][]tcall{"act": {
		{"mcp.pk.act", map[string]any{"id": "w1", "note": "please"}},
	}})}
	const timeout = 700 * time.Millisecond
	short := func(o *runtime.SessionOptions) { o.CallTimeout = timeout }
	s := r.engine(0, tr, nil, short)
	out, err := s.Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	run := out.Run
	apr := r.onlyApproval(run)
	calls := len(r.calls(run))

	for _, mode := range []string{"ok", "html", "secret:" + key, "errsecret:" + key, "huge", "invalid", "badschema", "hang"} {
		pk.setMode(mode)
		before := pk.runs("peek")
		t0 := time.Now()
		v, err := s.View(ctx, run, apr.ID, "mcp.pk.peek", "alice")
		took := time.Since(t0)
		name := mode
		if len(name) > 12 {
			name = name[:12]
		}
		if err != nil {
			t.Errorf("%s: View: %v", name, err)
			continue
		}
		if n := pk.runs("peek") - before; n != 1 {
			t.Errorf("%s: %d peek calls reached the server, want 1", name, n)
		}
		if got := pk.args["peek"][len(pk.args["peek"])-1]; got != `{"id":"w1"}` {
			t.Errorf("%s: peek received %s, want only the id", name, got)
		}
		if strings.Contains(string(v.Result), key) || strings.Contains(v.Error, key) || strings.Contains(string(v.Arguments), key) {
			t.Errorf("BROKEN %s: the view shows the harness's secret: %s %s", name, v.Result, v.Error)
		}
		switch mode {
		case "ok", "html":
			if v.Error != "" || !strings.Contains(string(v.Result), `"id":"w1"`) {
				t.Errorf("%s: %+v, want the result", name, v)
			}
		case "huge", "invalid", "badschema", "hang":
			if v.Error == "" || v.Result != nil {
				t.Errorf("%s: error %q result %d bytes, want a failure and no result", name, v.Error, len(v.Result))
			}
		}
		if took > timeout+5*time.Second {
			t.Errorf("%s: the view took %s, CallTimeout %s", name, took, timeout)
		}
	}
	if n := pk.runs("act"); n != 0 {
		t.Fatalf("act ran %d times before the decision", n)
	}
	if n := len(r.calls(run)); n != calls {
		t.Errorf("the views added call rows: %d, was %d", n, calls)
	}
	views := 0
	for _, x := range r.auditOf(run) {
		if strings.Contains(string(x.Data), key) || strings.Contains(x.Tool, key) {
			t.Errorf("BROKEN: audit record %d (%s) holds the secret", x.Seq, x.Kind)
		}
		if x.Kind == "view.read" {
			views++
		}
	}
	if views != 8 {
		t.Errorf("%d view.read records, want 8", views)
	}
	if probs, err := r.st.VerifyAudit(ctx, run); err != nil || len(probs) > 0 {
		t.Fatalf("the chain after the views: %v %v", err, probs)
	}
	if p := r.onlyApproval(run); p.ID != apr.ID {
		t.Fatalf("the approval changed: %+v", p)
	}

	r.mustDecide(run, apr.ID, true)
	var seen agentLog
	out, err = r.engine(0, tr, &seen, short).Resume(ctx, run)
	wantOutcome(t, "resume", out, err, runtime.Completed)
	if n := pk.runs("act"); n != 1 {
		t.Errorf("act ran %d times after the approval, want 1", n)
	}
	if n := pk.runs("peek"); n != 8 {
		t.Errorf("peek ran %d times, want 8 (the views only)", n)
	}
	for _, c := range r.calls(run) {
		if c.Tool == "mcp.pk.peek" {
			t.Errorf("a view is a call of the step: %+v", c)
		}
	}
	if probs, err := r.st.VerifyAudit(ctx, run); err != nil || len(probs) > 0 {
		t.Fatalf("the chain after the resume: %v %v", err, probs)
	}
}

// TestViewAttackDrift: the read tool's server annotates it destructive
// after the run was imported: the view is refused and nothing reaches the
// server.
func TestViewAttackDrift(t *testing.T) {
	t.Parallel()
	url, _ := stripeMock(t)
	pk := startPk(t, "")
	r := newRig(t, rigConfig{stripe: url, http: map[string]string{"pk": pk.URL}, secrets: map[string]string{"STRIPE_API_KEY": "sk_test_123"}}, pkDoc(t))
	ctx := context.Background()
	tr := map[string]string{"lou": transcriptOf(map[string][]tcall{"act": {
		{"mcp.pk.act", map[string]any{"id": "w1", "note": "please"}},
	}})}
	s := r.engine(0, tr, nil, nil)
	out, err := s.Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	apr := r.onlyApproval(out.Run)
	pk.addPeek(true)
	time.Sleep(300 * time.Millisecond) // list_changed
	if _, err := s.View(ctx, out.Run, apr.ID, "mcp.pk.peek", "alice"); !errors.Is(err, runtime.ErrNotViewable) {
		t.Errorf("View of a read now destructive: %v, want ErrNotViewable", err)
	}
	if n := pk.runs("peek"); n != 0 {
		t.Errorf("BROKEN: %d peek calls reached the server after it annotated peek destructive", n)
	}
}

// TestViewAttackArgs: arguments the waiting call's tool would read one
// way and a view another never produce a view: duplicate member names,
// or a non-object; a required argument missing gives none either.
func TestViewAttackArgs(t *testing.T) {
	t.Parallel()
	doc := startWaitingRefund(t, "ch_a").r.docs[0]
	for _, args := range []string{`{"chargeId":"ch_a","chargeId":"ch_b"}`, `{"chargeId":"ch_a","amount":1,"amount":2}`, `["chargeId","ch_a"]`, `"ch_a"`, `null`, `{}`, `{"chargeid":"ch_a"}`, `{"chargeId":"ch_a"`} {
		if v := runtime.ViewTools(doc, "refund", "charge.refund", []byte(args)); len(v) != 0 {
			t.Errorf("ViewTools(%s) = %+v, want none", args, v)
		}
	}
	if v := runtime.ViewTools(doc, "refund", "charge.refund", []byte(`{"chargeId":"ch_a","amount":1500,"extra":{"chargeId":"ch_b"}}`)); len(v) != 1 || string(v[0].Arguments) != `{"chargeId":"ch_a"}` {
		t.Errorf("ViewTools with extra members = %+v, want charge.get with only chargeId", v)
	}
	for _, tc := range []struct{ step, tool string }{{"nosuch", "charge.refund"}, {"refund", "charge.get"}, {"refund", "charge.refund\x00"}, {"refund", "charge.ref\u0075nd "}} {
		if v := runtime.ViewTools(doc, tc.step, tc.tool, []byte(`{"chargeId":"ch_a"}`)); len(v) != 0 && tc.tool != "charge.get" {
			t.Errorf("ViewTools(%q, %q) = %+v, want none", tc.step, tc.tool, v)
		}
	}
}

// TestViewAttackConcurrent: many views at once, racing the decision and
// the resumed run: every view that answers reached Stripe once and is
// recorded once; the refund runs exactly once; the chain verifies.
func TestViewAttackConcurrent(t *testing.T) {
	t.Parallel()
	w := startWaitingRefund(t, "ch_race")
	r, rec, s, tr, run, apr := w.r, w.rec, w.s, w.tr, w.run, w.apr
	ctx := context.Background()

	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	var other []error
	start := make(chan struct{})
	for range 16 {
		wg.Go(func() {
			<-start
			for range 3 {
				_, err := s.View(ctx, run, apr.ID, "charge.get", "alice")
				mu.Lock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, runtime.ErrNotViewable):
					refused++
				default:
					other = append(other, err)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	time.Sleep(20 * time.Millisecond)
	r.mustDecide(run, apr.ID, true)
	out, err := r.engine(0, tr, nil, nil).Resume(ctx, run)
	wg.Wait()
	wantOutcome(t, "resume", out, err, runtime.Completed)
	t.Logf("%d views answered, %d refused, %v", ok, refused, other)
	for _, e := range other {
		t.Errorf("a view failed: %v", e)
	}
	if n := refundPosts(rec); n != 1 {
		t.Errorf("%d refunds reached Stripe, want 1", n)
	}
	records := 0
	for _, x := range r.auditOf(run) {
		if x.Kind == "view.read" {
			records++
		}
	}
	if n := chargeReads(rec, "ch_race"); n != ok || records != ok {
		t.Errorf("%d charge reads reached Stripe and %d view.read records, want %d each (the views that answered)", n, records, ok)
	}
	if probs, err := r.st.VerifyAudit(ctx, run); err != nil || len(probs) > 0 {
		t.Fatalf("the chain: %v %v", err, probs)
	}
}

// waitingRefund is a run of viewDoc whose refund waits for approval.
type waitingRefund struct {
	r   *rig
	rec *stripemock.Recorder
	ctr *ctrServer
	s   *runtime.Session
	tr  map[string]string
	run string
	apr runtime.Pending
}

// startWaitingRefund starts stripe-mock, ctr and a rig of viewDoc, and a
// run whose agent asks for a refund of chargeID (1500, duplicate).
func startWaitingRefund(t *testing.T, chargeID string) waitingRefund {
	t.Helper()
	url, rec := stripeMock(t)
	ctr := startCtr(t, true)
	r := newRig(t, rigConfig{stripe: url, http: map[string]string{"ctr": ctr.URL}, secrets: map[string]string{"STRIPE_API_KEY": "sk_test_123"}}, viewDoc(t))
	tr := map[string]string{"lou": transcriptOf(map[string][]tcall{"refund": {
		{"charge.refund", map[string]any{"chargeId": chargeID, "amount": 1500, "reason": "duplicate"}},
	}})}
	s := r.engine(0, tr, nil, nil)
	out, err := s.Start(context.Background(), nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	return waitingRefund{r: r, rec: rec, ctr: ctr, s: s, tr: tr, run: out.Run, apr: r.onlyApproval(out.Run)}
}
