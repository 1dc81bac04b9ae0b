package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

func testRunLifecycle(t *testing.T, openTest Opener) {
	s := openTest(t)
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	setClock(t, s, func() time.Time { return clock })
	run, attempt := newRun(t, s)
	if !strings.HasPrefix(run, "run_") || len(run) != 4+16 {
		t.Errorf("run id %q", run)
	}
	r, err := s.GetRun(bg, run)
	if err != nil {
		t.Fatal(err)
	}
	if r.DocumentDigest != digest(testDoc) || r.Status != store.RunRunning || r.CurrentStep != "work" ||
		string(r.Input) != `{"customerId":"c1"}` || r.HarnessPath != "harness.json" || !r.Created.Equal(clock) {
		t.Errorf("run = %+v", r)
	}
	if r.AuditSeq != 1 || r.AuditHash == audit.Genesis {
		t.Errorf("head = %d %s", r.AuditSeq, r.AuditHash)
	}

	var refused, waiting store.Call
	mustTx(t, s, func(tx store.Tx) error {
		if _, err := auditedCall(tx, run, "work", attempt, "customer.get", `{"customerId":"c1"}`); err != nil {
			return err
		}
		refused, err = tx.StartCall(store.Call{CallKey: store.CallKey{Run: run, Step: "work", Attempt: attempt}, Tool: "stripe.refund",
			Args: jsontext.Value(`{}`), ArgsDigest: digest(`{}`), Decision: store.DecisionRefused, Reason: "not in allowedTools"})
		if err != nil {
			return err
		}
		waiting, err = tx.StartCall(store.Call{CallKey: store.CallKey{Run: run, Step: "work", Attempt: attempt}, Tool: "gmail.send",
			Args: jsontext.Value(`{"to":"a@b"}`), ArgsDigest: digest(`{"to":"a@b"}`), Decision: store.DecisionWaiting, SideEffecting: true})
		return err
	})
	if refused.Index != 1 || refused.State != store.CallRefused || refused.Finished.IsZero() {
		t.Errorf("refused = %+v", refused)
	}
	if waiting.Index != 2 || waiting.State != store.CallWaiting {
		t.Errorf("waiting = %+v", waiting)
	}
	// Only a started call finishes.
	err = s.Tx(bg, func(tx store.Tx) error {
		return tx.FinishCall(refused.CallKey, store.CallSucceeded, nil, "")
	})
	if !errors.Is(err, store.ErrState) {
		t.Errorf("finishing a refused call: %v", err)
	}
	err = s.Tx(bg, func(tx store.Tx) error {
		return tx.FinishCall(store.CallKey{Run: run, Step: "work", Attempt: attempt, Index: 9}, store.CallSucceeded, nil, "")
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("finishing a missing call: %v", err)
	}
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.DecideCall(waiting.CallKey, true, "", ""); err != nil {
			return err
		}
		return tx.FinishCall(waiting.CallKey, store.CallFailed, nil, "smtp: 550")
	})
	calls, err := s.Calls(bg, run, store.CallFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, c := range calls {
		states = append(states, fmt.Sprintf("%d:%s:%s:%s", c.Index, c.Tool, c.Decision, c.State))
	}
	want := "[0:customer.get:allowed:succeeded 1:stripe.refund:refused:refused 2:gmail.send:allowed:failed]"
	if fmt.Sprint(states) != want {
		t.Errorf("calls = %v\nwant %s", states, want)
	}
	if calls[2].Error != "smtp: 550" || string(calls[0].Result) != `{"ok":true}` {
		t.Errorf("calls = %+v", calls)
	}
	if cs, _ := s.Calls(bg, run, store.CallFilter{States: []store.CallState{store.CallRefused}}); len(cs) != 1 || cs[0].Index != 1 {
		t.Errorf("refused calls = %+v", cs)
	}

	// A gate.
	var gateAttempt int
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.FinishStep(run, "work", attempt, store.StepDone, jsontext.Value(`{"n":3}`), ""); err != nil {
			return err
		}
		if gateAttempt, err = tx.StartStep(run, "review"); err != nil {
			return err
		}
		if err := tx.SetStepWaiting(run, "review", gateAttempt); err != nil {
			return err
		}
		if _, err := tx.OpenGate(run, "review", gateAttempt); err != nil {
			return err
		}
		return tx.SetRunStatus(run, store.RunWaiting, "gate review")
	})
	if r, _ := s.GetRun(bg, run); r.Status != store.RunWaiting || r.CurrentStep != "review" {
		t.Errorf("run = %s at %s", r.Status, r.CurrentStep)
	}
	mustTx(t, s, func(tx store.Tx) error {
		g, err := tx.DecideGate(run, "review", gateAttempt, true, "looks right", "ana")
		if err != nil {
			return err
		}
		if g.Status != store.GateApproved || g.DecidedBy != "ana" || g.Decided.IsZero() {
			return fmt.Errorf("gate = %+v", g)
		}
		return nil
	})
	err = s.Tx(bg, func(tx store.Tx) error {
		_, err := tx.DecideGate(run, "review", gateAttempt, false, "", "bo")
		return err
	})
	if !errors.Is(err, store.ErrState) {
		t.Errorf("deciding a gate twice: %v", err)
	}
	if gs, _ := s.Gates(bg, run); len(gs) != 1 || gs[0].Status != store.GateApproved || gs[0].Reason != "looks right" {
		t.Errorf("gates = %+v", gs)
	}
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.FinishStep(run, "review", gateAttempt, store.StepDone, nil, ""); err != nil {
			return err
		}
		return tx.SetRunStatus(run, store.RunCompleted, "")
	})
	steps, _ := s.Steps(bg, run)
	if len(steps) != 2 || steps[0].Status != store.StepDone || string(steps[0].Output) != `{"n":3}` || steps[1].Step != "review" {
		t.Errorf("steps = %+v", steps)
	}
	// An ended run stays ended and takes no more steps.
	err = s.Tx(bg, func(tx store.Tx) error { return tx.SetRunStatus(run, store.RunRunning, "") })
	if !errors.Is(err, store.ErrState) {
		t.Errorf("reopening a completed run: %v", err)
	}
	err = s.Tx(bg, func(tx store.Tx) error { _, err := tx.StartStep(run, "work"); return err })
	if !errors.Is(err, store.ErrState) {
		t.Errorf("starting a step in a completed run: %v", err)
	}
	runs, err := s.ListRuns(bg, store.RunCompleted)
	if err != nil || len(runs) != 1 || runs[0].ID != run || runs[0].Document != nil {
		t.Errorf("ListRuns = %+v, %v", runs, err)
	}
	if runs, _ := s.ListRuns(bg, store.RunRunning, store.RunWaiting); len(runs) != 0 {
		t.Errorf("running runs = %+v", runs)
	}
	if probs, err := s.VerifyAudit(bg, run); err != nil || len(probs) != 0 {
		t.Errorf("VerifyAudit = %v, %v", probs, err)
	}
}

