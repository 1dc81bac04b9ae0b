//go:build unix && !linux

package store

import "errors"

// ErrRunBusy is returned by [Store.LockRun] when another process holds the
// run.
var ErrRunBusy = errors.New("the run is being executed by another process")

// LockRun takes the exclusive right to execute run: one process at a time
// runs a run. See lockRunFile.
func (s *Store) LockRun(run string) (unlock func(), err error) { return s.lockRunFile(run) }
