//go:build linux

package serve_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// unadoptedAfterKill starts a run at replica A that runs (its agent made
// a call), locks the run's row in a transaction it returns (Adopt skips
// locked rows: no replica adopts the run while it is open) and kills A.
func unadoptedAfterKill(t *testing.T) (m *mcpReplicas, run, token string, tx pgx.Tx) {
	t.Helper()
	m = newMCPReplicas(t)
	run, token = m.startRun(m.baseA)
	cs := connectAgent(t, m.baseA, run, token)
	if text, isErr := callTool(t, cs, "mcp__crash__append", map[string]any{"id": "before"}); isErr {
		t.Fatalf("append before the kill: %s", text)
	}
	waitRecorded(t, m.baseA, run, "call.succeeded")
	ctx := context.Background()
	tx, err := m.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	var status, owner string
	if err := tx.QueryRow(ctx, `SELECT status, owner FROM runs WHERE id = $1 FOR UPDATE`, run).Scan(&status, &owner); err != nil {
		t.Fatal(err)
	}
	if status != "running" || owner != m.idA {
		t.Fatalf("run %s is %s under %q; want running under A (%s)", run, status, owner, m.idA)
	}
	_ = m.a.cmd.Process.Kill()
	<-m.a.done
	return m, run, token, tx
}

// TestAttackReplicasAnonymousNotHeld: a request without any credential
// for the MCP URL of a run whose owner (replica A) was killed, sent
// through replica B before any replica adopted the run, is answered 401
// at once. It is not held for the adoption (three rounds, 3 s, reading
// the run's owner from PostgreSQL every 100 ms): that wait runs before
// authentication, so anyone who knows a run's id could hold a
// connection and some thirty queries of B per request while a failover
// lasts. The run's row is locked here for the test's length, so no
// replica adopts it (Adopt skips locked rows) and a held request would
// wait all three rounds.
func TestAttackReplicasAnonymousNotHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs; skipped with -short")
	}
	m, run, _, tx := unadoptedAfterKill(t)
	ctx := context.Background()
	var owner string
	// Well under the three rounds a held request waits; a 401 takes
	// milliseconds.
	client := &http.Client{Timeout: 2 * time.Second}
	killed := time.Now()
	for {
		req, _ := http.NewRequest("POST", m.baseB+"/mcp/runs/"+run, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("anonymous request through B while run %s's owner is dead and not adopted: %v (held for the adoption)", run, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// Until PostgreSQL has seen A's connections close, A's liveness
		// lock is held and B forwards to A: 502.
		if resp.StatusCode == http.StatusBadGateway && time.Since(killed) < 5*time.Second {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("anonymous request through B: %d %s; want 401", resp.StatusCode, body)
		}
		break
	}
	if err := tx.QueryRow(ctx, `SELECT owner FROM runs WHERE id = $1`, run).Scan(&owner); err != nil || owner != m.idA {
		t.Fatalf("run %s's owner is %q (%v); want A's (%s): the test's lock should have kept it from being adopted", run, owner, err, m.idA)
	}
}

// TestAttackReplicasAgentWaitsShareReads: forty concurrent requests of a
// run's agent (a valid token) through replica B, while the run's owner
// is dead and the run not adopted, cost B's PostgreSQL far fewer than
// forty times the transactions of one (at most half): waiting for the adoption, each request
// reads the run's owner every 100 ms for three rounds (some thirty
// queries), so an agent with its token multiplies B's load on
// PostgreSQL by the requests it holds open, and keeps doing so for as
// long as no replica can adopt the run (here, the run's row is locked;
// in production, every survivor at --max-adopt). Counted as the
// transactions PostgreSQL committed (pg_stat_database, flushed by every
// backend within ten seconds), less those of an idle window as long.
// Without sharing, forty cost forty times one (measured 1628 beyond an
// idle window's); sharing one reading, about ten a request more.
func TestAttackReplicasAgentWaitsShareReads(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs; skipped with -short")
	}
	m, run, tok, tx := unadoptedAfterKill(t)
	ctx := context.Background()
	list := func() int {
		req, _ := http.NewRequest("POST", m.baseB+"/mcp/runs/"+run, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for killed := time.Now(); list() == http.StatusBadGateway && time.Since(killed) < 5*time.Second; {
		time.Sleep(20 * time.Millisecond) // A's liveness lock not released yet
	}
	commits := func() int64 {
		time.Sleep(11 * time.Second) // every backend flushes its counts
		var n int64
		if _, err := tx.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	c0 := commits()
	idle := commits() - c0
	// held sends n concurrent requests and returns the transactions
	// PostgreSQL committed meanwhile beyond an idle window's.
	held := func(n int) int64 {
		c := commits()
		done := make(chan int, n)
		for range n {
			go func() { done <- list() }()
		}
		for range n {
			<-done
		}
		return commits() - c - idle
	}
	one := held(1)
	const n = 40
	many := held(n)
	t.Logf("PostgreSQL committed %d transactions in an idle window; beyond it, %d for one agent request held for the adoption, %d for %d at once", idle, one, many, n)
	if many > n*one/2 {
		t.Errorf("%d agent requests held for the adoption at once cost %d transactions, %d as many as one (%d); want them to share their reads of the run's owner (at most half as many as %d requests each on its own)", n, many, many/max(one, 1), one, n)
	}
}