func testCallNeedsRunningStep(t *testing.T, openTest Opener) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	for name, c := range map[string]store.CallKey{
		"missing step":    {Run: run, Step: "nope", Attempt: 1},
		"missing attempt": {Run: run, Step: "work", Attempt: attempt + 1},
		"missing run":     {Run: "run_0000000000000000", Step: "work", Attempt: 1},
	} {
		err := s.Tx(bg, func(tx store.Tx) error {
			_, err := tx.StartCall(store.Call{CallKey: c, Tool: "x", Decision: store.DecisionAllowed})
			return err
		})
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: %v", name, err)
		}
	}
	mustTx(t, s, func(tx store.Tx) error { return tx.SetStepWaiting(run, "work", attempt) })
	err := s.Tx(bg, func(tx store.Tx) error {
		_, err := tx.StartCall(store.Call{CallKey: store.CallKey{Run: run, Step: "work", Attempt: attempt}, Tool: "x", Decision: store.DecisionAllowed})
		return err
	})
	if !errors.Is(err, store.ErrState) {
		t.Errorf("call in a waiting step: %v", err)
	}
}

// TestTxAtomic: a function that fails leaves nothing behind, also when it
// shares a commit with functions that succeed.
func testTxAtomic(t *testing.T, openTest Opener) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	boom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Tx(bg, func(tx store.Tx) error {
				if _, err := auditedCall(tx, run, "work", attempt, "t", fmt.Sprintf(`{"i":%d}`, i)); err != nil {
					return err
				}
				if i%2 == 1 {
					return boom
				}
				if i%7 == 0 {
					panic("kaput")
				}
				return nil
			})
		}()
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case i%2 == 1:
			if !errors.Is(err, boom) {
				t.Errorf("tx %d: %v", i, err)
			}
		case i%7 == 0:
			if err == nil || !strings.Contains(err.Error(), "kaput") {
				t.Errorf("tx %d: %v", i, err)
			}
		case err != nil:
			t.Errorf("tx %d: %v", i, err)
		default:
			ok++
		}
	}
	calls, _ := s.Calls(bg, run, store.CallFilter{})
	recs, _ := s.Audit(bg, run)
	if len(calls) != ok || len(recs) != 1+2*ok {
		t.Errorf("%d calls and %d records, want %d and %d", len(calls), len(recs), ok, 1+2*ok)
	}
	for i, c := range calls {
		if c.Index != i {
			t.Errorf("call %d has index %d", i, c.Index)
		}
	}
	if probs, _ := s.VerifyAudit(bg, run); len(probs) != 0 {
		t.Errorf("VerifyAudit = %v", probs)
	}
}

