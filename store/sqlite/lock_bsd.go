//go:build unix && !linux

package sqlite

// LockRun takes the exclusive right to execute run: one process at a time
// runs a run. See lockRunFile.
func (s *Store) LockRun(run string) (unlock func(), err error) { return s.lockRunFile(run) }
