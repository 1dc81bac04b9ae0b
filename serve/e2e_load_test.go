package serve_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/serve"
	"github.com/openplaybook/openplaybook/store"
)

// loadSessions is how many MCP sessions TestLoad keeps busy at once.
const loadSessions = 100

// loadDuration is how long TestLoad makes calls: $OPENPLAYBOOK_LOAD (a Go
// duration, such as 60s) for the full test, else 3 s.
func loadDuration(t *testing.T) time.Duration {
	v := os.Getenv("OPENPLAYBOOK_LOAD")
	if v == "" {
		return 3 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("OPENPLAYBOOK_LOAD=%q: want a duration such as 60s", v)
	}
	return d
}

// TestLoad: 100 concurrent MCP sessions (go-sdk clients over streamable
// HTTP) are the agent of one run's step and call its customer.get for the
// duration, each as fast as it is answered. No call may fail, and none
// may be lost: the calls answered equal the step's call records in the
// store and the audit records of those calls, and the audit chain
// verifies. -short skips it; OPENPLAYBOOK_LOAD=60s runs the full version
// (BENCHMARKS.md, round 4).
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the load test")
	}
	dur := loadDuration(t)
	r := newRig(t, "runtime:\n  maxToolCalls: 100000000\n")
	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, "lookup.json", readTestdata(t, "lookup.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "load")
	if err != nil {
		t.Fatal(err)
	}
	// One connection pool for all sessions, large enough that calls reuse
	// connections instead of opening one each.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4 * loadSessions
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: bearer{tok.Token, tr}}

	sessions := make([]*mcp.ClientSession, loadSessions)
	var wg sync.WaitGroup
	connErr := make(chan error, loadSessions)
	for i := range sessions {
		wg.Go(func() {
			c := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("load-%d", i), Version: "1"}, nil)
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: tok.MCPURL, HTTPClient: hc}, nil)
			if err != nil {
				connErr <- err
				return
			}
			sessions[i] = cs
		})
	}
	wg.Wait()
	close(connErr)
	for err := range connErr {
		t.Fatalf("connecting: %v", err)
	}
	defer func() {
		for _, cs := range sessions {
			cs.Close()
		}
	}()
	// Every session is offered the step's tools.
	want := []string{"customer__get", serve.FinishTool}
	(&agent{cs: sessions[0], changed: make(chan struct{})}).tools(t, want...)
	listErr := make(chan string, loadSessions)
	for i, cs := range sessions {
		wg.Go(func() {
			res, err := cs.ListTools(ctx, nil)
			if err != nil {
				listErr <- err.Error()
				return
			}
			var got []string
			for _, tl := range res.Tools {
				got = append(got, tl.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				listErr <- fmt.Sprintf("session %d is offered %v, want %v", i, got, want)
			}
		})
	}
	wg.Wait()
	close(listErr)
	for msg := range listErr {
		t.Fatal(msg)
	}

	var answered, failed atomic.Int64
	var mu sync.Mutex
	var firstErr string
	lat := make([][]time.Duration, loadSessions)
	stop := time.Now().Add(dur)
	args := map[string]any{"customerId": "cus_ada"}
	for i, cs := range sessions {
		wg.Go(func() {
			for time.Now().Before(stop) {
				t0 := time.Now()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "customer__get", Arguments: args})
				lat[i] = append(lat[i], time.Since(t0))
				msg := ""
				switch {
				case err != nil:
					msg = err.Error()
				case res.IsError || len(res.Content) == 0:
					msg = fmt.Sprintf("isError %v: %v", res.IsError, res.Content)
				default:
					if tc, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(tc.Text, "Ada Lovelace") {
						msg = fmt.Sprintf("unexpected result %v", res.Content)
					}
				}
				if msg == "" {
					answered.Add(1)
					continue
				}
				failed.Add(1)
				mu.Lock()
				if firstErr == "" {
					firstErr = msg
				}
				mu.Unlock()
				return
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d calls failed; the first: %s", n, firstErr)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	n := answered.Load()
	t.Logf("%d sessions, %v: %d calls answered, %.0f calls/s; latency p50 %v, p99 %v, max %v",
		loadSessions, dur, n, float64(n)/dur.Seconds(), all[len(all)/2], all[len(all)*99/100], all[len(all)-1])

	// The step ends, so everything queued for the store is committed.
	if res, err := sessions[0].CallTool(ctx, &mcp.CallToolParams{Name: serve.FinishTool, Arguments: map[string]any{"output": "done"}}); err != nil || res.IsError {
		t.Fatalf("finish: %v %v", err, res)
	}
	r.waitStatus(run, "completed", "")

	calls, err := r.st.Calls(ctx, run, store.CallFilter{Step: "lookup"})
	if err != nil {
		t.Fatal(err)
	}
	states := map[store.CallState]int{}
	for _, c := range calls {
		states[c.State]++
	}
	au, err := r.srv.Audit(ctx, run, true)
	if err != nil {
		t.Fatal(err)
	}
	if au.Verified == nil || !*au.Verified {
		t.Fatalf("the audit chain does not verify: %+v", au.Problems)
	}
	kinds := map[string]int{}
	for _, rec := range au.Records {
		if rec.Step == "lookup" && strings.HasPrefix(rec.Kind, "call.") {
			kinds[rec.Kind]++
		}
	}
	if int64(len(calls)) != n || int64(states[store.CallSucceeded]) != n || int64(kinds["call.succeeded"]) != n {
		t.Fatalf("%d calls answered; the store has %d calls of the step (%v), the audit %v", n, len(calls), states, kinds)
	}
	// One token's sessions are recorded once per step attempt (and once
	// before the step, while the first sessions resume the run).
	if attached := countKind(au, "agent.attached"); attached < 1 || attached > 2 {
		t.Errorf("%d agent.attached records for %d sessions of one token, want 1 or 2", attached, loadSessions)
	}
}

func countKind(au serve.AuditResult, kind string) int {
	n := 0
	for _, rec := range au.Records {
		if rec.Kind == kind {
			n++
		}
	}
	return n
}
