package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/store"
)

// Options configure [Open]. A nil *Options means the defaults.
type Options struct {
	// Synchronous is the durability of a commit, as store/sqlite names
	// it: "FULL" (the zero value means FULL) is synchronous_commit=on, so
	// a Tx returns only once the server has flushed the commit to its
	// WAL on disk (and to the synchronous standbys that
	// synchronous_standby_names names): an acknowledged change survives a
	// crash of the server and of its machine. "NORMAL" is
	// synchronous_commit=off: a commit is acknowledged before the WAL
	// flush, so a crash of the server (kill -9 of its processes, a power
	// cut) loses the changes acknowledged in about the last
	// 3 × wal_writer_delay (600 ms by default); a crash of this process
	// alone loses nothing acknowledged. Other values are errors.
	Synchronous string
	// MaxConns is the most connections of the pool, which the
	// transactions (one connection each while they run) and the store's
	// reads share; run locks ([Store.LockRun]) hold connections of their
	// own outside it. Zero means 40.
	MaxConns int32
	// Now is the clock every timestamp is recorded with and expiry is
	// compared with; nil means time.Now. See [Store.SetClock].
	Now func() time.Time
}

// Store is an open PostgreSQL store. It is safe for concurrent use.
type Store struct {
	clock atomic.Pointer[func() time.Time] // nil: time.Now

	pool   *pgxpool.Pool
	lockCf *pgx.ConnConfig // for LockRun's connections
	schema string          // current_schema() of the pool's connections

	mu     sync.Mutex
	queue  []*request     // queued functions not yet taken by the queue worker, in order
	tail   *request       // the last request handed to Queue (nil: none yet)
	seq    int64          // requests handed to Queue so far
	closed bool           // Close was called
	active sync.WaitGroup // Tx calls and the queue worker in flight
	qfails []*request     // failed queued functions not yet collected by a Flush
	wake   chan struct{}
	done   chan struct{} // closed when the queue worker has stopped

	locksMu sync.Mutex
	locks   map[*pgx.Conn]*sync.Mutex // LockRun's connections (and the mutex of their use), closed by Close

	waker waker // see Wake

	lockIdle atomic.Int64 // a joined replica's liveness (nanoseconds): run locks expire with it; 0: never

	closeOnce sync.Once
	closeErr  error
}

// Compile-time checks that the engine keeps the contract and holds the
// built-in primitives' tables.
var (
	_ store.Store    = (*Store)(nil)
	_ store.Tx       = (*tx)(nil)
	_ store.Queued   = (*queued)(nil)
	_ builtin.Data   = (*Store)(nil)
	_ builtin.DataTx = (*tx)(nil)
)

// Open connects to the PostgreSQL server at url (a postgres:// or
// postgresql:// URL, or a libpq key=value string, as pgx accepts them),
// creates the schema or migrates it to [SchemaVersion] when needed (in
// the connection's current schema: the first of its search_path), under an
// advisory transaction lock, and checks its version. A schema newer than
// this build, or one older than it when the role may not change it, is an
// error; so is a server that cannot be reached within ctx. opt nil means
// the defaults.
func Open(ctx context.Context, url string, opt *Options) (*Store, error) {
	var o Options
	if opt != nil {
		o = *opt
	}
	syncCommit := "on"
	switch o.Synchronous {
	case "", "FULL":
	case "NORMAL":
		syncCommit = "off"
	default:
		return nil, fmt.Errorf("store: synchronous %q: want FULL or NORMAL", o.Synchronous)
	}
	if o.MaxConns < 0 {
		return nil, fmt.Errorf("store: MaxConns %d: want 0 (the default, 40) or more", o.MaxConns)
	}
	if o.MaxConns == 0 {
		o.MaxConns = 40
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store: the PostgreSQL URL: %w", redactErr(err))
	}
	cfg.MaxConns = o.MaxConns
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = syncCommit
	cfg.ConnConfig.RuntimeParams["application_name"] = "openplaybook"
	// The store's statements are prepared once per connection (pgx's
	// statement cache) and are index lookups whichever the values: a
	// generic plan is as good as a custom one, and planning each
	// execution again costs more than running it.
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	lockCf := cfg.ConnConfig.Copy()

	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("store: connecting to PostgreSQL: %w", redactErr(err))
	}
	schema := schemaOf(ctx, conn)
	_, err = migrate(ctx, conn)
	conn.Close(context.Background())
	if err != nil {
		return nil, fmt.Errorf("store: PostgreSQL schema %q: %w", schema, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connecting to PostgreSQL: %w", redactErr(err))
	}
	s := &Store{
		pool:   pool,
		lockCf: lockCf,
		schema: schema,
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		locks:  map[*pgx.Conn]*sync.Mutex{},
	}
	if o.Now != nil {
		s.SetClock(o.Now)
	}
	go s.worker()
	return s, nil
}

