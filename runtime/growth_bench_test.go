//go:build unix

package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/storetest"
)

// BenchmarkStepsVsCalls measures what a step costs as the run grows: a
// run of n agent steps making one call each against a run of one step
// making the same n calls, interleaved in one benchmark (each round runs
// both), as process CPU (user + system, getrusage). It reports the CPU
// per call of each and their ratio ("steps/calls", target at most 2 at
// n=1000, BENCHMARKS.md), and the CPU per step ("µs/step"), whose ratio
// between n=1000 and n=100 is the second target (at most 1.25).
//
//	go test ./runtime -run '^$' -bench StepsVsCalls -benchtime 1x -count 2
func BenchmarkStepsVsCalls(b *testing.B) {
	for _, tool := range []string{"records.read", "records.write"} {
		for _, n := range []int{100, 1000} {
			b.Run(fmt.Sprintf("%s/%d", map[string]string{"records.read": "read", "records.write": "side-effecting"}[tool], n), func(b *testing.B) {
				stepsVsCalls(b, tool, n)
			})
		}
	}
}

func stepsVsCalls(b *testing.B, tool string, n int) {
	dir := b.TempDir()
	st := openSQLite(b, filepath.Join(dir, "steps.db"), nil)
	steps := growthSession(b, st, tool, n, 1)
	one := growthSession(b, openSQLite(b, filepath.Join(dir, "one.db"), nil), tool, 1, n)
	var tSteps, tOne time.Duration
	for b.Loop() {
		c0 := cpuTime()
		out, err := steps.Start(context.Background(), nil)
		c1 := cpuTime()
		if err != nil || out.Status != Completed {
			b.Fatalf("run %s: %v %s", out.Status, err, out.Reason)
		}
		out2, err := one.Start(context.Background(), nil)
		c2 := cpuTime()
		if err != nil || out2.Status != Completed {
			b.Fatalf("run %s: %v %s", out2.Status, err, out2.Reason)
		}
		tSteps += c1 - c0
		tOne += c2 - c1
		if calls, _ := st.Calls(context.Background(), out.Run, store.CallFilter{}); len(calls) != n {
			b.Fatalf("run %s recorded %d calls, want %d", out.Run, len(calls), n)
		}
	}
	per := float64(b.N * n)
	b.ReportMetric(float64(tSteps.Microseconds())/per, "µs/step")
	b.ReportMetric(float64(tOne.Microseconds())/per, "µs/call-in-one-step")
	b.ReportMetric(float64(tSteps)/float64(tOne), "steps/calls")
}

// cpuTime is the process's CPU time so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStepFloor measures the least a step costs while its start
// must be durable before its agent runs: one commit of a step's start
// (the step row and its step.started record, nothing else), against a
// read call in a run of one step of n read calls (whose records share
// commits), as process CPU, interleaved in each round. Its ratio
// ("floor/call") bounds what BenchmarkStepsVsCalls can reach for read
// calls: a step of one read call costs at least that commit and the
// call.
//
//	go test ./runtime -run '^$' -bench StepFloor -benchtime 1x -count 2
func BenchmarkStepFloor(b *testing.B) {
	const n = 1000
	dir := b.TempDir()
	st := openSQLite(b, filepath.Join(dir, "floor.db"), nil)
	run, _ := storetest.NewRun(b, st)
	s := &Session{opt: SessionOptions{Store: st, Redact: func(s string) string { return s }}}
	one := growthSession(b, openSQLite(b, filepath.Join(dir, "one.db"), nil), "records.read", 1, n)
	ctx := context.Background()
	var tFloor, tOne time.Duration
	for b.Loop() {
		c0 := cpuTime()
		for range n {
			if err := st.Tx(ctx, func(tx store.Tx) error {
				a, err := tx.StartStep(run, "work")
				if err != nil {
					return err
				}
				return s.append(tx, run, "work", "", StepStarted{Attempt: a})
			}); err != nil {
				b.Fatal(err)
			}
		}
		c1 := cpuTime()
		out, err := one.Start(ctx, nil)
		c2 := cpuTime()
		if err != nil || out.Status != Completed {
			b.Fatalf("run %s: %v %s", out.Status, err, out.Reason)
		}
		tFloor += c1 - c0
		tOne += c2 - c1
	}
	per := float64(b.N * n)
	b.ReportMetric(float64(tFloor.Microseconds())/per, "µs/commit")
	b.ReportMetric(float64(tOne.Microseconds())/per, "µs/call-in-one-step")
	b.ReportMetric(float64(tFloor)/float64(tOne), "floor/call")
}
