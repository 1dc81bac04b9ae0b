//go:build linux

package serve_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReplicasCallRightAfterKill: a sessionless (2026-07-28) agent whose
// run's owner is killed sends its next tools/call at once, through the
// survivor, without listing the tools again. Until the survivor adopts
// the run no replica executes it, and just after, the adopter is still
// resuming it: the call must wait for the step there and run, not be
// answered "no step of the run is waiting for this agent" (the crash
// server's count says it ran once, as the call before it did).
func TestReplicasCallRightAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs; skipped with -short")
	}
	for round := range 2 {
		m := newMCPReplicas(t)
		run, tok := m.startRun(m.baseA)
		c := mcp.NewClient(&mcp.Implementation{Name: "stateless-agent", Version: "1"}, nil)
		sl, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: m.baseB + "/mcp/runs/" + run,
			HTTPClient: &http.Client{Transport: bearer{tok, http.DefaultTransport}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitOffered(t, sl, "mcp__crash__append")
		if text, isErr := callTool(t, sl, "mcp__crash__append", map[string]any{"id": "before"}); isErr {
			t.Fatalf("round %d: append before the kill: %s", round, text)
		}
		// Its outcome is durable (it may share the next call's commit,
		// docs/store.md; lost, it would be outcome-unknown).
		waitRecorded(t, m.baseB, run, "call.succeeded")
		_ = m.a.cmd.Process.Kill()
		<-m.a.done
		// Until PostgreSQL has seen A's connections close (a few
		// milliseconds), A's liveness lock is held, B forwards to A and
		// answers 502, which nothing ran for: the client tries again, as
		// docs/serve.md says. Any answer is the call's.
		var res *mcp.CallToolResult
		killed, tries := time.Now(), 0
		for {
			tries++
			res, err = sl.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcp__crash__append", Arguments: map[string]any{"id": "after"}})
			if err == nil {
				break
			}
			if !strings.Contains(err.Error(), "Bad Gateway") || time.Since(killed) > 5*time.Second {
				t.Fatalf("round %d: the first call after the owner was killed: %v (%d tries)", round, err, tries)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("round %d: answered %s after the kill, at try %d", round, time.Since(killed).Round(time.Millisecond), tries)
		if res.IsError {
			t.Fatalf("round %d: the first call after the owner was killed was answered as an error: %v", round, res.Content[0].(*mcp.TextContent).Text)
		}
		if got := lines(t, m.count); got["before"] != 1 || got["after"] != 1 {
			t.Fatalf("round %d: the crash server ran %v, want before and after once each", round, got)
		}
		sl.Close()
		m.b.stop()
	}
}