// redactErr keeps a connection error from repeating the URL's password:
// pgx's parse and connect errors name the host, user and database only,
// so it passes them through; it exists so that a later pgx that quotes
// more is caught in one place.
func redactErr(err error) error { return err }

// SchemaVersion returns the version of the schema the store's connections
// see (0 before the first migration).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	return readVersion(ctx, s.pool)
}

// Close answers everything handed to the store before it (waiting Tx
// calls and queued functions: each is committed or fails), then closes the
// pool and the connections of the run locks still held (which releases
// them). Tx, Queue and Flush after Close return [store.ErrClosed]. Closing
// twice is not an error.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.signal()
		<-s.done
		s.active.Wait()
		s.pool.Close()
		s.locksMu.Lock()
		var errs []error
		for c, mu := range s.locks {
			mu.Lock()
			// The run lock is released before its connection closes, as
			// unlock does: the server handles a disconnect only later.
			ctx, cancel := context.WithTimeout(context.Background(), lockTimeout)
			c.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
			cancel()
			errs = append(errs, c.Close(context.Background()))
			mu.Unlock()
		}
		s.locks = nil
		s.locksMu.Unlock()
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Now returns the store's current time: time.Now, or the clock given to
// [Store.SetClock] (or [Options.Now]).
func (s *Store) Now() time.Time {
	if f := s.clock.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

// SetClock replaces the clock the store records every timestamp with (and
// compares expiry with); nil restores time.Now. It may be called at any
// time, from any goroutine (storetest.Clock).
func (s *Store) SetClock(now func() time.Time) {
	if now == nil {
		s.clock.Store(nil)
		return
	}
	s.clock.Store(&now)
}

// A request is one function handed to Tx or Queue (or a Flush barrier,
// fn nil). Its state: queued until it starts or its caller gives up on it.
const (
	reqQueued int32 = iota
	reqStarted
	reqCancelled
)

type request struct {
	ctx    context.Context
	fn     func(store.Tx) error
	queued bool
	seq    int64
	state  atomic.Int32
	waited atomic.Bool
	err    error
	done   chan struct{}
}

// Tx runs fn in one PostgreSQL transaction on a connection of the pool
// and commits it; it returns fn's error (the transaction is rolled back),
// a commit error (nothing is kept; when the connection was lost during
// COMMIT, whether it committed is not known, and the error says so), or
// nil once the commit is durable as [Options.Synchronous] says.
//
// Transactions run concurrently, each on its own connection; those that
// write the same run take turns on the run's row lock (see tx.go). fn
// runs after every function handed to [Store.Queue] before Tx was called
// has committed or failed. A deadlock or serialization failure is
// returned as an error; nothing is retried. ctx is checked until fn
// starts; once it has, Tx waits for the outcome. A panic in fn is
// returned as an error.
func (s *Store) Tx(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	prev := s.tail
	s.active.Add(1)
	s.mu.Unlock()
	defer s.active.Done()
	if prev != nil {
		select {
		case <-prev.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("store: acquiring a connection: %w", err)
	}
	return s.runTx(conn, fn)
}

// runTx runs fn in a transaction on conn, commits it and releases conn.
func (s *Store) runTx(conn *pgxpool.Conn, fn func(store.Tx) error) error {
	t := newTx(s, conn)
	err := call(fn, t)
	if err == nil {
		err = t.commit()
	} else {
		t.rollback()
	}
	t.done = true
	t.release()
	return err
}

func call(fn func(store.Tx) error, t *tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store: panic in transaction function: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(t)
}

// queued is a function handed to [Store.Queue].
type queued struct{ r *request }

// Queue hands fn to the store's queue worker and returns at once. The
// worker runs the queued functions one after another, in the order they
// were queued, each in a PostgreSQL transaction of its own; a Tx or
// Flush called after Queue returned waits for fn's outcome first. Until
// it is acknowledged (its Wait, or such a Tx or Flush, returned), a queued
// change exists only in this process's memory. ctx is checked until fn
// starts; after Close, the Queued fails with [store.ErrClosed].
func (s *Store) Queue(ctx context.Context, fn func(store.Tx) error) store.Queued {
	r := &request{ctx: ctx, fn: fn, queued: true, done: make(chan struct{})}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		s.failEarly(r, store.ErrClosed)
	case ctx.Err() != nil:
		s.mu.Unlock()
		s.failEarly(r, ctx.Err())
	default:
		s.seq++
		r.seq = s.seq
		s.queue = append(s.queue, r)
		s.tail = r
		s.mu.Unlock()
		s.signal()
	}
	return &queued{r}
}

// failEarly fails a queued function that never reached the worker.
func (s *Store) failEarly(r *request, err error) {
	r.err = err
	s.keepFailure(r)
	close(r.done)
}

func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// worker runs the queued functions in order; after Close it drains the
// queue, then stops.
func (s *Store) worker() {
	defer close(s.done)
	for {
		s.mu.Lock()
		for len(s.queue) == 0 {
			if s.closed {
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			<-s.wake
			s.mu.Lock()
		}
		r := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.mu.Unlock()
		s.runQueued(r)
	}
}

func (s *Store) runQueued(r *request) {
	var err error
	switch {
	case r.ctx.Err() != nil:
		err = r.ctx.Err()
	default:
		var conn *pgxpool.Conn
		conn, err = s.pool.Acquire(context.Background())
		if err != nil {
			err = fmt.Errorf("store: acquiring a connection: %w", err)
			break
		}
		r.state.Store(reqStarted)
		err = s.runTx(conn, r.fn)
	}
	r.err = err
	if err != nil {
		s.keepFailure(r)
	}
	close(r.done)
}

// maxFailures bounds the failures kept for Flush: past it, those already
// reported by Wait are dropped.
const maxFailures = 1024

func (s *Store) keepFailure(r *request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.qfails) >= maxFailures {
		s.qfails = slices.DeleteFunc(s.qfails, func(f *request) bool { return f.waited.Load() })
	}
	s.qfails = append(s.qfails, r)
}

// Wait returns the queued function's outcome once it is known, as
// [Store.Tx] returns it. It may be called more than once, from any
// goroutine; every queued function is answered, also on Close.
func (q *queued) Wait() error {
	q.r.waited.Store(true)
	<-q.r.done
	return q.r.err
}

// Done is closed once the outcome is known.
func (q *queued) Done() <-chan struct{} { return q.r.done }

// Flush returns once every function handed to Queue before it has
// committed or failed; nil when none of those that failed since the last
// Flush went unwaited, otherwise the first such failure (wrapped). ctx is
// checked while it waits: when ctx ends first, Flush returns ctx's error
// and leaves the failures for the next Flush. After Close it returns
// [store.ErrClosed].
func (s *Store) Flush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	prev := s.tail
	s.mu.Unlock()
	if prev != nil {
		select {
		case <-prev.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var prevSeq int64
	if prev != nil {
		prevSeq = prev.seq
	}
	s.mu.Lock()
	var first error
	n := 0
	kept := s.qfails[:0]
	for _, f := range s.qfails {
		if f.seq > prevSeq { // queued after Flush was called
			kept = append(kept, f)
			continue
		}
		if f.waited.Load() {
			continue
		}
		if first == nil {
			first = f.err
		}
		n++
	}
	clear(s.qfails[len(kept):])
	s.qfails = kept
	s.mu.Unlock()
	switch {
	case n == 1:
		return fmt.Errorf("store: a queued transaction failed: %w", first)
	case n > 1:
		return fmt.Errorf("store: %d queued transactions failed, the first: %w", n, first)
	}
	return nil
}

// lockKey is the advisory lock key of name (a run id, or "migrate") in
// schema: the first 8 bytes of a SHA-256, so that stores in different
// schemas of one database do not share locks.
func lockKey(kind, name string) int64 {
	h := sha256.Sum256([]byte("openplaybook\x00" + kind + "\x00" + name))
	return int64(binary.BigEndian.Uint64(h[:8]))
}

// timeFormat is store/sqlite's: RFC 3339 in UTC with a fixed nine-digit
// fraction, so that stored times compare correctly as text.
const timeFormat = "2006-01-02T15:04:05.000000000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func parseTime(s *string) time.Time {
	if s == nil || *s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

func nullTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := formatTime(t)
	return &s
}

// newID returns prefix followed by 16 random hex digits.
func newID(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand.Read does not fail on supported platforms
	}
	return prefix + hex.EncodeToString(b[:])
}
