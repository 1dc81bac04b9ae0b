//go:build unix

package store

import (
	"errors"
	"testing"
)

func TestLockRunIsExclusive(t *testing.T) {
	s := openTest(t)
	unlock, err := s.LockRun("run_a")
	if err != nil {
		t.Fatal(err)
	}
	// A second holder in this process opens its own file description, so
	// flock refuses it just as it would another process.
	if _, err := s.LockRun("run_a"); !errors.Is(err, ErrRunBusy) {
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
	if _, err := s.LockRun("../x"); err == nil {
		t.Error("a path-like run id was accepted")
	}
}
