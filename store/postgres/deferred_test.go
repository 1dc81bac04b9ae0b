package postgres_test

import (
	"errors"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// TestDeferredChecks: the writes that go with COMMIT are checked in the
// server. A call's outcome recorded for a call in the wrong state, or for
// no call, in the same transaction as audit records (one statement), or
// alone, fails the whole Tx with the sentinel SQLite gives, and nothing of
// it is kept.
func TestDeferredChecks(t *testing.T) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	before, _ := s.Audit(bg, run)
	for name, tc := range map[string]struct {
		index  int // -1: the call just started (refused, so in the wrong state)
		append bool
		want   error
	}{
		"wrong state with records":  {-1, true, store.ErrState},
		"wrong state alone":         {-1, false, store.ErrState},
		"no such call with records": {99, true, store.ErrNotFound},
		"no such call alone":        {99, false, store.ErrNotFound},
	} {
		err := s.Tx(bg, func(tx store.Tx) error {
			c, err := tx.StartCall(store.Call{CallKey: store.CallKey{Run: run, Step: "work", Attempt: attempt}, Tool: "t",
				Decision: store.DecisionRefused, Reason: "no"})
			if err != nil {
				return err
			}
			k := c.CallKey
			if tc.index >= 0 {
				k.Index = tc.index
			}
			if tc.append {
				if _, err := tx.Append(audit.Record{Run: run, Kind: "call.refused", Tool: "t"}); err != nil {
					return err
				}
			}
			if err := tx.FinishCall(k, store.CallSucceeded, jsontext.Value(`{}`), ""); err != nil {
				return err
			}
			if tc.append {
				_, err = tx.Append(audit.Record{Run: run, Kind: "call.succeeded", Tool: "t"})
			}
			return err
		})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if cs, _ := s.Calls(bg, run, store.CallFilter{}); len(cs) != 0 {
		t.Errorf("%d calls kept", len(cs))
	}
	if recs, _ := s.Audit(bg, run); len(recs) != len(before) {
		t.Errorf("%d records, want %d", len(recs), len(before))
	}
	if probs, err := s.VerifyAudit(bg, run); err != nil || len(probs) != 0 {
		t.Errorf("VerifyAudit = %v, %v", probs, err)
	}
}
