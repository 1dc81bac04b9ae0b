package sqlite

import (
	"errors"
	"testing"

	"github.com/openplaybook/openplaybook/store"
)

// TestCommitFault: an injected commit failure fails the Tx and the queued
// functions committed with it, keeps nothing of them, and once removed
// the store commits again.
func TestCommitFault(t *testing.T) {
	s := openTest(t)
	full := errors.New("disk full (injected)")
	s.SetCommitFault(func() error { return full })
	q := s.Queue(bg, func(tx store.Tx) error {
		_, err := tx.CreateRun(store.Run{ID: "run_00000000000000a1", PlaybookID: "p", PlaybookVersion: "1", Document: []byte("{}")})
		return err
	})
	err := s.Tx(bg, func(tx store.Tx) error {
		_, err := tx.CreateRun(store.Run{ID: "run_00000000000000a2", PlaybookID: "p", PlaybookVersion: "1", Document: []byte("{}")})
		return err
	})
	if !errors.Is(err, full) || !errors.Is(q.Wait(), full) {
		t.Fatalf("under the fault: Tx %v, Queued %v; want both to fail with it", err, q.Wait())
	}
	if runs, err := s.ListRuns(bg); err != nil || len(runs) != 0 {
		t.Fatalf("runs after failed commits: %v %v", runs, err)
	}
	s.SetCommitFault(nil)
	if err := s.Tx(bg, func(tx store.Tx) error {
		_, err := tx.CreateRun(store.Run{ID: "run_00000000000000a3", PlaybookID: "p", PlaybookVersion: "1", Document: []byte("{}")})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if runs, err := s.ListRuns(bg); err != nil || len(runs) != 1 {
		t.Fatalf("runs after the fault was removed: %v %v", runs, err)
	}
}
