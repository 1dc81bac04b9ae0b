//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrRunBusy is returned by [Store.LockRun] when another process holds the
// run.
var ErrRunBusy = errors.New("the run is being executed by another process")

// LockRun takes the exclusive right to execute run: one process at a time
// runs a run, so two resumes can never both execute its calls. The lock is
// an flock(2) on a file next to the database (<db>.locks/<run>.lock): the
// kernel releases it when the process exits, however it exits, so a killed
// run never stays locked. It returns the function that releases it, or
// ErrRunBusy (with the holder's pid when known) without waiting.
func (s *Store) LockRun(run string) (unlock func(), err error) {
	if run == "" || strings.ContainsAny(run, `/\`) || strings.HasPrefix(run, ".") {
		return nil, fmt.Errorf("store: %q is not a run id", run)
	}
	dir := s.path + ".locks"
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
				return nil, fmt.Errorf("%w (pid %s)", ErrRunBusy, pid)
			}
			return nil, ErrRunBusy
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
