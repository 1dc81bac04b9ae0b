//go:build unix

package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/openplaybook/openplaybook/store"
)

func TestLockRunIsExclusive(t *testing.T) {
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

// TestLockRunFollowsTheFile: a store opened through a symlink meets the
// same lock, since the lock is on the file, not on its name.
func TestLockRunFollowsTheFile(t *testing.T) {
	s := openTest(t)
	unlock, err := s.LockRun("run_a")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Symlink(s.Path(), link); err != nil {
		t.Fatal(err)
	}
	other, err := OpenWith(link, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.LockRun("run_a"); !errors.Is(err, store.ErrRunBusy) {
		t.Fatalf("lock through a symlink: %v, want ErrRunBusy", err)
	}
}
