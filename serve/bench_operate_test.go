package serve_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/serve"
)

// TestBenchmarkOperate measures what logs, traces and metrics cost on the
// call path: an MCP client calls the built-in customer.get through the
// gateway (serve/testdata/lookup.json's one step), one call at a time,
// under three servers started side by side: without obs ("off"), with
// logs at info level, and with logs, traces exported to Jaeger and
// Prometheus metrics. Rounds interleave (OPENPLAYBOOK_BENCH_ROUNDS, 9,
// after one to warm up; OPENPLAYBOOK_BENCH_CALLS calls each, 400); the
// median of each round's ratio to "off" is printed.
// A benchmark, so it runs only with OPENPLAYBOOK_BENCH_OPERATE=1 (it
// needs Jaeger; OPENPLAYBOOK_BENCH_NO_JAEGER=1 measures the first two
// only; BENCHMARKS.md, "Issue 23"):
//
//	OPENPLAYBOOK_BENCH_OPERATE=1 go test ./serve -run TestBenchmarkOperate -v
func TestBenchmarkOperate(t *testing.T) {
	if os.Getenv("OPENPLAYBOOK_BENCH_OPERATE") == "" {
		t.Skip("a benchmark: set OPENPLAYBOOK_BENCH_OPERATE=1")
	}
	configs := []struct {
		name string
		opt  opsOpt
	}{
		{"off", opsOpt{plain: true, level: "info"}},
		{"logs at info", opsOpt{level: "info"}},
	}
	if os.Getenv("OPENPLAYBOOK_BENCH_NO_JAEGER") == "" {
		otlp, _ := startJaeger(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp)
		configs = append(configs, struct {
			name string
			opt  opsOpt
		}{"logs + traces to Jaeger + metrics", opsOpt{level: "info", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "prometheus", "OTEL_SERVICE_NAME": "openplaybook-bench"}}})
	}
	ctx := context.Background()
	sessions := make([]*mcp.ClientSession, len(configs))
	for i, c := range configs {
		c.opt.extra = "runtime:\n  maxToolCalls: 100000000\n"
		r := newOpsRigOpt(t, c.opt)
		run, ds, err := r.srv.CreateRun(ctx, "lookup.json", readTestdata(t, "lookup.json"), []byte(`{"customerId":"cus_ada"}`))
		if err != nil {
			t.Fatalf("create: %v %v", err, ds)
		}
		r.waitStatus(run, "waiting", "agent")
		tok, err := r.srv.IssueAgentToken(ctx, run, "", "bench")
		if err != nil {
			t.Fatal(err)
		}
		a := r.connect(tok.MCPURL, tok.Token)
		a.tools(t, "customer__get", serve.FinishTool)
		sessions[i] = a.cs
	}
	// Rounds: one to warm up, not counted, then OPENPLAYBOOK_BENCH_ROUNDS
	// (9 unless set); the order of the servers is reversed every other
	// round, so that none always follows the same one.
	rounds := 9
	if v, err := strconv.Atoi(os.Getenv("OPENPLAYBOOK_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	callsPerRound := 400
	if v, err := strconv.Atoi(os.Getenv("OPENPLAYBOOK_BENCH_CALLS")); err == nil && v > 0 {
		callsPerRound = v
	}
	ns := make([][]float64, len(configs))
	for round := -1; round < rounds; round++ {
		order := make([]int, len(configs))
		for i := range order {
			order[i] = i
		}
		if round%2 != 0 {
			slices.Reverse(order)
		}
		for _, i := range order {
			cs := sessions[i]
			t0 := time.Now()
			for range callsPerRound {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "customer__get", Arguments: map[string]any{"customerId": "cus_ada"}})
				if err != nil || res.IsError {
					t.Fatalf("call: %v %+v", err, res)
				}
			}
			if round >= 0 {
				ns[i] = append(ns[i], float64(time.Since(t0).Nanoseconds())/float64(callsPerRound))
			}
		}
	}
	med := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		if len(s)%2 == 0 {
			return (s[len(s)/2-1] + s[len(s)/2]) / 2
		}
		return s[len(s)/2]
	}
	base := med(ns[0])
	for i, c := range configs {
		// The ratio within each round (the same minute's load on both
		// sides), and the median of those: what BENCHMARKS.md reports.
		var rs []float64
		for j := range ns[i] {
			rs = append(rs, ns[i][j]/ns[0][j])
		}
		t.Logf("%-36s median %8.0f µs/call  ratio vs off: median of rounds %.3f, of medians %.3f  (rounds µs: %v)", c.name, med(ns[i])/1000, med(rs), med(ns[i])/base, fmtRounds(ns[i]))
	}
}

func fmtRounds(xs []float64) string {
	s := ""
	for _, x := range xs {
		s += fmt.Sprintf("%.0f ", x/1000)
	}
	return s
}
