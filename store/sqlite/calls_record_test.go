package sqlite

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/store"

	"github.com/go-json-experiment/json/jsontext"
)

// RecordCall's row is the row StartCall and FinishCall make (or StartCall
// alone, refused).
func TestRecordCallEqualsStartFinish(t *testing.T) {
	s := openTest(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123, time.UTC)
	s.SetClock(func() time.Time { return at })
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

func TestRecordCallChecks(t *testing.T) {
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
func TestRecordCallsEqualsRecordCall(t *testing.T) {
	s := openTest(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123, time.UTC)
	s.SetClock(func() time.Time { return at })
	runA, attA := newRun(t, s)
	runB, attB := newRun(t, s)
	const n = 2*maxCallRows + 3
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

func TestRecordCallsChecks(t *testing.T) {
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
