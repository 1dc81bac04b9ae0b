package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// testClaimAndFence: a claim moves the owner epoch up by one; a
// transaction fenced on the owner and epoch it has commits, one fenced
// on an older epoch or another owner fails with ErrFenced and keeps
// nothing, also when its write came before the Fence call or the
// transaction never touched the run otherwise.
func testClaimAndFence(t *testing.T, openTest Opener) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	if r, err := s.GetRun(context.Background(), run); err != nil || r.Owner != "" || r.OwnerEpoch != 0 {
		t.Fatalf("new run: owner %q epoch %d (%v), want none and 0", r.Owner, r.OwnerEpoch, err)
	}
	claim := func(owner string) int64 {
		t.Helper()
		var e int64
		mustTx(t, s, func(tx store.Tx) error {
			var err error
			e, err = tx.ClaimRun(run, owner)
			return err
		})
		return e
	}
	if e := claim("rep_a"); e != 1 {
		t.Fatalf("first claim: epoch %d, want 1", e)
	}
	fenced := func(owner string, epoch int64, fenceFirst bool) error {
		return s.Tx(context.Background(), func(tx store.Tx) error {
			if fenceFirst {
				if err := tx.Fence(run, owner, epoch); err != nil {
					return err
				}
			}
			if _, err := tx.Append(audit.Record{Run: run, Kind: "step.note", Step: "work"}); err != nil {
				return err
			}
			if !fenceFirst {
				return tx.Fence(run, owner, epoch)
			}
			return nil
		})
	}
	if err := fenced("rep_a", 1, true); err != nil {
		t.Fatalf("fenced on the current owner: %v", err)
	}
	if e := claim("rep_b"); e != 2 {
		t.Fatalf("second claim: epoch %d, want 2", e)
	}
	seq, _, _ := s.AuditHead(context.Background(), run)
	for _, c := range []struct {
		owner string
		epoch int64
		first bool
	}{{"rep_a", 1, true}, {"rep_a", 1, false}, {"rep_b", 1, true}, {"rep_a", 2, false}} {
		if err := fenced(c.owner, c.epoch, c.first); !errors.Is(err, store.ErrFenced) {
			t.Errorf("fenced on %s@%d (fence first: %v) after rep_b claimed at 2: %v, want ErrFenced", c.owner, c.epoch, c.first, err)
		}
	}
	// A fenced transaction that writes another run only still checks.
	other, _ := newRun(t, s)
	err := s.Tx(context.Background(), func(tx store.Tx) error {
		if err := tx.Fence(run, "rep_a", 1); err != nil {
			return err
		}
		_, err := tx.Append(audit.Record{Run: other, Kind: "step.note"})
		return err
	})
	if !errors.Is(err, store.ErrFenced) {
		t.Errorf("fenced transaction writing another run: %v, want ErrFenced", err)
	}
	if got, _, _ := s.AuditHead(context.Background(), run); got != seq {
		t.Errorf("audit head %d after fenced transactions, want %d (nothing kept)", got, seq)
	}
	if err := fenced("rep_b", 2, false); err != nil {
		t.Errorf("fenced on the new owner: %v", err)
	}
	r, err := s.GetRun(context.Background(), run)
	if err != nil || r.Owner != "rep_b" || r.OwnerEpoch != 2 {
		t.Errorf("run: owner %q epoch %d (%v), want rep_b and 2", r.Owner, r.OwnerEpoch, err)
	}
	_ = attempt
}
