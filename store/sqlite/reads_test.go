package sqlite

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

// Reads through the cached statements are safe concurrently with writes
// and with each other, and with Close.
func TestReadStmtsConcurrent(t *testing.T) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				if g == 0 {
					mustTx(t, s, func(tx store.Tx) error {
						_, err := auditedCall(tx, run, "work", attempt, "note.add", fmt.Sprintf(`{"i":%d}`, i))
						return err
					})
					continue
				}
				if _, err := s.GetRun(bg, run); err != nil {
					t.Error(err)
				}
				if _, err := s.Calls(bg, run, store.CallFilter{States: []store.CallState{store.CallSucceeded}}); err != nil {
					t.Error(err)
				}
				if _, err := s.Steps(bg, run); err != nil {
					t.Error(err)
				}
				if _, err := s.Approvals(bg, run); err != nil {
					t.Error(err)
				}
				if _, err := s.VerifyAudit(bg, run); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if cs, err := s.Calls(bg, run, store.CallFilter{}); err != nil || len(cs) != 30 {
		t.Fatalf("%d calls, %v", len(cs), err)
	}
	s.reads.mu.Lock()
	n := len(s.reads.m)
	s.reads.mu.Unlock()
	if n == 0 {
		t.Error("no read statement was cached")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRun(bg, run); err == nil {
		t.Error("read after Close succeeded")
	}
}

// More read transactions than pool connections, each needing statements
// not cached yet: none may wait for a second connection.
func TestReadTxPoolExhaustion(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "store.db"), &Options{Readers: 2})
	run, _ := newRun(t, s)
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if _, err := s.VerifyAudit(bg, run); err != nil {
					t.Error(err)
				}
				if _, err := s.Audit(bg, run); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("reads deadlocked")
	}
}
