package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/store"
)

// lockTimeout bounds connecting for a run lock and asking for it.
const lockTimeout = 30 * time.Second

// LockRun takes the exclusive right to execute run, across every process
// using the same database and schema: a session advisory lock
// (pg_try_advisory_lock) on a connection of its own, opened for it and
// held, outside the pool, until unlock is called (which releases the lock
// with pg_advisory_unlock, then closes the connection) or the
// store is closed. Another holder (in this process or another) makes it
// return [store.ErrRunBusy] at once; a server that cannot be reached is
// another error. The lock lives as long as that connection: when the
// server ends it (a restart, pg_terminate_backend, a network cut that
// outlasts the keepalives), the lock is released while the holder may go
// on; see docs/store.md.
func (s *Store) LockRun(run string) (func(), error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, store.ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
	defer cancel()
	cf := s.lockCf.Copy()
	idle := time.Duration(s.lockIdle.Load())
	if idle > 0 {
		cf.RuntimeParams["idle_session_timeout"] = fmt.Sprint(idle.Milliseconds())
	}
	conn, err := pgx.ConnectConfig(ctx, cf)
	if err != nil {
		return nil, fmt.Errorf("store: locking run %s: connecting: %w", run, redactErr(err))
	}
	key := lockKey("run", s.schema+"\x00"+run)
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("store: locking run %s: %w", run, err)
	}
	if !ok {
		conn.Close(context.Background())
		return nil, fmt.Errorf("%w (run %s)", store.ErrRunBusy, run)
	}
	s.locksMu.Lock()
	if s.locks == nil { // closed meanwhile
		s.locksMu.Unlock()
		conn.Close(context.Background())
		return nil, store.ErrClosed
	}
	mu := &sync.Mutex{} // the pinger's, unlock's and Close's use of conn
	s.locks[conn] = mu
	s.locksMu.Unlock()
	stop := make(chan struct{})
	if idle > 0 {
		go pingLock(conn, mu, idle, stop)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			s.locksMu.Lock()
			_, held := s.locks[conn]
			delete(s.locks, conn)
			s.locksMu.Unlock()
			if held { // Close no longer sees conn; the pinger may still use it
				mu.Lock()
				defer mu.Unlock()
				// Released before the connection closes: the server
				// handles a disconnect only later, and a lock still held
				// then would make the next LockRun of the run (resume
				// right after approve) see it busy. Close ends the
				// session, and the lock with it, should the unlock fail.
				ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
				conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key)
				cancel()
				conn.Close(context.Background())
			}
		})
	}, nil
}

// pingLock keeps a run lock's connection from its idle_session_timeout
// while the process runs: a process stopped longer loses the lock, and
// its writes are fenced by the owner epoch (docs/store.md, "Replicas").
// It stops at the first failure (the lock is gone then) or on stop.
func pingLock(conn *pgx.Conn, mu *sync.Mutex, idle time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(idle / 5)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		mu.Lock()
		select {
		case <-stop:
			mu.Unlock()
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), idle/2)
		_, err := conn.Exec(ctx, `SELECT 1`)
		cancel()
		mu.Unlock()
		if err != nil {
			return
		}
	}
}
