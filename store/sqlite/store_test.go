package sqlite

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/store"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
)

func TestOpenTwice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s1, err := OpenWith(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	run, _ := newRun(t, s1)
	// A second store on the same file while the first is open, then again
	// after both closed: the schema is created once and kept.
	s2, err := OpenWith(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.GetRun(bg, run); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	s1.Close()
	s3 := openAt(t, path, nil)
	r, err := s3.GetRun(bg, run)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Document) != testDoc {
		t.Errorf("document = %q", r.Document)
	}
	var versions []int
	rows, err := s3.rdb.Query(`SELECT version FROM schema_version ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v int
		rows.Scan(&v)
		versions = append(versions, v)
	}
	rows.Close()
	if fmt.Sprint(versions) != fmt.Sprint([]int{1, 2, 3}) || SchemaVersion != 3 {
		t.Errorf("schema versions = %v, SchemaVersion %d", versions, SchemaVersion)
	}
	for _, p := range []string{"journal_mode", "synchronous", "foreign_keys", "busy_timeout"} {
		var v string
		if err := s3.rdb.QueryRow("PRAGMA " + p).Scan(&v); err != nil {
			t.Fatal(err)
		}
		t.Logf("read pool %s = %s", p, v)
	}
	var jm, sync, fk string
	mustTx(t, s3, func(tx store.Tx) error {
		tx.(*Tx).row("PRAGMA journal_mode").Scan(&jm)
		tx.(*Tx).row("PRAGMA synchronous").Scan(&sync)
		return tx.(*Tx).row("PRAGMA foreign_keys").Scan(&fk)
	})
	if jm != "wal" || sync != "2" || fk != "1" {
		t.Errorf("writer: journal_mode %s, synchronous %s (2 is FULL), foreign_keys %s", jm, sync, fk)
	}
}

func TestOpenNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := OpenWith(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_version VALUES (99, 'x')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := OpenWith(path, nil); err == nil || !strings.Contains(err.Error(), "schema version 99") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open = %v, want an error about schema version 99", err)
	}
}

func TestOpenOptions(t *testing.T) {
	if _, err := OpenWith(filepath.Join(t.TempDir(), "x.db"), &Options{Synchronous: "OFF"}); err == nil {
		t.Error("synchronous OFF accepted")
	}
	if _, err := OpenWith(":memory:", nil); err == nil {
		t.Error(":memory: accepted")
	}
	s := openAt(t, filepath.Join(t.TempDir(), "n.db"), &Options{Synchronous: "NORMAL"})
	var v string
	mustTx(t, s, func(tx store.Tx) error { return tx.(*Tx).row("PRAGMA synchronous").Scan(&v) })
	if v != "1" {
		t.Errorf("synchronous = %s, want 1 (NORMAL)", v)
	}
}

func TestRunLifecycle(t *testing.T) {
	s := openTest(t)
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { return clock })
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

func TestCallNeedsRunningStep(t *testing.T) {
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
func TestTxAtomic(t *testing.T) {
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

func TestTxAfterClose(t *testing.T) {
	s := openTest(t)
	s.Close()
	if err := s.Tx(bg, func(store.Tx) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Tx after Close = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestTxKeptAfterReturn(t *testing.T) {
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

func TestOutcomeUnknown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := OpenWith(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	run, attempt := newRun(t, s)
	var c store.Call
	mustTx(t, s, func(tx store.Tx) error {
		c, err = startCall(tx, run, "work", attempt, "stripe.refund", `{"charge":"ch_1"}`)
		return err
	})
	s.Close() // the process "dies" while the refund runs

	s = openAt(t, path, nil)
	started, err := s.Calls(bg, run, store.CallFilter{States: []store.CallState{store.CallStarted}})
	if err != nil || len(started) != 1 || started[0].CallKey != c.CallKey {
		t.Fatalf("started calls = %+v, %v", started, err)
	}
	var a store.Approval
	mustTx(t, s, func(tx store.Tx) error {
		a, err = tx.MarkOutcomeUnknown(c.CallKey, "process ended before the outcome was recorded")
		return err
	})
	if a.Kind != store.KindOutcomeUnknown || a.Status != store.ApprovalPending || a.Call == nil || *a.Call != c.CallKey ||
		a.Tool != c.Tool || a.ArgsDigest != c.ArgsDigest || a.DefDigest != c.DefDigest || !a.Expires.IsZero() {
		t.Errorf("decision = %+v", a)
	}
	// Nothing may re-run it before a person decides.
	mustTx(t, s, func(tx store.Tx) error {
		if _, ok, err := tx.ConsumeApproval(run, "work", c.Tool, c.DefDigest, c.ArgsDigest); ok || err != nil {
			t.Errorf("consumed an undecided outcome-unknown decision: %v %v", ok, err)
		}
		return nil
	})
	// Marking it again is a state error.
	err = s.Tx(bg, func(tx store.Tx) error { _, err := tx.MarkOutcomeUnknown(c.CallKey, ""); return err })
	if !errors.Is(err, store.ErrState) {
		t.Errorf("marking twice: %v", err)
	}
	pend, _ := s.PendingApprovals(bg, run)
	if len(pend) != 1 || pend[0].ID != a.ID {
		t.Errorf("pending = %+v", pend)
	}
	mustTx(t, s, func(tx store.Tx) error {
		_, err := tx.DecideApproval(a.ID, true, "refund not in Stripe: retry", "ana")
		return err
	})
	n := 0
	for range 3 {
		mustTx(t, s, func(tx store.Tx) error {
			if _, ok, err := tx.ConsumeApproval(run, "work", c.Tool, c.DefDigest, c.ArgsDigest); ok {
				n++
			} else if err != nil {
				return err
			}
			return nil
		})
	}
	if n != 1 {
		t.Errorf("the retry was let through %d times", n)
	}
	calls, _ := s.Calls(bg, run, store.CallFilter{})
	if len(calls) != 1 || calls[0].State != store.CallOutcomeUnknown {
		t.Errorf("calls = %+v", calls)
	}
}

func TestDump(t *testing.T) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	const secret = "sk_test_DUMPME\x00\x01"
	mustTx(t, s, func(tx store.Tx) error {
		_, err := auditedCall(tx, run, "work", attempt, "tool"+secret, `{"k":"v"}`)
		return err
	})
	if err := s.SeedCustomers(bg, []store.Customer{{ID: "c1", Name: "Ana", Email: "ana@example.com"}}); err != nil {
		t.Fatal(err)
	}
	d, err := s.Dump(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"runs\tid=" + run, "calls\t", "audit\t", "tool=tool" + secret, "customers\tid=c1", "schema_version\t", testDoc} {
		if !bytes.Contains(d, []byte(want)) {
			t.Errorf("dump lacks %q", want)
		}
	}
	if testing.Verbose() {
		t.Logf("%s", d)
	}
}