func testTxAfterClose(t *testing.T, openTest Opener) {
	s := openTest(t)
	s.Close()
	if err := s.Tx(bg, func(store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Tx after Close = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func testTxKeptAfterReturn(t *testing.T, openTest Opener) {
	s := openTest(t)
	var kept store.Tx
	mustTx(t, s, func(tx store.Tx) error { kept = tx; return nil })
	if _, err := kept.CreateRun(store.Run{}); !errors.Is(err, store.ErrTxDone) {
		t.Errorf("using a finished Tx: %v", err)
	}
	// Later transactions do not bring it back to life.
	mustTx(t, s, func(tx store.Tx) error { _, err := tx.CreateRun(store.Run{}); return err })
	if _, err := kept.CreateRun(store.Run{}); !errors.Is(err, store.ErrTxDone) {
		t.Errorf("using a finished Tx after another transaction: %v", err)
	}
}

func testAuditChain(t *testing.T, openTest Opener) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	var last audit.Record
	mustTx(t, s, func(tx store.Tx) error {
		var err error
		last, err = auditedCall(tx, run, "work", attempt, "note.add", `{"body":"hi"}`)
		return err
	})
	recs, err := s.Audit(bg, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[0].Prev != audit.Genesis || recs[1].Prev != recs[0].Hash || recs[2].Hash != last.Hash || string(recs[2].Data) != string(last.Data) {
		t.Errorf("records = %+v", recs)
	}
	for i, r := range recs {
		if r.Seq != int64(i+1) || r.Run != run || r.Time == "" {
			t.Errorf("record %d = %+v", i, r)
		}
	}
	seq, hash, err := s.AuditHead(bg, run)
	if err != nil || seq != 3 || hash != last.Hash {
		t.Errorf("head = %d %s %v", seq, hash, err)
	}
	// The caller's Seq, Prev and Hash are ignored; its Time is kept.
	mustTx(t, s, func(tx store.Tx) error {
		r, err := tx.Append(audit.Record{Run: run, Seq: 99, Prev: "x", Hash: "y", Time: "2026-01-01T00:00:00Z", Kind: "k"})
		if err == nil && (r.Seq != 4 || r.Prev != last.Hash || r.Time != "2026-01-01T00:00:00Z") {
			t.Errorf("appended %+v", r)
		}
		return err
	})
	if _, _, err := s.AuditHead(bg, "run_missing"); err == nil {
		t.Error("AuditHead of a missing run")
	}
	err = s.Tx(bg, func(tx store.Tx) error { _, err := tx.Append(audit.Record{Run: "run_missing", Kind: "k"}); return err })
	if err == nil {
		t.Error("appended to a missing run")
	}
	// Invalid JSON data cannot be sealed, and nothing is written.
	err = s.Tx(bg, func(tx store.Tx) error {
		_, err := tx.Append(audit.Record{Run: run, Kind: "k", Data: jsontext.Value(`{"a":`)})
		return err
	})
	if err == nil {
		t.Error("appended invalid JSON data")
	}
	if seq, _, _ := s.AuditHead(bg, run); seq != 4 {
		t.Errorf("head = %d after a failed append", seq)
	}
}

func testLockRunIsExclusive(t *testing.T, openTest Opener) {
	s := openTest(t)
	unlock, err := s.LockRun("run_a")
	if err != nil {
		t.Fatal(err)
	}
	// A second holder in this process opens its own file description, so
	// flock refuses it just as it would another process.
	if _, err := s.LockRun("run_a"); !errors.Is(err, store.ErrRunBusy) {
		t.Fatalf("second lock: %v, want ErrRunBusy", err)
	}
	other, err := s.LockRun("run_b")
	if err != nil {
		t.Fatalf("another run is independent: %v", err)
	}
	other()
	unlock()
	again, err := s.LockRun("run_a")
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	again()
}

func testQueueOrder(t *testing.T, openTest Opener) {
	s := openTest(t)
	run, _ := newRun(t, s)
	var qs []store.Queued
	for i := range 200 {
		qs = append(qs, s.Queue(bg, appendRec(run, i)))
	}
	// A Tx after them returns only once they are all committed.
	mustTx(t, s, appendRec(run, 200))
	for i, q := range qs {
		select {
		case <-q.Done():
		default:
			t.Fatalf("queued function %d not answered when a later Tx returned", i)
		}
	}
	for range 50 {
		qs = append(qs, s.Queue(bg, appendRec(run, len(qs)+1)))
	}
	if err := s.Flush(bg); err != nil {
		t.Fatal(err)
	}
	for i, q := range qs {
		select {
		case <-q.Done():
			if err := q.Wait(); err != nil {
				t.Errorf("queued function %d: %v", i, err)
			}
		default:
			t.Fatalf("queued function %d not answered when Flush returned", i)
		}
	}
	recs, err := s.Audit(bg, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 252 {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range recs[1:] {
		if want := fmt.Sprintf(`{"i":%d}`, i); string(r.Data) != want {
			t.Fatalf("record %d: %s, want %s", r.Seq, r.Data, want)
		}
	}
	mustVerify(t, s, run, 252)
}

// testTxRunsAfterQueue: a Tx's function runs after every function queued
// before the Tx was called: each has its outcome already, or ran (in the
// same transaction) and its change is visible to the Tx.
func testTxRunsAfterQueue(t *testing.T, openTest Opener) {
	s := openTest(t)
	run, _ := newRun(t, s)
	const n = 50
	var ran [n]atomic.Bool
	qs := make([]store.Queued, n)
	for i := range n {
		qs[i] = s.Queue(bg, func(tx store.Tx) error {
			err := appendRec(run, i)(tx)
			ran[i].Store(true)
			return err
		})
	}
	mustTx(t, s, func(tx store.Tx) error {
		for i, q := range qs {
			select {
			case <-q.Done():
			default:
				if !ran[i].Load() {
					return fmt.Errorf("queued function %d has neither run nor an outcome", i)
				}
			}
		}
		recs, err := tx.Audit(run)
		if err != nil {
			return err
		}
		if len(recs) != n+1 {
			return fmt.Errorf("the Tx sees %d records, want %d", len(recs), n+1)
		}
		return nil
	})
	mustVerify(t, s, run, n+1)
}

func appendRec(run string, i int) func(store.Tx) error {
	return func(tx store.Tx) error {
		_, err := tx.Append(audit.Record{Run: run, Kind: "note", Data: jsontext.Value(fmt.Sprintf(`{"i":%d}`, i))})
		return err
	}
}

func mustVerify(t *testing.T, s store.Store, run string, wantSeq int64) {
	t.Helper()
	probs, err := s.VerifyAudit(bg, run)
	if err != nil || len(probs) != 0 {
		t.Fatalf("VerifyAudit = %v, %v", probs, err)
	}
	if seq, _, err := s.AuditHead(bg, run); err != nil || seq != wantSeq {
		t.Fatalf("head = %d, %v; want %d", seq, err, wantSeq)
	}
}

// blockWriter queues a function that holds the writer until the returned
// function is called, and waits until it runs, so that what is queued next
// forms one batch.
func blockWriter(t *testing.T, s store.Store) (release func()) {
	t.Helper()
	started, rel := make(chan struct{}), make(chan struct{})
	q := s.Queue(bg, func(store.Tx) error { close(started); <-rel; return nil })
	<-started
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(rel)
			if err := q.Wait(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

func testAppendAll(t *testing.T, openTest Opener) {
	s := openTest(t)
	run, _ := newRun(t, s)
	other, _ := newRun(t, s)
	var got []audit.Record
	mustTx(t, s, func(tx store.Tx) error {
		if out, err := tx.AppendAll(); err != nil || out != nil {
			return fmt.Errorf("AppendAll() = %v, %v", out, err)
		}
		one, err := tx.Append(audit.Record{Run: run, Kind: "one"})
		if err != nil {
			return err
		}
		var recs []audit.Record
		for i := range 40 { // more than one INSERT's worth
			recs = append(recs, audit.Record{Run: run, Kind: "many", Step: "work", Tool: "t\x00ool",
				Data: jsontext.Value(fmt.Sprintf(`{"i":%d}`, i))})
		}
		recs[3].Time = "2026-01-01T00:00:00Z"
		out, err := tx.AppendAll(recs...)
		if err != nil {
			return err
		}
		got = append([]audit.Record{one}, out...)
		_, err = tx.Append(audit.Record{Run: run, Kind: "after"})
		return err
	})
	if len(got) != 41 {
		t.Fatalf("%d records", len(got))
	}
	for i, r := range got {
		if r.Seq != int64(i+2) {
			t.Errorf("record %d: seq %d", i, r.Seq)
		}
		if i > 0 && r.Prev != got[i-1].Hash {
			t.Errorf("record %d: prev %s, want %s", i, r.Prev, got[i-1].Hash)
		}
	}
	if got[4].Time != "2026-01-01T00:00:00Z" || got[5].Time == got[4].Time {
		t.Errorf("times %q, %q", got[4].Time, got[5].Time)
	}
	stored, err := s.Audit(bg, run)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stored[1:42], got) {
		t.Errorf("stored records differ from those returned")
	}
	mustVerify(t, s, run, 43)

	// Records of two runs: refused, nothing appended.
	err = s.Tx(bg, func(tx store.Tx) error {
		_, err := tx.AppendAll(audit.Record{Run: run, Kind: "a"}, audit.Record{Run: other, Kind: "b"})
		return err
	})
	if err == nil {
		t.Error("AppendAll of two runs succeeded")
	}
	// An invalid record among valid ones: nothing appended.
	err = s.Tx(bg, func(tx store.Tx) error {
		if _, err := tx.AppendAll(audit.Record{Run: run, Kind: "a"}, audit.Record{Run: run, Kind: "b", Tool: "\xff"}); err == nil {
			return errors.New("appended invalid UTF-8")
		}
		return nil // carry on: the cache must not hold the refused records
	})
	if err != nil {
		t.Fatal(err)
	}
	mustTx(t, s, appendRec(run, 1))
	mustVerify(t, s, run, 44)
	mustVerify(t, s, other, 1)
	if err := s.Tx(bg, func(tx store.Tx) error {
		_, err := tx.AppendAll(audit.Record{Run: "run_none", Kind: "a"})
		return err
	}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AppendAll to no run: %v", err)
	}
}

// From store/sqlite/approvals_test.go.

type approvalFixture struct {
	s     store.Store
	run   string
	clock *time.Time
}

func newApprovalFixture(t *testing.T, openTest Opener) *approvalFixture {
	s := openTest(t)
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	setClock(t, s, func() time.Time { return clock })
	run, _ := newRun(t, s)
	return &approvalFixture{s: s, run: run, clock: &clock}
}

func (f *approvalFixture) create(t *testing.T, tool, args string, expires time.Time) store.Approval {
	t.Helper()
	var a store.Approval
	mustTx(t, f.s, func(tx store.Tx) error {
		var err error
		a, err = tx.CreateApproval(store.Approval{Run: f.run, Step: "work", Tool: tool, DefDigest: digest("def:" + tool),
			ArgsDigest: digest(args), Reason: "requiresApproval", Expires: expires})
		return err
	})
	return a
}

func (f *approvalFixture) decide(t *testing.T, id string, approve bool) (store.Approval, error) {
	t.Helper()
	var a store.Approval
	err := f.s.Tx(bg, func(tx store.Tx) error {
		var err error
		a, err = tx.DecideApproval(id, approve, "checked", "ana")
		return err
	})
	return a, err
}

func (f *approvalFixture) consume(t *testing.T, step, tool, def, args string) bool {
	t.Helper()
	var ok bool
	mustTx(t, f.s, func(tx store.Tx) error {
		var err error
		_, ok, err = tx.ConsumeApproval(f.run, step, tool, def, args)
		return err
	})
	return ok
}

func testApprovalDefaults(t *testing.T, openTest Opener) {
	f := newApprovalFixture(t, openTest)
	a := f.create(t, "gmail.send", `{"to":"a@b"}`, time.Time{})
	if !strings.HasPrefix(a.ID, "apr_") || a.Kind != store.KindCall || a.Status != store.ApprovalPending ||
		!a.Expires.Equal(f.clock.Add(24*time.Hour)) {
		t.Errorf("approval = %+v", a)
	}
	got, err := f.s.GetApproval(bg, a.ID)
	if err != nil || got.Expires != a.Expires || got.Created != a.Created || got.Tool != a.Tool {
		t.Errorf("GetApproval = %+v, %v\nwant %+v", got, err, a)
	}
}

func testConsumeApprovalOnce(t *testing.T, openTest Opener) {
	f := newApprovalFixture(t, openTest)
	const tool, args = "stripe.refund", `{"amount":500,"charge":"ch_1"}`
	def := digest("def:" + tool)
	for round := range 20 {
		a := f.create(t, tool, args, time.Time{})
		if f.consume(t, "work", tool, def, digest(args)) {
			t.Fatal("a pending approval was consumed")
		}
		if _, err := f.decide(t, a.ID, true); err != nil {
			t.Fatal(err)
		}
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := f.s.Tx(bg, func(tx store.Tx) error {
					got, ok, err := tx.ConsumeApproval(f.run, "work", tool, def, digest(args))
					if ok {
						wins.Add(1)
						if got.ID != a.ID || got.Status != store.ApprovalUsed || got.Used.IsZero() {
							t.Errorf("consumed %+v", got)
						}
					}
					return err
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d of 8 concurrent ConsumeApproval calls won, want exactly 1", round, n)
		}
	}
	if f.consume(t, "work", tool, def, digest(args)) {
		t.Error("consumed after all were used")
	}
}

func testConsumeApprovalMatchesExactly(t *testing.T, openTest Opener) {
	f := newApprovalFixture(t, openTest)
	const tool, args = "stripe.refund", `{"amount":500}`
	def := digest("def:" + tool)
	a := f.create(t, tool, args, time.Time{})
	if _, err := f.decide(t, a.ID, true); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string][4]string{
		"other arguments":  {"work", tool, def, digest(`{"amount":5000}`)},
		"other definition": {"work", tool, digest("def:changed"), digest(args)},
		"other step":       {"other", tool, def, digest(args)},
		"other tool":       {"work", "stripe.refunds", def, digest(args)},
		"NUL suffix":       {"work", tool + "\x00", def, digest(args)},
		"case":             {"work", "Stripe.refund", def, digest(args)},
	} {
		if f.consume(t, c[0], c[1], c[2], c[3]) {
			t.Errorf("%s: consumed", name)
		}
	}
	var otherRun bool
	mustTx(t, f.s, func(tx store.Tx) error {
		var err error
		_, otherRun, err = tx.ConsumeApproval("run_ffffffffffffffff", "work", tool, def, digest(args))
		return err
	})
	if otherRun {
		t.Error("other run: consumed")
	}
	if !f.consume(t, "work", tool, def, digest(args)) {
		t.Error("the exact call was not let through")
	}
}

func testApprovalExpired(t *testing.T, openTest Opener) {
	f := newApprovalFixture(t, openTest)
	const tool, args = "gmail.send", `{}`
	def := digest("def:" + tool)
	approved := f.create(t, tool, args, f.clock.Add(time.Hour))
	if _, err := f.decide(t, approved.ID, true); err != nil {
		t.Fatal(err)
	}
	pending := f.create(t, tool, args, f.clock.Add(time.Hour))
	*f.clock = f.clock.Add(time.Hour) // expiry is exclusive: at the expiry time it is expired
	if f.consume(t, "work", tool, def, digest(args)) {
		t.Error("an expired approval was consumed")
	}
	if _, err := f.decide(t, pending.ID, true); !errors.Is(err, store.ErrExpired) {
		t.Errorf("deciding an expired approval: %v", err)
	}
	if p, _ := f.s.PendingApprovals(bg, f.run); len(p) != 0 {
		t.Errorf("pending = %+v", p)
	}
	var expired []store.Approval
	mustTx(t, f.s, func(tx store.Tx) error {
		var err error
		expired, err = tx.ExpireApprovals(f.run)
		return err
	})
	if len(expired) != 2 || expired[0].Status != store.ApprovalExpired || expired[1].Status != store.ApprovalExpired {
		t.Errorf("expired = %+v", expired)
	}
	if _, err := f.decide(t, pending.ID, true); !errors.Is(err, store.ErrState) {
		t.Errorf("deciding an expired approval: %v", err)
	}
}

func testApprovalDenied(t *testing.T, openTest Opener) {
	f := newApprovalFixture(t, openTest)
	const tool, args = "gmail.send", `{}`
	a := f.create(t, tool, args, time.Time{})
	got, err := f.decide(t, a.ID, false)
	if err != nil || got.Status != store.ApprovalDenied || got.DecidedBy != "ana" || got.Reason != "checked" {
		t.Fatalf("deny = %+v, %v", got, err)
	}
	if f.consume(t, "work", tool, digest("def:"+tool), digest(args)) {
		t.Error("a denied approval was consumed")
	}
	if _, err := f.decide(t, a.ID, true); !errors.Is(err, store.ErrState) {
		t.Errorf("approving a denied approval: %v", err)
	}
	if _, err := f.decide(t, "apr_nope", true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deciding a missing approval: %v", err)
	}
	all, _ := f.s.Approvals(bg, f.run)
	if len(all) != 1 || all[0].Status != store.ApprovalDenied {
		t.Errorf("approvals = %+v", all)
	}
}

func testApprovalForWaitingCall(t *testing.T, openTest Opener) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	var c store.Call
	var a store.Approval
	mustTx(t, s, func(tx store.Tx) error {
		var err error
		c, err = tx.StartCall(store.Call{CallKey: store.CallKey{Run: run, Step: "work", Attempt: attempt}, Tool: "gmail.send",
			DefDigest: "d", ArgsDigest: "x", Decision: store.DecisionWaiting, SideEffecting: true})
		if err != nil {
			return err
		}
		a, err = tx.CreateApproval(store.Approval{Run: run, Step: "work", Tool: c.Tool, DefDigest: "d", ArgsDigest: "x", Call: &c.CallKey})
		return err
	})
	got, _ := s.GetApproval(bg, a.ID)
	if got.Call == nil || *got.Call != c.CallKey {
		t.Errorf("approval call = %v, want %v", got.Call, c.CallKey)
	}
	err := s.Tx(bg, func(tx store.Tx) error {
		k := c.CallKey
		k.Index = 7
		_, err := tx.CreateApproval(store.Approval{Run: run, Step: "work", Tool: c.Tool, Call: &k})
		return err
	})
	if err == nil {
		t.Error("an approval for a call that does not exist was stored")
	}
}

// From store/sqlite/calls_record_test.go.

// RecordCall's row is the row StartCall and FinishCall make (or StartCall
// alone, refused).
func testRecordCallEqualsStartFinish(t *testing.T, openTest Opener) {
	s := openTest(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123, time.UTC)
	setClock(t, s, func() time.Time { return at })
	runA, attA := newRun(t, s)
	runB, attB := newRun(t, s)
	base := func(run string, attempt int, d store.Decision, reason string) store.Call {
		return store.Call{CallKey: store.CallKey{Run: run, Step: "work", Attempt: attempt}, Tool: "customer\x00get", DefDigest: digest("def"),
			Args: jsontext.Value(`{"id":"c1"}`), ArgsDigest: digest(`{"id":"c1"}`), Decision: d, Reason: reason, SideEffecting: false}
	}
	for _, tc := range []struct {
		state  store.CallState
		result jsontext.Value
		errTxt string
	}{
		{store.CallSucceeded, jsontext.Value(`{"name":"Ada"}`), ""},
		{store.CallFailed, nil, "no such customer"},
		{store.CallRefused, nil, ""},
	} {
		var ret store.Call
		mustTx(t, s, func(tx store.Tx) error {
			if tc.state == store.CallRefused {
				_, err := tx.StartCall(base(runA, attA, store.DecisionRefused, "not allowed"))
				if err != nil {
					return err
				}
				c := base(runB, attB, store.DecisionRefused, "not allowed")
				c.State = store.CallRefused
				ret, err = tx.RecordCall(c)
				return err
			}
			c, err := tx.StartCall(base(runA, attA, store.DecisionAllowed, ""))
			if err != nil {
				return err
			}
			if err := tx.FinishCall(c.CallKey, tc.state, tc.result, tc.errTxt); err != nil {
				return err
			}
			r := base(runB, attB, store.DecisionAllowed, "")
			r.State, r.Result, r.Error = tc.state, tc.result, tc.errTxt
			ret, err = tx.RecordCall(r)
			return err
		})
		ca, err := s.Calls(bg, runA, store.CallFilter{})
		if err != nil {
			t.Fatal(err)
		}
		cb, err := s.Calls(bg, runB, store.CallFilter{})
		if err != nil {
			t.Fatal(err)
		}
		a, b := ca[len(ca)-1], cb[len(cb)-1]
		if !reflect.DeepEqual(ret, b) {
			t.Errorf("%s: RecordCall returned\n%+v\nstored\n%+v", tc.state, ret, b)
		}
		a.Run = b.Run
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: StartCall+FinishCall\n%+v\nRecordCall\n%+v", tc.state, a, b)
		}
	}
	// Dump shows the same rows too, but for the run.
	dump, err := s.Dump(bg)
	if err != nil {
		t.Fatal(err)
	}
	var la, lb []string
	for _, l := range strings.Split(string(dump), "\n") {
		if strings.HasPrefix(l, "calls\t") {
			if strings.Contains(l, runA) {
				la = append(la, strings.ReplaceAll(l, runA, "RUN"))
			} else {
				lb = append(lb, strings.ReplaceAll(l, runB, "RUN"))
			}
		}
	}
	if len(la) != 3 || !reflect.DeepEqual(la, lb) {
		t.Errorf("dumped rows differ:\n%s\n%s", strings.Join(la, "\n"), strings.Join(lb, "\n"))
	}
}

func testRecordCallChecks(t *testing.T, openTest Opener) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	call := func(run string, attempt int, st store.CallState, d store.Decision) store.Call {
		return store.Call{CallKey: store.CallKey{Run: run, Step: "work", Attempt: attempt}, Tool: "t", State: st, Decision: d}
	}
	rec := func(c store.Call) (store.Call, error) {
		var out store.Call
		err := s.Tx(bg, func(tx store.Tx) error {
			var err error
			out, err = tx.RecordCall(c)
			return err
		})
		return out, err
	}
	// Index follows StartCall's.
	mustTx(t, s, func(tx store.Tx) error {
		_, err := tx.StartCall(call(run, attempt, "", store.DecisionAllowed))
		return err
	})
	c, err := rec(call(run, attempt, store.CallSucceeded, store.DecisionAllowed))
	if err != nil || c.Index != 1 || c.Started.IsZero() || !c.Finished.Equal(c.Started) {
		t.Fatalf("RecordCall = %+v, %v", c, err)
	}
	started := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c2 := call(run, attempt, store.CallFailed, store.DecisionAllowed)
	c2.Started, c2.Finished = started, started.Add(time.Second)
	if c, err := rec(c2); err != nil || c.Index != 2 || !c.Started.Equal(started) || !c.Finished.Equal(started.Add(time.Second)) {
		t.Fatalf("RecordCall = %+v, %v", c, err)
	}
	c2.Finished = started.Add(-time.Second)
	if _, err := rec(c2); err == nil {
		t.Error("recorded a call that finished before it started")
	}
	for _, bad := range []store.Call{
		call(run, attempt, store.CallStarted, store.DecisionAllowed),
		call(run, attempt, store.CallWaiting, store.DecisionWaiting),
		call(run, attempt, store.CallSucceeded, store.DecisionRefused),
		call(run, attempt, store.CallRefused, store.DecisionAllowed),
		call(run, attempt, store.CallOutcomeUnknown, store.DecisionAllowed),
	} {
		if _, err := rec(bad); err == nil {
			t.Errorf("recorded %s with %s", bad.State, bad.Decision)
		}
	}
	if _, err := rec(call("run_none", 1, store.CallSucceeded, store.DecisionAllowed)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("no run: %v", err)
	}
	if _, err := rec(call(run, attempt+1, store.CallSucceeded, store.DecisionAllowed)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("no attempt: %v", err)
	}
	mustTx(t, s, func(tx store.Tx) error { return tx.SetStepWaiting(run, "work", attempt) })
	if _, err := rec(call(run, attempt, store.CallSucceeded, store.DecisionAllowed)); !errors.Is(err, store.ErrState) {
		t.Errorf("waiting step: %v", err)
	}
	mustTx(t, s, func(tx store.Tx) error { return tx.SetStepRunning(run, "work", attempt) })
	mustTx(t, s, func(tx store.Tx) error { return tx.SetRunStatus(run, store.RunCompleted, "") })
	if _, err := rec(call(run, attempt, store.CallSucceeded, store.DecisionAllowed)); !errors.Is(err, store.ErrState) {
		t.Errorf("ended run: %v", err)
	}
	if cs, _ := s.Calls(bg, run, store.CallFilter{}); len(cs) != 3 {
		t.Errorf("%d calls, want 3", len(cs))
	}
}

// RecordCalls records what RecordCall would, one after another: the same
// rows, indices following the attempt's calls, over more than one
// multi-row INSERT.
func testRecordCallsEqualsRecordCall(t *testing.T, openTest Opener) {
	s := openTest(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123, time.UTC)
	setClock(t, s, func() time.Time { return at })
	runA, attA := newRun(t, s)
	runB, attB := newRun(t, s)
	const n = 35 // several of an engine's multi-row statements (store/sqlite: 16 rows each)
	calls := func(run string, attempt int) []store.Call {
		var cs []store.Call
		for i := range n {
			args := jsontext.Value(fmt.Sprintf(`{"id":"c%d"}`, i))
			c := store.Call{CallKey: store.CallKey{Run: run, Step: "work", Attempt: attempt}, Tool: fmt.Sprintf("tool\x00%d", i), DefDigest: digest("def"),
				Args: args, ArgsDigest: digest(string(args)), Decision: store.DecisionAllowed, State: store.CallSucceeded, Result: jsontext.Value(`{"ok":true}`)}
			switch i % 3 {
			case 1:
				c.State, c.Result, c.Error = store.CallFailed, nil, "no such customer"
			case 2:
				c.State, c.Decision, c.Code, c.Reason, c.Result = store.CallRefused, store.DecisionRefused, "not-allowed", "not on allowedTools", jsontext.Value(`{"dropped":1}`)
			}
			if i == 5 {
				c.Started = at.Add(-time.Second)
			}
			cs = append(cs, c)
		}
		return cs
	}
	// Both attempts have a call already: indices go on from it.
	for _, k := range []store.CallKey{{Run: runA, Step: "work", Attempt: attA}, {Run: runB, Step: "work", Attempt: attB}} {
		mustTx(t, s, func(tx store.Tx) error {
			_, err := tx.StartCall(store.Call{CallKey: k, Tool: "first", Decision: store.DecisionRefused, Reason: "no"})
			return err
		})
	}
	var one []store.Call
	mustTx(t, s, func(tx store.Tx) error {
		for _, c := range calls(runA, attA) {
			got, err := tx.RecordCall(c)
			if err != nil {
				return err
			}
			one = append(one, got)
		}
		return nil
	})
	var many []store.Call
	mustTx(t, s, func(tx store.Tx) error {
		var err error
		many, err = tx.RecordCalls(calls(runB, attB))
		return err
	})
	ca, err := s.Calls(bg, runA, store.CallFilter{})
	if err != nil {
		t.Fatal(err)
	}
	cb, err := s.Calls(bg, runB, store.CallFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ca) != n+1 || len(cb) != n+1 || len(many) != n {
		t.Fatalf("%d and %d rows, %d returned; want %d, %d", len(ca), len(cb), len(many), n+1, n)
	}
	for i := range n {
		if !reflect.DeepEqual(many[i], cb[i+1]) {
			t.Errorf("call %d: RecordCalls returned\n%+v\nstored\n%+v", i, many[i], cb[i+1])
		}
		a, b := ca[i+1], cb[i+1]
		if a.Index != i+1 || b.Index != i+1 {
			t.Errorf("call %d: indices %d and %d, want %d", i, a.Index, b.Index, i+1)
		}
		a.Run = b.Run
		if !reflect.DeepEqual(a, b) || one[i].Index != many[i].Index {
			t.Errorf("call %d: RecordCall\n%+v\nRecordCalls\n%+v", i, a, b)
		}
	}
}

func testRecordCallsChecks(t *testing.T, openTest Opener) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	other, otherAttempt := newRun(t, s)
	call := func(run string, attempt int, st store.CallState, d store.Decision) store.Call {
		return store.Call{CallKey: store.CallKey{Run: run, Step: "work", Attempt: attempt}, Tool: "t", State: st, Decision: d}
	}
	ok := call(run, attempt, store.CallSucceeded, store.DecisionAllowed)
	rec := func(cs ...store.Call) error {
		return s.Tx(bg, func(tx store.Tx) error {
			_, err := tx.RecordCalls(cs)
			return err
		})
	}
	if err := rec(); err != nil {
		t.Errorf("no calls: %v", err)
	}
	late := ok
	late.Started, late.Finished = time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, cs := range map[string][]store.Call{
		"a started call":           {ok, call(run, attempt, store.CallStarted, store.DecisionAllowed)},
		"succeeded but refused":    {ok, call(run, attempt, store.CallSucceeded, store.DecisionRefused)},
		"another run":              {ok, call(other, otherAttempt, store.CallSucceeded, store.DecisionAllowed)},
		"another attempt":          {ok, call(run, attempt+1, store.CallSucceeded, store.DecisionAllowed)},
		"finished before it began": {ok, late},
	} {
		if err := rec(cs...); err == nil {
			t.Errorf("%s: recorded", name)
		}
	}
	if err := rec(call("run_none", 1, store.CallSucceeded, store.DecisionAllowed)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("no run: %v", err)
	}
	if err := rec(call(run, attempt+1, store.CallSucceeded, store.DecisionAllowed)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("no attempt: %v", err)
	}
	mustTx(t, s, func(tx store.Tx) error { return tx.SetStepWaiting(run, "work", attempt) })
	if err := rec(ok, ok); !errors.Is(err, store.ErrState) {
		t.Errorf("waiting step: %v", err)
	}
	mustTx(t, s, func(tx store.Tx) error { return tx.SetStepRunning(run, "work", attempt) })
	if err := rec(ok, ok); err != nil {
		t.Fatal(err)
	}
	mustTx(t, s, func(tx store.Tx) error { return tx.SetRunStatus(run, store.RunCompleted, "") })
	if err := rec(ok); !errors.Is(err, store.ErrState) {
		t.Errorf("ended run: %v", err)
	}
	if cs, _ := s.Calls(bg, run, store.CallFilter{}); len(cs) != 2 {
		t.Errorf("%d calls, want the 2 recorded", len(cs))
	}
	if cs, _ := s.Calls(bg, other, store.CallFilter{}); len(cs) != 0 {
		t.Errorf("%d calls of the other run, want 0", len(cs))
	}
}

// From store/sqlite/reopen_test.go.

// A failed run goes back to running only through ReopenRun, which then
// lets a new attempt of its step start; no other status is reopened.
func testReopenRun(t *testing.T, openTest Opener) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.FinishStep(run, "work", attempt, store.StepFailed, nil, "the API answered 503"); err != nil {
			return err
		}
		return tx.SetRunStatus(run, store.RunFailed, "step work failed")
	})
	if err := s.Tx(bg, func(tx store.Tx) error { return tx.SetRunStatus(run, store.RunRunning, "") }); !errors.Is(err, store.ErrState) {
		t.Errorf("SetRunStatus on a failed run: %v, want ErrState", err)
	}
	if err := s.Tx(bg, func(tx store.Tx) error { _, err := tx.StartStep(run, "work"); return err }); !errors.Is(err, store.ErrState) {
		t.Errorf("StartStep on a failed run: %v, want ErrState", err)
	}
	var next int
	mustTx(t, s, func(tx store.Tx) error {
		if err := tx.ReopenRun(run); err != nil {
			return err
		}
		var err error
		next, err = tx.StartStep(run, "work")
		return err
	})
	if r, _ := s.GetRun(bg, run); r.Status != store.RunRunning || r.Reason != "" || next != attempt+1 {
		t.Errorf("run %s (%q), new attempt %d", r.Status, r.Reason, next)
	}
	// Running, waiting and completed runs are not reopened.
	err := s.Tx(bg, func(tx store.Tx) error { return tx.ReopenRun(run) })
	if !errors.Is(err, store.ErrState) || err.Error() != "store: wrong state: run "+run+" is running; only a failed run is reopened" {
		t.Errorf("ReopenRun of a running run: %v", err)
	}
	mustTx(t, s, func(tx store.Tx) error { return tx.SetRunStatus(run, store.RunCompleted, "") })
	if err := s.Tx(bg, func(tx store.Tx) error { return tx.ReopenRun(run) }); !errors.Is(err, store.ErrState) {
		t.Errorf("ReopenRun of a completed run: %v", err)
	}
	if err := s.Tx(bg, func(tx store.Tx) error { return tx.ReopenRun("run_0000000000000000") }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ReopenRun of no run: %v", err)
	}
}

