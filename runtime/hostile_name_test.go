package runtime_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/runtime"
)

// TestSecretInToolNameResume: a secret value of the harness is part of
// an allowed tool's name (a short value: an account or database name), so
// the call rows store that name redacted. A side-effecting call to it is
// interrupted (the disk fills up after it was sent and stays full); on
// resume the agent asks it again, by its real name. It must not be sent
// again without a person's decision.
func TestSecretInToolNameResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, _ := stripeMock(t)
	ctr := startCtr(t, true)
	doc := buildDoc(t, "secret-name", agentStep("act", "ops", []string{"mcp.ctr.hang", "note.add"}, ""))
	f := &storeFaultRig{rig: newRig(t, rigConfig{stripe: url, http: map[string]string{"ctr": ctr.URL}, secrets: map[string]string{"STRIPE_API_KEY": "ctr.hang"}}, doc), ctr: ctr}
	var armed atomic.Bool
	ctr.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "tools/call" && !armed.Swap(true) {
				f.fails.Store(-1)
			}
			return res, err
		}
	})
	f.sqlite().SetCommitFault(func() error {
		if f.fails.Load() < 0 {
			return errDiskFull
		}
		return nil
	})
	tr := map[string]string{"ops": transcriptOf(map[string][]tcall{"act": {{"mcp.ctr.hang", map[string]any{"target": "alpha"}}}})}
	out, _ := f.engine(0, tr, nil, nil).Start(ctx, nil)
	f.free()
	for _, c := range f.calls(out.Run) {
		t.Logf("row: tool %q state %s", c.Tool, c.State)
	}
	var res runtime.Outcome
	res, err := f.engine(0, tr, nil, nil).Resume(ctx, out.Run)
	t.Logf("resume: %+v %v", res, err)
	if n := ctr.runs("hang"); n != 1 {
		t.Fatalf("hang ran %d times: the interrupted call was sent again without a person's decision", n)
	}
	wantOutcome(t, "resume", res, err, runtime.Waiting)
	f.mustDecide(out.Run, res.Waiting[0].ID, true)
	res, err = f.engine(0, tr, nil, nil).Resume(ctx, out.Run)
	wantOutcome(t, "resume after the approval", res, err, runtime.Completed)
	if n := ctr.runs("hang"); n != 2 {
		t.Fatalf("hang ran %d times, want 2 (once, once more as approved)", n)
	}
	if probs, err := runtime.Reconcile(ctx, f.st, out.Run); err != nil || len(probs) > 0 {
		t.Fatalf("reconcile: %v %v", probs, err)
	}
}
