//go:build !unix

package sqlite

// LockRun is a no-op where flock(2) is not available: there, run one
// process per run yourself.
func (s *Store) LockRun(run string) (unlock func(), err error) { return func() {}, nil }
