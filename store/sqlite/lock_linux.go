//go:build linux

package sqlite

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"

	"github.com/openplaybook/openplaybook/store"

	"golang.org/x/sys/unix"
	sqlite "modernc.org/sqlite"
)

// lockBase is where run locks start in the database file's lock space:
// far above the bytes SQLite locks (around 1 GiB), and above any real
// file size; locking a range needs no data there.
const lockBase = 1 << 40

// LockRun takes the exclusive right to execute run: one process at a time
// runs a run, so two resumes can never both execute its calls.
//
// The lock is an open-file-description lock (fcntl F_OFD_SETLK, Linux) on
// one byte of the database file itself, chosen by a hash of the run id.
// It is tied to the file, not to the path that named it, so a symlink, a
// hard link or a bind mount of the same database meets the same lock. The
// kernel releases it when the process exits, however it exits, so a killed
// run never stays locked. It returns the function that releases it, or
// ErrRunBusy without waiting. (Two different runs whose ids hash alike,
// one chance in 2^32, would wait on each other.)
//
// When SQLite could not be switched to OFD locks (see [Open]), closing a
// second descriptor of the database would drop SQLite's own POSIX locks,
// so the lock is then an flock(2) file beside the database instead.
func (s *Store) LockRun(run string) (unlock func(), err error) {
	if run == "" {
		return nil, fmt.Errorf("store: %q is not a run id", run)
	}
	if !sqlite.OFDLockingEnabled() {
		return s.lockRunFile(run)
	}
	f, err := os.OpenFile(s.path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("store: locking run %s: %w", run, err)
	}
	h := fnv.New32a()
	h.Write([]byte(run))
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: lockBase + int64(h.Sum32()), Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		f.Close()
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return nil, store.ErrRunBusy
		}
		return nil, fmt.Errorf("store: locking run %s: %w", run, err)
	}
	return func() {
		lk.Type = unix.F_UNLCK
		_ = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
		f.Close()
	}, nil
}
