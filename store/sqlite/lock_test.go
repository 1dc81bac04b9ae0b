//go:build unix

package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/openplaybook/openplaybook/store"
)

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
