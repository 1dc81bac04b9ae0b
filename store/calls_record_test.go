package store

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// RecordCall's row is the row StartCall and FinishCall make (or StartCall
// alone, refused).
func TestRecordCallEqualsStartFinish(t *testing.T) {
	s := openTest(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123, time.UTC)
	s.Now = func() time.Time { return at }
	runA, attA := newRun(t, s)
	runB, attB := newRun(t, s)
	base := func(run string, attempt int, d Decision, reason string) Call {
		return Call{CallKey: CallKey{Run: run, Step: "work", Attempt: attempt}, Tool: "customer\x00get", DefDigest: digest("def"),
			Args: jsontext.Value(`{"id":"c1"}`), ArgsDigest: digest(`{"id":"c1"}`), Decision: d, Reason: reason, SideEffecting: false}
	}
	for _, tc := range []struct {
		state  CallState
		result jsontext.Value
		errTxt string
	}{
		{CallSucceeded, jsontext.Value(`{"name":"Ada"}`), ""},
		{CallFailed, nil, "no such customer"},
		{CallRefused, nil, ""},
	} {
		var ret Call
		mustTx(t, s, func(tx *Tx) error {
			if tc.state == CallRefused {
				_, err := tx.StartCall(base(runA, attA, DecisionRefused, "not allowed"))
				if err != nil {
					return err
				}
				c := base(runB, attB, DecisionRefused, "not allowed")
				c.State = CallRefused
				ret, err = tx.RecordCall(c)
				return err
			}
			c, err := tx.StartCall(base(runA, attA, DecisionAllowed, ""))
			if err != nil {
				return err
			}
			if err := tx.FinishCall(c.CallKey, tc.state, tc.result, tc.errTxt); err != nil {
				return err
			}
			r := base(runB, attB, DecisionAllowed, "")
			r.State, r.Result, r.Error = tc.state, tc.result, tc.errTxt
			ret, err = tx.RecordCall(r)
			return err
		})
		ca, err := s.Calls(bg, runA, CallFilter{})
		if err != nil {
			t.Fatal(err)
		}
		cb, err := s.Calls(bg, runB, CallFilter{})
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
	call := func(run string, attempt int, st CallState, d Decision) Call {
		return Call{CallKey: CallKey{Run: run, Step: "work", Attempt: attempt}, Tool: "t", State: st, Decision: d}
	}
	rec := func(c Call) (Call, error) {
		var out Call
		err := s.Tx(bg, func(tx *Tx) error {
			var err error
			out, err = tx.RecordCall(c)
			return err
		})
		return out, err
	}
	// Index follows StartCall's.
	mustTx(t, s, func(tx *Tx) error {
		_, err := tx.StartCall(call(run, attempt, "", DecisionAllowed))
		return err
	})
	c, err := rec(call(run, attempt, CallSucceeded, DecisionAllowed))
	if err != nil || c.Index != 1 || c.Started.IsZero() || !c.Finished.Equal(c.Started) {
		t.Fatalf("RecordCall = %+v, %v", c, err)
	}
	started := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c2 := call(run, attempt, CallFailed, DecisionAllowed)
	c2.Started, c2.Finished = started, started.Add(time.Second)
	if c, err := rec(c2); err != nil || c.Index != 2 || !c.Started.Equal(started) || !c.Finished.Equal(started.Add(time.Second)) {
		t.Fatalf("RecordCall = %+v, %v", c, err)
	}
	c2.Finished = started.Add(-time.Second)
	if _, err := rec(c2); err == nil {
		t.Error("recorded a call that finished before it started")
	}
	for _, bad := range []Call{
		call(run, attempt, CallStarted, DecisionAllowed),
		call(run, attempt, CallWaiting, DecisionWaiting),
		call(run, attempt, CallSucceeded, DecisionRefused),
		call(run, attempt, CallRefused, DecisionAllowed),
		call(run, attempt, CallOutcomeUnknown, DecisionAllowed),
	} {
		if _, err := rec(bad); err == nil {
			t.Errorf("recorded %s with %s", bad.State, bad.Decision)
		}
	}
	if _, err := rec(call("run_none", 1, CallSucceeded, DecisionAllowed)); !errors.Is(err, ErrNotFound) {
		t.Errorf("no run: %v", err)
	}
	if _, err := rec(call(run, attempt+1, CallSucceeded, DecisionAllowed)); !errors.Is(err, ErrNotFound) {
		t.Errorf("no attempt: %v", err)
	}
	mustTx(t, s, func(tx *Tx) error { return tx.SetStepWaiting(run, "work", attempt) })
	if _, err := rec(call(run, attempt, CallSucceeded, DecisionAllowed)); !errors.Is(err, ErrState) {
		t.Errorf("waiting step: %v", err)
	}
	mustTx(t, s, func(tx *Tx) error { return tx.SetStepRunning(run, "work", attempt) })
	mustTx(t, s, func(tx *Tx) error { return tx.SetRunStatus(run, RunCompleted, "") })
	if _, err := rec(call(run, attempt, CallSucceeded, DecisionAllowed)); !errors.Is(err, ErrState) {
		t.Errorf("ended run: %v", err)
	}
	if cs, _ := s.Calls(bg, run, CallFilter{}); len(cs) != 3 {
		t.Errorf("%d calls, want 3", len(cs))
	}
}
