package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/internal/rawcommit"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/sqlite"
)

// BenchmarkCallsVsRawCommit measures audited calls through the whole
// call path against the raw commit rate of the same disk, interleaved in
// one benchmark so that the disk's changing fsync rate hits both alike.
// Each round makes 200 bare SQLite commits (one tiny INSERT per
// transaction, WAL, synchronous=FULL, the peer the targets name) and then
// a run of one agent step making 200 calls to a tool that does nothing
// (so what is measured is the runtime and the store): a read tool
// ("read") or a side-effecting one ("side-effecting"). It reports calls/s,
// raw commits/s and their ratio (targets, BENCHMARKS.md: read at least
// 0.7, side-effecting at least 0.45).
//
//	go test ./runtime -run '^$' -bench CallsVsRawCommit -benchtime 10x -count 3
func BenchmarkCallsVsRawCommit(b *testing.B) {
	for _, tool := range []string{"records.read", "records.write"} {
		name := map[string]string{"records.read": "read", "records.write": "side-effecting"}[tool]
		b.Run(name, func(b *testing.B) {
			const per = 200
			dir := b.TempDir()
			raw := openRaw(b, filepath.Join(dir, "raw.db"))
			sess, st := ratioSession(b, filepath.Join(dir, "store.db"))
			ctx := context.WithValue(context.Background(), ratioKey{}, ratioCall{tool, per})
			var tRaw, tRun time.Duration
			for b.Loop() {
				t0 := time.Now()
				raw(per)
				t1 := time.Now()
				out, err := sess.Start(ctx, nil)
				tRun += time.Since(t1)
				tRaw += t1.Sub(t0)
				if err != nil || out.Status != Completed {
					b.Fatalf("run %s: %v %s", out.Status, err, out.Reason)
				}
				if calls, _ := st.Calls(context.Background(), out.Run, store.CallFilter{}); len(calls) != per {
					b.Fatalf("run %s recorded %d calls, want %d", out.Run, len(calls), per)
				}
			}
			n := float64(b.N * per)
			calls, commits := n/tRun.Seconds(), n/tRaw.Seconds()
			b.ReportMetric(calls, "calls/s")
			b.ReportMetric(commits, "raw-commits/s")
			b.ReportMetric(calls/commits, "ratio")
		})
	}
}

// openRaw returns what makes n bare commits on a new database at path.
func openRaw(b *testing.B, path string) func(n int) {
	db, err := rawcommit.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return func(n int) {
		if err := db.Commit(n); err != nil {
			b.Fatal(err)
		}
	}
}

type ratioKey struct{}

type ratioCall struct {
	tool string
	n    int
}

// ratioDriver makes the calls its context says.
type ratioDriver struct{}

func (ratioDriver) RunStep(ctx context.Context, in driver.StepInput, c driver.Caller) (jsontext.Value, error) {
	rc := ctx.Value(ratioKey{}).(ratioCall)
	for i := range rc.n {
		r, err := c.Call(ctx, driver.Call{Name: rc.tool, Arguments: jsontext.Value(fmt.Sprintf(`{"i":%d}`, i))})
		if err != nil {
			return nil, err
		}
		if r.Error != "" {
			return nil, fmt.Errorf("call %d: %s", i, r.Error)
		}
	}
	return jsontext.Value(`"done"`), nil
}

// nop is a tool that does nothing.
type nop struct{}

func (nop) Call(context.Context, jsontext.Value) (registry.Result, error) {
	return registry.Result{Content: jsontext.Value(`{"ok":true}`)}, nil
}

func ratioSession(b *testing.B, path string) (*Session, store.Store) {
	st, err := sqlite.OpenWith(path, &sqlite.Options{Synchronous: "FULL"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	src := []byte(`{"openplaybook": "1.6",
 "manifest": {"id": "ratio", "name": "Ratio", "version": "1.0.0", "description": "Calls tools that do nothing.", "requiredConnectors": []},
 "requires": {"connections": [], "mcpServers": [], "secrets": []},
 "tools": [
  {"name": "records.read", "source": "primitive", "description": "Does nothing.", "permissions": [],
   "inputSchema": {"type": "object", "properties": {"i": {"type": "integer"}}}, "outputSchema": {"type": "object"},
   "riskClass": "read", "sideEffecting": false, "requiresApproval": false},
  {"name": "records.write", "source": "primitive", "description": "Does nothing, as a side effect.", "permissions": [],
   "inputSchema": {"type": "object", "properties": {"i": {"type": "integer"}}}, "outputSchema": {"type": "object"},
   "riskClass": "internal", "sideEffecting": true, "requiresApproval": false, "dataScopeWrites": ["records"]}],
 "steps": [{"id": "work", "kind": "agent", "agent": "bench", "purpose": "Call the tools.", "allowedTools": ["records.read", "records.write"]}]}`)
	doc, _ := playbook.Read("ratio.json", src, nil)
	reg := registry.New()
	for _, t := range doc.Tools {
		if err := reg.Add(t.Definition(src), registry.Origin{Kind: registry.Builtin}, nop{}); err != nil {
			b.Fatal(err)
		}
	}
	sess, ds, err := Open(context.Background(), SessionOptions{Document: doc, Registry: reg, Store: st, MaxToolCalls: 1 << 20,
		Driver: func(string) (driver.Driver, error) { return ratioDriver{}, nil }})
	if err != nil {
		b.Fatalf("%v %v", err, ds)
	}
	return sess, st
}
