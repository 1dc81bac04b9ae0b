package runtime

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/sqlite"
)

// verifiedAuditOf returns run's audit records once their chain verifies.
func verifiedAuditOf(t *testing.T, st store.Store, run string) []audit.Record {
	t.Helper()
	recs, err := st.Audit(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if probs := audit.Verify(recs, 0, ""); len(probs) > 0 {
		t.Fatalf("the chain does not verify: %v", probs)
	}
	return recs
}

// kindsOf are the kinds of recs of step, in order.
func kindsOf(recs []audit.Record, step string) string {
	var ks []string
	for _, r := range recs {
		if r.Step == step {
			ks = append(ks, r.Kind)
		}
	}
	return strings.Join(ks, " ")
}

// A step whose one call is a read commits its end with the call's record
// (and the next step's start), in one commit: a run of n such steps
// commits n+2 times (the run's creation, the first step's start, one per
// step end), where waiting for the read's commit first made it 2n+2. The
// store's writer waits a long time for more work while it holds only
// queued records, so nothing but the step's end makes them commit.
func TestStepEndsWithItsReadRecords(t *testing.T) {
	const n = 5
	st := openSQLite(t, filepath.Join(t.TempDir(), "store.db"), &sqlite.Options{QueueLinger: 2 * time.Second})
	var commits atomic.Int64
	st.SetCommitFault(func() error { commits.Add(1); return nil })
	sess := growthSession(t, st, "records.read", n, 1)
	out, err := sess.Start(context.Background(), nil)
	if err != nil || out.Status != Completed {
		t.Fatalf("run: %s %v %s", out.Status, err, out.Reason)
	}
	if got := commits.Load(); got != n+2 {
		t.Errorf("a run of %d one-read steps committed %d times, want %d (one per step end, with its read's record)", n, got, n+2)
	}
	ctx := context.Background()
	calls, err := st.Calls(ctx, out.Run, store.CallFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != n {
		t.Fatalf("%d calls recorded, want %d", len(calls), n)
	}
	for _, c := range calls {
		if c.State != store.CallSucceeded || c.Tool != "records.read" {
			t.Errorf("call %s/%d: %s %s, want records.read succeeded", c.Step, c.Index, c.Tool, c.State)
		}
	}
	steps, err := st.Steps(ctx, out.Run)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != n {
		t.Fatalf("%d step rows, want %d", len(steps), n)
	}
	for _, s := range steps {
		if s.Status != store.StepDone || string(s.Output) != `{"done":true}` {
			t.Errorf("step %s: %s %s, want done with its output", s.Step, s.Status, s.Output)
		}
	}
	recs := verifiedAuditOf(t, st, out.Run)
	for i := range n {
		want := "step.started call.started call.succeeded step.finished"
		if i == n-1 {
			want += " run.completed"
		}
		if got := kindsOf(recs, fmt.Sprintf("s%d", i)); got != want {
			t.Errorf("records of step s%d: %s, want %s", i, got, want)
		}
	}
}

// failQueue is a store whose queued functions fail, once armed, from
// the armed-th one on, as a store that cannot record a call would.
type failQueue struct {
	store.Store
	queued, from atomic.Int64
}

var errQueueInjected = errors.New("recording failed (injected)")

func (f *failQueue) Queue(ctx context.Context, fn func(store.Tx) error) store.Queued {
	n := f.queued.Add(1)
	return f.Store.Queue(ctx, func(tx store.Tx) error {
		if from := f.from.Load(); from > 0 && n >= from {
			return errQueueInjected
		}
		return fn(tx)
	})
}

// A step's end that shares its commit with the step's queued read
// record fails when that record fails (here in the same transaction on
// SQLite, whose writer waits for more queued work until the end comes;
// on PostgreSQL before it): the step and the run are failed, the step's
// end, the read's record and the next step are not in the store, and
// the chain verifies.
func TestStepFailsWhenItsQueuedRecordFails(t *testing.T) {
	var st store.Store
	if teststore.Postgres(t) {
		st = teststore.Open(t, "")
	} else {
		st = openSQLite(t, filepath.Join(t.TempDir(), "store.db"), &sqlite.Options{QueueLinger: 2 * time.Second})
	}
	f := &failQueue{Store: st}
	f.from.Store(2) // step s1's read
	sess := growthSession(t, f, "records.read", 3, 1)
	ctx := context.Background()
	out, err := sess.Start(ctx, nil)
	if out.Status != Failed || !strings.Contains(out.Reason, errQueueInjected.Error()) {
		t.Fatalf("run: %s %v %q, want failed with the record's failure", out.Status, err, out.Reason)
	}
	steps, err := st.Steps(ctx, out.Run)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range steps {
		got = append(got, s.Step+":"+string(s.Status))
	}
	if strings.Join(got, " ") != "s0:done s1:failed" {
		t.Errorf("steps %v, want s0 done and s1 failed (s2 never started)", got)
	}
	calls, err := st.Calls(ctx, out.Run, store.CallFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Step != "s0" {
		t.Errorf("calls %v, want only s0's", calls)
	}
	recs := verifiedAuditOf(t, st, out.Run)
	if got, want := kindsOf(recs, "s1"), "step.started step.failed run.failed"; got != want {
		t.Errorf("records of s1: %s, want %s", got, want)
	}
}

// countTx counts the audit appends of a transaction's function: calls of
// Append or AppendAll, with the kinds each appended.
type countTx struct {
	store.Tx
	appends *[][]string
}

func (t countTx) Append(r audit.Record) (audit.Record, error) {
	*t.appends = append(*t.appends, []string{r.Kind})
	return t.Tx.Append(r)
}

func (t countTx) AppendAll(rs ...audit.Record) ([]audit.Record, error) {
	var ks []string
	for _, r := range rs {
		ks = append(ks, r.Kind)
	}
	*t.appends = append(*t.appends, ks)
	return t.Tx.AppendAll(rs...)
}

// countAppends is a store that keeps, for each transaction of Tx, the
// appends its function made.
type countAppends struct {
	store.Store
	mu  sync.Mutex
	txs [][][]string
}

func (c *countAppends) Tx(ctx context.Context, fn func(store.Tx) error) error {
	var appends [][]string
	err := c.Store.Tx(ctx, func(tx store.Tx) error {
		appends = nil // a function run again starts over
		return fn(countTx{Tx: tx, appends: &appends})
	})
	if err == nil {
		c.mu.Lock()
		c.txs = append(c.txs, appends)
		c.mu.Unlock()
	}
	return err
}

// A step boundary (a step's end with the next step's start, or with the
// run's completion) appends its audit records with one AppendAll, so
// the run's audit head moves once; appendLater keeps their order.
func TestAppendLater(t *testing.T) {
	c := &countAppends{Store: teststore.Open(t, "")}
	sess := growthSession(t, c, "records.read", 3, 1)
	out, err := sess.Start(context.Background(), nil)
	if err != nil || out.Status != Completed {
		t.Fatalf("run: %s %v %s", out.Status, err, out.Reason)
	}
	var boundaries []string
	for _, tx := range c.txs {
		for _, ks := range tx {
			if ks[0] == "step.finished" {
				if len(tx) != 1 {
					t.Errorf("a step boundary appended %d times: %v", len(tx), tx)
				}
				boundaries = append(boundaries, strings.Join(ks, " "))
			}
		}
	}
	want := []string{"step.finished step.started", "step.finished step.started", "step.finished run.completed"}
	if fmt.Sprint(boundaries) != fmt.Sprint(want) {
		t.Errorf("step boundaries appended %q, want %q", boundaries, want)
	}
	recs := verifiedAuditOf(t, c.Store, out.Run)
	if last := recs[len(recs)-1]; last.Kind != "run.completed" || last.Seq != int64(len(recs)) {
		t.Errorf("last record %s seq %d of %d", last.Kind, last.Seq, len(recs))
	}
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

// openSQLite opens a SQLite store at path with o, closed when the test
// ends.
func openSQLite(t testing.TB, path string, o *sqlite.Options) *sqlite.Store {
	t.Helper()
	st, err := sqlite.OpenWith(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// growthSession opens a session on st of a document of n steps ("s0" to
// "s<n-1>", in a chain), each of whose agent makes calls calls of tool
// (records.read, a read tool, or records.write, a side-effecting one;
// both do nothing).
func growthSession(b testing.TB, st store.Store, tool string, n, calls int) *Session {
	b.Helper()
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
	return sess
}
