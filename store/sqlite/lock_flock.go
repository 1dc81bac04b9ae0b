//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/openplaybook/openplaybook/store"
)

// lockRunFile is [Store.LockRun] by flock(2) on a file next to the
// database's real path (<db>.locks/<run>.lock, symlinks resolved): the
// kernel releases it when the process exits, however it exits. It is used
// where open-file-description locks on the database itself are not.
// Hard links or bind mounts of the database under other names are not
// covered: run one store path per database.
func (s *Store) lockRunFile(run string) (unlock func(), err error) {
	if run == "" || strings.ContainsAny(run, `/\`) || strings.HasPrefix(run, ".") {
		return nil, fmt.Errorf("store: %q is not a run id", run)
	}
	real, err := filepath.EvalSymlinks(s.path)
	if err != nil {
		real = s.path
	}
	dir := real + ".locks"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: locking run %s: %w", run, err)
	}
	p := filepath.Join(dir, run+".lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: locking run %s: %w", run, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(p)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if pid := strings.TrimSpace(string(holder)); pid != "" {
				return nil, fmt.Errorf("%w (pid %s)", store.ErrRunBusy, pid)
			}
			return nil, store.ErrRunBusy
		}
		return nil, fmt.Errorf("store: locking run %s: %w", run, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		_ = f.Truncate(0)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