// From store/sqlite/txreads_test.go.

// TestTxReadsSeeBatchMates: a function's reads through its Tx (Audit,
// VerifyAudit, Approvals, Calls, Approval, Call) see what the functions
// queued before it wrote, also when they share its commit (group commit:
// the batch is forced by holding the writer while both are queued); the
// store's reads inside a function do not see what it wrote.
func testTxReadsSeeBatchMates(t *testing.T, openTest Opener) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	var apr store.Approval
	mustTx(t, s, func(tx store.Tx) error {
		c, err := startCall(tx, run, "work", attempt, "deploy", `{}`)
		if err != nil {
			return err
		}
		apr, err = tx.CreateApproval(store.Approval{Run: run, Step: "work", Tool: "deploy", DefDigest: c.DefDigest, ArgsDigest: c.ArgsDigest, Call: &c.CallKey})
		return err
	})
	started, release := make(chan struct{}), make(chan struct{})
	held := s.Queue(bg, func(store.Tx) error { close(started); <-release; return nil })
	<-started
	var (
		recs             []audit.Record
		probs            []audit.Problem
		fromTx, fromPool []store.Approval
		calls            []store.Call
		one              store.Approval
		poolRecs         []audit.Record
	)
	first := s.Queue(bg, func(tx store.Tx) error {
		if _, err := tx.DecideApproval(apr.ID, true, "", "test"); err != nil {
			return err
		}
		if _, err := tx.Append(audit.Record{Run: run, Kind: "approval.approved", Step: "work", Tool: "deploy", Data: jsontext.Value(`{"approval":"` + apr.ID + `"}`)}); err != nil {
			return err
		}
		if _, err := startCall(tx, run, "work", attempt, "lookup", `{"q":1}`); err != nil {
			return err
		}
		// The store's reads do not see what this function has written
		// (on every engine: it is not committed yet).
		var err error
		if fromPool, err = s.Approvals(bg, run); err != nil {
			return err
		}
		poolRecs, err = s.Audit(bg, run)
		return err
	})
	second := s.Queue(bg, func(tx store.Tx) error {
		var err error
		if recs, err = tx.Audit(run); err != nil {
			return err
		}
		if probs, err = tx.VerifyAudit(run); err != nil {
			return err
		}
		if fromTx, err = tx.Approvals(run); err != nil {
			return err
		}
		if calls, err = tx.Calls(run, store.CallFilter{}); err != nil {
			return err
		}
		one, err = tx.Approval(apr.ID)
		return err
	})
	close(release)
	for _, q := range []store.Queued{held, first, second} {
		if err := q.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if len(recs) != 4 || recs[2].Kind != "approval.approved" || recs[3].Kind != "call.started" {
		t.Errorf("Tx.Audit saw %d records %v, want run.started, call.started, approval.approved, call.started", len(recs), recs)
	}
	if len(probs) != 0 {
		t.Errorf("Tx.VerifyAudit: %v, want a chain that verifies", probs)
	}
	if len(fromTx) != 1 || fromTx[0].Status != store.ApprovalApproved || one.Status != store.ApprovalApproved {
		t.Errorf("Tx.Approvals saw %+v and Tx.Approval %+v, want it approved", fromTx, one)
	}
	if len(calls) != 2 {
		t.Errorf("Tx.Calls saw %d calls, want 2", len(calls))
	}
	// The store's reads see what was committed only, not the function's
	// own changes (nor, on an engine that commits functions together,
	// its batch-mates'): why the runtime must not read through them
	// inside a transaction.
	if len(fromPool) != 1 || fromPool[0].Status != store.ApprovalPending || len(poolRecs) != 2 {
		t.Errorf("the store's reads inside the function saw %+v and %d records, want it pending and 2", fromPool, len(poolRecs))
	}
}

