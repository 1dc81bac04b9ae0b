//go:build linux

package serve_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/serve"
)

// servedBy records the replica that answered each request it sends
// ([serve.ReplicaHeader]).
type servedBy struct {
	base http.RoundTripper
	mu   sync.Mutex
	by   map[string]int
}

func (s *servedBy) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(req)
	if err == nil {
		s.mu.Lock()
		s.by[resp.Header.Get(serve.ReplicaHeader)]++
		s.mu.Unlock()
	}
	return resp, err
}

func (s *servedBy) take() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	by := s.by
	s.by = map[string]int{}
	return by
}

// TestReplicasStatelessAgent: MCP clients of both kinds of revision reach
// a run through a replica that does not own it: one at 2025-11-25 gets a
// session opened at the owner (its id carries the owner's replica id),
// and every request of one at 2026-07-28, which has no session, is
// forwarded by the run to the owner and answered there. After the owner
// is killed, the same sessionless client, with nothing to re-initialize,
// goes on at the adopter: the call it already made is answered from the
// store (the crash server's count is unchanged) and a new one runs once.
func TestReplicasStatelessAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs; skipped with -short")
	}
	m := newMCPReplicas(t)
	count, db := m.count, m.db
	a, baseA, baseB, idA, idB := m.a, m.baseA, m.baseB, m.idA, m.idB
	run, tok := m.startRun(baseA)

	// 2025-11-25 through B: the session is A's.
	cs := connectAgent(t, baseB, run, tok)
	if !strings.HasPrefix(cs.ID(), idA+".") {
		t.Errorf("the session opened through B has id %q, want one of the owner A (%s)", cs.ID(), idA)
	}
	waitOffered(t, cs, "mcp__crash__append")
	cs.Close()

	// 2026-07-28 through B: every request answered by A.
	rec := &servedBy{base: bearer{tok, http.DefaultTransport}, by: map[string]int{}}
	c := mcp.NewClient(&mcp.Implementation{Name: "stateless-agent", Version: "1"}, nil)
	sl, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: baseB + "/mcp/runs/" + run, HTTPClient: &http.Client{Transport: rec}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	if v := sl.InitializeResult().ProtocolVersion; v != "2026-07-28" || sl.ID() != "" {
		t.Fatalf("the client negotiated %q with session %q, want 2026-07-28 without one", v, sl.ID())
	}
	waitOffered(t, sl, "mcp__crash__append")
	if text, isErr := callTool(t, sl, "mcp__crash__append", map[string]any{"id": "s1"}); isErr {
		t.Fatalf("append s1: %s", text)
	}
	if by := rec.take(); by[idA] == 0 || len(by) != 1 {
		t.Errorf("the sessionless requests through B were answered by %v, want all by A (%s)", by, idA)
	}
	waitRecorded(t, baseB, run, "call.succeeded")
	_ = a.cmd.Process.Kill()
	<-a.done

	// The same client goes on at B once B has adopted the run (until
	// then, B forwards to A and answers 502: try again).
	var owner string
	for deadline := time.Now().Add(20 * time.Second); owner != idB; time.Sleep(50 * time.Millisecond) {
		if err := db.QueryRow(context.Background(), `SELECT owner FROM runs WHERE id = $1`, run).Scan(&owner); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run's owner is %q 20 s after A died, want B (%s)", owner, idB)
		}
	}
	rec.take()
	waitOffered(t, sl, "mcp__crash__append")
	if text, isErr := callTool(t, sl, "mcp__crash__append", map[string]any{"id": "s1"}); isErr {
		t.Fatalf("append s1 again at the adopter: %s", text)
	}
	if text, isErr := callTool(t, sl, "mcp__crash__append", map[string]any{"id": "s2"}); isErr {
		t.Fatalf("append s2: %s", text)
	}
	if got := lines(t, count); got["s1"] != 1 || got["s2"] != 1 {
		t.Errorf("the crash server ran %v, want s1 and s2 once each", got)
	}
	if by := rec.take(); by[idB] == 0 || len(by) != 1 {
		t.Errorf("after B adopted the run the requests were answered by %v, want all by B (%s)", by, idB)
	}
}
