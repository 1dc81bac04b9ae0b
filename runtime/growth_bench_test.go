//go:build unix

package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/sqlite"
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
	steps, st := growthSession(b, filepath.Join(dir, "steps.db"), tool, n, 1)
	one, _ := growthSession(b, filepath.Join(dir, "one.db"), tool, 1, n)
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

// growthDriver makes calls calls of tool, each with an argument of its
// own.
type growthDriver struct {
	tool  string
	calls int
}

func (d growthDriver) RunStep(ctx context.Context, in driver.StepInput, c driver.Caller) (jsontext.Value, error) {
	for i := range d.calls {
		r, err := c.Call(ctx, driver.Call{Name: d.tool, Arguments: jsontext.Value(fmt.Sprintf(`{"i":%d}`, i))})
		if err != nil {
			return nil, err
		}
		if r.Error != "" {
			return nil, fmt.Errorf("call %d: %s", i, r.Error)
		}
	}
	return jsontext.Value(`{"done":true}`), nil
}

// growthSession opens a session of a document of n steps ("s0" to
// "s<n-1>", in a chain), each of whose agent makes calls calls of tool
// (records.read, a read tool, or records.write, a side-effecting one;
// both do nothing).
func growthSession(b *testing.B, path, tool string, n, calls int) (*Session, store.Store) {
	st, err := sqlite.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	var steps []string
	for i := range n {
		next := ""
		if i+1 < n {
			next = fmt.Sprintf(`, "next": "s%d"`, i+1)
		}
		steps = append(steps, fmt.Sprintf(`{"id": "s%d", "kind": "agent", "agent": "bench", "purpose": "Call the tool.", "allowedTools": [%q]%s}`, i, tool, next))
	}
	src := []byte(`{"openplaybook": "1.6",
 "manifest": {"id": "growth", "name": "Growth", "version": "1.0.0", "description": "Calls a tool that does nothing.", "requiredConnectors": []},
 "requires": {"connections": [], "mcpServers": [], "secrets": []},
 "tools": [
  {"name": "records.read", "source": "primitive", "description": "Does nothing.", "permissions": [],
   "inputSchema": {"type": "object", "properties": {"i": {"type": "integer"}}}, "outputSchema": {"type": "object"},
   "riskClass": "read", "sideEffecting": false, "requiresApproval": false},
  {"name": "records.write", "source": "primitive", "description": "Does nothing, as a side effect.", "permissions": [],
   "inputSchema": {"type": "object", "properties": {"i": {"type": "integer"}}}, "outputSchema": {"type": "object"},
   "riskClass": "internal", "sideEffecting": true, "requiresApproval": false, "dataScopeWrites": ["records"]}],
 "steps": [` + strings.Join(steps, ",\n") + `]}`)
	doc, ds := playbook.Read("growth.json", src, nil)
	if doc == nil {
		b.Fatal(ds)
	}
	reg := registry.New()
	for _, t := range doc.Tools {
		if err := reg.Add(t.Definition(src), registry.Origin{Kind: registry.Builtin}, nop{}); err != nil {
			b.Fatal(err)
		}
	}
	sess, ds, err := Open(context.Background(), SessionOptions{Document: doc, Registry: reg, Store: st, MaxToolCalls: 1 << 20,
		Driver: func(string) (driver.Driver, error) { return growthDriver{tool, calls}, nil }})
	if err != nil {
		b.Fatalf("%v %v", err, ds)
	}
	return sess, st
}
