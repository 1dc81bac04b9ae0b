package runtime

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/storetest"
)

// groupRig is a Caller on a real store whose writer a test can hold up
// (a Tx that waits), so that read calls queue behind it.
type groupRig struct {
	st      store.Store
	c       *Caller
	release chan struct{}
	held    chan error
}

func newGroupRig(t *testing.T) *groupRig {
	t.Helper()
	st := teststore.Open(t, "")
	run, attempt := storetest.NewRun(t, st)
	s := &Session{opt: SessionOptions{Store: st, Redact: func(s string) string { return s }}}
	return &groupRig{st: st, c: &Caller{s: s, run: run, step: "work", attempt: attempt}}
}

// hold makes the writer wait, inside a Tx running fn, until resume.
func (g *groupRig) hold(t *testing.T, fn func(store.Tx) error) {
	t.Helper()
	g.release, g.held = make(chan struct{}), make(chan error, 1)
	started := make(chan struct{})
	go func() {
		g.held <- g.st.Tx(context.Background(), func(tx store.Tx) error {
			close(started)
			<-g.release
			return fn(tx)
		})
	}()
	<-started
}

func (g *groupRig) resume(t *testing.T) {
	t.Helper()
	close(g.release)
	if err := <-g.held; err != nil {
		t.Fatal(err)
	}
}

// verifiedAudit returns the run's audit records once their chain
// verifies.
func (g *groupRig) verifiedAudit(t *testing.T) []audit.Record {
	t.Helper()
	return verifiedAuditOf(t, g.st, g.c.run)
}

func (g *groupRig) read(i int) {
	args := jsontext.Value(fmt.Sprintf(`{"n":%d}`, i))
	out := jsontext.Value(fmt.Sprintf(`{"echo":%d}`, i))
	d := Decision{tool: &toolInfo{defDigest: "def"}, Args: args, ArgsDigest: digest(args)}
	g.c.queueRead(context.Background(), readRecord{key: store.CallKey{Run: g.c.run, Step: g.c.step, Attempt: g.c.attempt, Index: -1},
		name: "read.tool", d: d, o: outcome{out: out, resultDigest: digest(out)}})
}

// Read calls queued while the writer is busy share one queued function,
// and their rows and audit records are what one-at-a-time recording
// gives: in order, each call's records together, the chain intact. What
// else is queued in between (a model.usage record) closes the group, so
// it keeps its place.
func TestReadCallsShareAQueuedFunction(t *testing.T) {
	g := newGroupRig(t)
	ctx := context.Background()
	g.hold(t, func(store.Tx) error { return nil })
	g.c.mu.Lock()
	for i := range 5 {
		g.read(i)
	}
	if len(g.c.pending) != 1 {
		t.Errorf("%d queued functions for 5 read calls behind a busy writer, want 1", len(g.c.pending))
	}
	g.c.queue(ctx, func(tx store.Tx) error {
		return g.c.append(tx, "", ModelUsage{Attempt: g.c.attempt, Provider: "p", Model: "m", Turn: 1})
	})
	g.read(5)
	g.read(6)
	if len(g.c.pending) != 3 {
		t.Errorf("%d queued functions, want 3 (reads, usage, reads)", len(g.c.pending))
	}
	g.c.mu.Unlock()
	g.resume(t)
	if err := g.c.Flush(); err != nil {
		t.Fatal(err)
	}
	// After the commit, a new read starts a new group.
	g.c.mu.Lock()
	g.read(7)
	g.c.mu.Unlock()
	if err := g.c.Flush(); err != nil {
		t.Fatal(err)
	}

	calls, err := g.st.Calls(ctx, g.c.run, store.CallFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 8 {
		t.Fatalf("%d calls recorded, want 8", len(calls))
	}
	for i, c := range calls {
		if c.Index != i || string(c.Args) != fmt.Sprintf(`{"n":%d}`, i) || string(c.Result) != fmt.Sprintf(`{"echo":%d}`, i) || c.State != store.CallSucceeded {
			t.Errorf("call %d recorded as %d %s -> %s (%s)", i, c.Index, c.Args, c.Result, c.State)
		}
	}
	recs := g.verifiedAudit(t)
	var got []string
	for _, r := range recs[1:] {
		got = append(got, string(r.Kind)+recordIndex(r))
	}
	var want []string
	for i := range 8 {
		if i == 5 {
			want = append(want, string(KindModelUsage))
		}
		want = append(want, fmt.Sprintf("%s %d", KindCallStarted, i), fmt.Sprintf("%s %d", KindCallSucceeded, i))
	}
	if !slices.Equal(got, want) {
		t.Errorf("audit records\n%v\nwant\n%v", got, want)
	}
}

func recordIndex(r audit.Record) string {
	var d struct {
		Index *int `json:"index"`
	}
	if err := json.Unmarshal(r.Data, &d); err != nil || d.Index == nil {
		return ""
	}
	return fmt.Sprintf(" %d", *d.Index)
}

// A group fails as one: when the step attempt stopped running before
// the writer got to it, none of its calls is recorded, and Flush (so the
// step) reports the failure.
func TestReadGroupFailsAsOne(t *testing.T) {
	g := newGroupRig(t)
	stop := func(tx store.Tx) error { return tx.SetStepWaiting(g.c.run, "work", g.c.attempt) }
	// On SQLite the group waits behind the held writer, which stops the
	// step first. PostgreSQL runs a queued group on a connection of its
	// own, not behind a transaction that has taken no lock yet, so there
	// the step stops (committed) before the reads are queued.
	pg := teststore.Postgres(t)
	if pg {
		if err := g.st.Tx(context.Background(), stop); err != nil {
			t.Fatal(err)
		}
	} else {
		g.hold(t, stop)
	}
	g.c.mu.Lock()
	for i := range 3 {
		g.read(i)
	}
	g.c.mu.Unlock()
	if !pg {
		g.resume(t)
	}
	if err := g.c.Flush(); err == nil {
		t.Fatal("Flush reported no failure for calls of a step that is not running")
	}
	calls, err := g.st.Calls(context.Background(), g.c.run, store.CallFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 0 {
		t.Errorf("%d calls recorded, want none", len(calls))
	}
}