// The helpers the engines' own tests share (helpers.go), under the
// names this file has always used.
var (
	bg           = context.Background()
	mustTx       = MustTx
	newRun       = NewRun
	digest       = Digest
	startCall    = StartCall
	finishCall   = FinishCall
	auditedCall  = AuditedCall
	recordedCall = RecordedCall
)

const testDoc = TestDoc

// testAuditPages: an engine that reads its log in pages
// ([store.AuditPager], optional) gives exactly what [store.Store.Audit]
// gives, page by page, and [store.EachAudit] walks the whole log across
// page boundaries, whether or not the engine pages.
func testAuditPages(t *testing.T, openTest Opener) {
	s := openTest(t)
	run, _ := newRun(t, s)
	other, _ := newRun(t, s)
	n := store.AuditPageSize + 3 // more than one page
	mustTx(t, s, func(tx store.Tx) error {
		for i := range n {
			if err := appendRec(run, i)(tx); err != nil {
				return err
			}
			if err := appendRec(other, i)(tx); err != nil {
				return err
			}
		}
		return nil
	})
	all, err := s.Audit(bg, run)
	if err != nil || len(all) < n {
		t.Fatalf("Audit = %d records, %v; want at least %d", len(all), err, n)
	}
	var walked []audit.Record
	if err := store.EachAudit(bg, s, run, func(r audit.Record) error {
		walked = append(walked, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(walked, all) {
		t.Fatalf("EachAudit walked %d records, Audit returned %d, or they differ", len(walked), len(all))
	}
	stop := errors.New("stop")
	calls := 0
	if err := store.EachAudit(bg, s, run, func(audit.Record) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("EachAudit with fn failing = %v after %d calls, want fn's error after 1", err, calls)
	}
	p, ok := s.(store.AuditPager)
	if !ok {
		t.Skipf("the engine (%T) does not read its log in pages", s)
	}
	for _, limit := range []int{1, 7, len(all), len(all) + 1} {
		var got []audit.Record
		var after int64
		for {
			page, err := p.AuditPage(bg, run, after, limit)
			if err != nil {
				t.Fatalf("AuditPage(after %d, limit %d): %v", after, limit, err)
			}
			if len(page) > limit {
				t.Fatalf("AuditPage(after %d, limit %d) = %d records", after, limit, len(page))
			}
			got = append(got, page...)
			if len(page) < limit {
				break
			}
			after = page[len(page)-1].Seq
		}
		if !reflect.DeepEqual(got, all) {
			t.Fatalf("pages of %d: %d records, Audit %d, or they differ", limit, len(got), len(all))
		}
	}
	if page, err := p.AuditPage(bg, run, all[len(all)-1].Seq, 10); err != nil || len(page) != 0 {
		t.Fatalf("AuditPage past the end = %d records, %v; want none", len(page), err)
	}
	if page, err := p.AuditPage(bg, "run_none", 0, 10); err != nil || len(page) != 0 {
		t.Fatalf("AuditPage of a run with no log = %d records, %v; want none", len(page), err)
	}
	if _, err := p.AuditPage(bg, run, 0, 0); err == nil {
		t.Fatal("AuditPage with limit 0 did not fail")
	}
}

// testCallPages: an engine that reads a run's calls in pages
// ([store.CallPager], optional) gives, for one step attempt, exactly the
// calls [store.Store.Calls] gives for it (without their times), in index order, page by page
// across page boundaries, and counts the run's calls of every step; other
// runs' and other steps' calls are not in its pages.
func testCallPages(t *testing.T, openTest Opener) {
	s := openTest(t)
	p, ok := store.As[store.CallPager](s)
	if !ok {
		t.Skipf("the engine (%T) does not read its calls in pages", s)
	}
	run, attempt := newRun(t, s)
	other, otherAttempt := newRun(t, s)
	n := store.CallPageSize + 3 // more than one page
	mustTx(t, s, func(tx store.Tx) error {
		for i := range n {
			if _, err := auditedCall(tx, run, "work", attempt, "records.read", fmt.Sprintf(`{"i":%d}`, i)); err != nil {
				return err
			}
			if i%100 == 0 {
				if _, err := auditedCall(tx, other, "work", otherAttempt, "records.read", fmt.Sprintf(`{"o":%d}`, i)); err != nil {
					return err
				}
			}
		}
		if err := tx.FinishStep(run, "work", attempt, store.StepDone, jsontext.Value(`{}`), ""); err != nil {
			return err
		}
		next, err := tx.StartStep(run, "review")
		if err != nil {
			return err
		}
		for i := range 4 {
			if _, err := auditedCall(tx, run, "review", next, "records.read", fmt.Sprintf(`{"r":%d}`, i)); err != nil {
				return err
			}
		}
		return nil
	})
	want, err := s.Calls(bg, run, store.CallFilter{Step: "work", Attempt: attempt})
	if err != nil || len(want) != n {
		t.Fatalf("Calls = %d calls, %v; want %d", len(want), err, n)
	}
	for i := range want {
		if want[i].Started.IsZero() || want[i].Finished.IsZero() {
			t.Fatalf("Calls gave call %d without its times", i)
		}
		want[i].Started, want[i].Finished = time.Time{}, time.Time{} // a page does not read them
	}
	for _, limit := range []int{1, 7, n, n + 1} {
		var got []store.Call
		after := -1
		for pages := 0; ; pages++ {
			if pages > n+1 {
				t.Fatalf("pages of %d: the read does not end", limit)
			}
			page, err := p.CallPage(bg, run, "work", attempt, after, limit)
			if err != nil {
				t.Fatalf("CallPage(after %d, limit %d): %v", after, limit, err)
			}
			if len(page) > limit {
				t.Fatalf("CallPage(after %d, limit %d) = %d calls", after, limit, len(page))
			}
			got = append(got, page...)
			if len(page) < limit {
				break
			}
			after = page[len(page)-1].Index
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("pages of %d: %d calls, Calls %d, or they differ", limit, len(got), len(want))
		}
	}
	if page, err := p.CallPage(bg, run, "work", attempt, n-1, 10); err != nil || len(page) != 0 {
		t.Fatalf("CallPage past the end = %d calls, %v; want none", len(page), err)
	}
	if page, err := p.CallPage(bg, run, "work", attempt+1, -1, 10); err != nil || len(page) != 0 {
		t.Fatalf("CallPage of an attempt with no calls = %d calls, %v; want none", len(page), err)
	}
	if page, err := p.CallPage(bg, run, "review", 1, -1, 10); err != nil || len(page) != 4 || page[0].Step != "review" {
		t.Fatalf("CallPage of the second step = %d calls, %v; want its 4", len(page), err)
	}
	if page, err := p.CallPage(bg, "run_none", "work", 1, -1, 10); err != nil || len(page) != 0 {
		t.Fatalf("CallPage of a run with no calls = %d calls, %v; want none", len(page), err)
	}
	if _, err := p.CallPage(bg, run, "work", attempt, -1, 0); err == nil {
		t.Fatal("CallPage with limit 0 did not fail")
	}
	for r, want := range map[string]int{run: n + 4, other: (n + 99) / 100, "run_none": 0} {
		if got, err := p.CallCount(bg, r); err != nil || got != want {
			t.Errorf("CallCount(%s) = %d, %v; want %d", r, got, err, want)
		}
	}
}
