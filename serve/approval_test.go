package serve_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/serve"
)

// approvalRig is a rig whose harness has a Stripe connection to
// stripe-mock behind a recorder, which counts what reached "Stripe".
func approvalRig(t *testing.T) (*rig, *stripemock.Recorder) {
	t.Helper()
	rec := stripemock.Proxy(t, stripemock.Start(t))
	t.Setenv("STRIPE_API_KEY", "sk_test_serve")
	r := newRig(t, `connections:
  stripe:
    authKind: api_token
    secrets: {apiKey: STRIPE_API_KEY}
    baseURL: `+rec.URL+`
`)
	return r, rec
}

func refunds(rec *stripemock.Recorder) int {
	n := 0
	for _, q := range rec.Requests() {
		if q.Method == "POST" && q.Path == "/v1/refunds" {
			n++
		}
	}
	return n
}

// startApprovalRun starts a run of testdata/approval.json and connects
// its external agent, which may call charge.refund, charge.get and
// customer.get.
func startApprovalRun(t *testing.T, r *rig) (string, *agent) {
	t.Helper()
	run, tok := approvalRunToken(t, r)
	a := r.connect(tok.MCPURL, tok.Token)
	a.tools(t, "charge__refund", "charge__get", "customer__get", serve.FinishTool)
	return run, a
}

// approvalRunToken starts a run of testdata/approval.json, waits until
// it waits for its agent, and issues an agent token of it.
func approvalRunToken(t *testing.T, r *rig) (string, serve.IssuedToken) {
	t.Helper()
	return r.startAgentRun(t, "approval.json", readTestdata(t, "approval.json"), nil)
}

// chargeReads counts the GET /v1/charges/ID requests Stripe received.
func chargeReads(rec *stripemock.Recorder, id string) int {
	n := 0
	for _, q := range rec.Requests() {
		if q.Method == "GET" && q.Path == "/v1/charges/"+id {
			n++
		}
	}
	return n
}

// TestAgentApproval: an external agent's call that needs approval waits
// for a person up to serve.approvalWait, then is answered "pending" with
// its approval id, and has not run; once approved, the same call asked
// again runs exactly once; asked again after that, it is a new call that
// needs its own approval. Other arguments are never run on the approval.
func TestAgentApproval(t *testing.T) {
	r, rec := approvalRig(t)
	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, "approval.json", readTestdata(t, "approval.json"), nil)
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	a := r.connect(tok.MCPURL, tok.Token)
	a.tools(t, "charge__refund", "charge__get", "customer__get", serve.FinishTool)
	args := map[string]any{"chargeId": "ch_duplicate", "reason": "duplicate"}

	start := time.Now()
	text, isErr := a.call(t, "charge__refund", args)
	if !isErr || !strings.Contains(text, "pending") || !strings.Contains(text, "apr_") {
		t.Fatalf("first ask: %q (isError %v)", text, isErr)
	}
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Fatalf("answered after %v; serve.approvalWait is 2s", d)
	}
	if n := refunds(rec); n != 0 {
		t.Fatalf("%d refunds before approval", n)
	}
	// Asked again while pending: the same approval, still not run.
	text2, _ := a.call(t, "charge__refund", args)
	id := approvalID(text)
	if approvalID(text2) != id {
		t.Fatalf("asked again: %q, want the same approval %s", text2, id)
	}
	pend, err := r.srv.Pending(ctx, run)
	if err != nil || len(pend) != 1 || pend[0].ID != id || !strings.Contains(string(pend[0].Arguments), "ch_duplicate") {
		t.Fatalf("pending: %+v %v", pend, err)
	}

	// Approved while the agent's call waits: that call runs, once.
	var wg sync.WaitGroup
	wg.Add(1)
	var got string
	var gotErr bool
	var progress atomic.Int32
	pc := mcp.NewClient(&mcp.Implementation{Name: "progress-agent", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
	})
	pcs, err := pc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: tok.MCPURL, HTTPClient: &http.Client{Transport: bearer{tok.Token, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pcs.Close()
	go func() {
		defer wg.Done()
		res, err := pcs.CallTool(ctx, &mcp.CallToolParams{Name: "charge__refund", Arguments: args, Meta: mcp.Meta{"progressToken": "p1"}})
		if err != nil {
			got, gotErr = err.Error(), true
			return
		}
		got, gotErr = res.Content[0].(*mcp.TextContent).Text, res.IsError
	}()
	time.Sleep(1200 * time.Millisecond)
	if _, err := r.srv.Decide(ctx, run, id, runtime.Verdict{Approve: true, By: "tester", Reason: "duplicate charge"}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if gotErr || !strings.Contains(got, "re_") {
		t.Fatalf("after approval: %q (error %v)", got, gotErr)
	}
	if n := refunds(rec); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
	if progress.Load() == 0 {
		t.Error("no progress notification while the call waited for approval")
	}
	// Asked again (the agent may have lost that answer): the recorded
	// answer, once; nothing runs.
	text, isErr = a.call(t, "charge__refund", args)
	if isErr || text != got {
		t.Fatalf("asked again after it ran: %q, want the recorded %q", text, got)
	}
	if n := refunds(rec); n != 1 {
		t.Fatalf("%d refunds after asking again, want 1", n)
	}
	// Then the same call is a new one: it waits for its own approval.
	text, isErr = a.call(t, "charge__refund", args)
	if !isErr || !strings.Contains(text, "pending") || approvalID(text) == id {
		t.Fatalf("a second refund: %q", text)
	}
	// Other arguments are another call: pending too, not run.
	text, isErr = a.call(t, "charge__refund", map[string]any{"chargeId": "ch_other", "reason": "duplicate"})
	if !isErr || !strings.Contains(text, "pending") {
		t.Fatalf("other arguments: %q", text)
	}
	if n := refunds(rec); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
	// Denied: refused with the reason.
	pend, _ = r.srv.Pending(ctx, run)
	for _, p := range pend {
		if _, err := r.srv.Decide(ctx, run, p.ID, runtime.Verdict{Approve: false, By: "tester", Reason: "no"}); err != nil {
			t.Fatal(err)
		}
	}
	text, isErr = a.call(t, "charge__refund", args)
	if !isErr || !strings.Contains(text, "denied") {
		t.Fatalf("after denial: %q", text)
	}
	if _, isErr := a.call(t, serve.FinishTool, map[string]any{"output": "refunded once"}); isErr {
		t.Fatal("finish failed")
	}
	r.waitStatus(run, "completed", "")
	if n := refunds(rec); n != 1 {
		t.Fatalf("%d refunds at the end, want 1", n)
	}
	au, err := r.srv.Audit(ctx, run, true)
	if err != nil || !*au.Verified {
		t.Fatalf("audit: %v %+v", err, au.Problems)
	}
}

func approvalID(text string) string {
	i := strings.Index(text, "apr_")
	if i < 0 || len(text) < i+20 {
		return ""
	}
	return text[i : i+20]
}
