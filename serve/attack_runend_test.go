package serve_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/serve"
	"github.com/openplaybook/openplaybook/store"
)

// TestAttackSessionsEndWithRun: the sessions of a run end when the run
// ends (here: cancelled): over HTTP they are closed and detached, and a
// request naming one (a DELETE too) is answered 404 saying the run
// ended, not 401; over stdio the server returns. Another run's session
// stays.
func TestAttackSessionsEndWithRun(t *testing.T) {
	r := newRig(t, "")
	ctx := context.Background()
	run, tok, a := startAgentRun(t, r)
	second := r.connect(tok.MCPURL, tok.Token)
	second.tools(t, "customer__get", "note__add", serve.FinishTool)
	srun, stok := waitingRun(t, r)
	sin, sout, stdioDone := stdioServer(t, r, srun, stok.Token)
	sbr := bufio.NewReader(sout)
	stdioInit(t, sin, sbr)
	other, _, otherAgent := startAgentRun(t, r)
	if n := r.srv.Exchange().Attached(run); n != 2 {
		t.Fatalf("%d sessions attached, want 2", n)
	}

	if err := r.srv.CancelRun(ctx, run, "tester", "test"); err != nil {
		t.Fatal(err)
	}
	r.waitStatus(run, "failed", "")
	// The stdio server executes its run; the agent finishes its first
	// step, and the run waits at its gate.
	finish := `{"jsonrpc":"2.0","id":"f","method":"tools/call","params":{"name":"openplaybook_finish_step","arguments":{"output":"x"}}}`
	if got := stdioCall(t, sin, sbr, finish); len(got) != 1 || strings.Contains(got[0], `"isError":true`) {
		t.Fatalf("finishing the stdio run's first step: %q", got)
	}
	waitUntil(t, "the stdio run reaches its gate", func() bool {
		rs, err := r.srv.Run(ctx, srun)
		return err == nil && len(rs.Waiting) > 0 && rs.Waiting[0].Kind == "gate"
	})
	stdioDrain(sbr) // the notifications that follow
	// Cancelled by another process (here: the other server), so the
	// stdio server learns of it by looking. The stdio server may still
	// hold the run's lock for a moment after the gate is recorded: cancel
	// refuses then (ErrRunBusy), and is asked again until it is let in.
	waitUntil(t, "the stdio run is cancelled from here", func() bool {
		err := r.srv.CancelRun(ctx, srun, "tester", "test")
		if err != nil && !errors.Is(err, store.ErrRunBusy) {
			t.Fatal(err)
		}
		return err == nil
	})
	waitUntil(t, "the run's sessions detach", func() bool { return r.srv.Exchange().Attached(run) == 0 })
	waitUntil(t, "the stdio server returns", func() bool {
		select {
		case err := <-stdioDone:
			if err != nil {
				t.Errorf("the stdio server returned %v", err)
			}
			return true
		default:
			return false
		}
	})
	for _, m := range []string{http.MethodDelete, http.MethodGet, http.MethodPost} {
		req, _ := http.NewRequest(m, tok.MCPURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		req.Header.Set("Mcp-Session-Id", a.cs.ID())
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "has ended") {
			t.Errorf("BROKEN: %s of a session of the ended run: %d %s; want 404 saying the run has ended", m, resp.StatusCode, b)
		}
	}
	if status, body := post(t, tok.MCPURL, tok.Token, "", []byte(initBody), nil); status != http.StatusUnauthorized || !strings.Contains(body, "has ended") {
		t.Errorf("a new session of the ended run: %d %s; want 401 saying the run has ended", status, body)
	}
	// The other run's session is untouched.
	if n := r.srv.Exchange().Attached(other); n != 1 {
		t.Errorf("the other run has %d sessions attached, want 1", n)
	}
	if _, isErr := otherAgent.call(t, "customer__get", map[string]any{"customerId": "cus_ada"}); isErr {
		t.Error("the other run's session broke")
	}
}

// waitUntil waits until cond holds, failing after 20 s (a hang guard,
// not a measure of speed).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("BROKEN: %s: not after 20 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
