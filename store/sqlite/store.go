// Package sqlite is the default engine of the [store] contract: one
// SQLite database file (modernc.org/sqlite, no cgo) in WAL mode with
// synchronous=FULL, holding runs, steps, tool calls, approvals, gates,
// the hash-chained audit log and the built-in primitives' data.
//
// Every change goes through [Store.Tx]: the function it is given runs inside
// a transaction, and Tx returns nil only after that transaction is on disk.
// A change that Tx acknowledged survives kill -9 and, with synchronous=FULL,
// a power cut; a change that Tx did not acknowledge is either wholly there
// or wholly absent, never in part.
//
// Concurrent Tx calls are committed together (group commit): one writer
// goroutine runs the waiting functions one after another inside one SQLite
// transaction, each under its own savepoint, and commits once. A function
// that fails is rolled back alone; the others commit. The writer keeps
// each run's audit head cached; LockRun takes file locks (flock, OFD
// locks on Linux). All of that is private to this engine.
//
// The audit log has no update or delete API, and triggers in the database
// refuse UPDATE and DELETE of audit rows. See docs/store.md.
package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openplaybook/openplaybook/store"

	"modernc.org/sqlite"
)

// Options configure [OpenWith]. A nil *Options means the defaults.
type Options struct {
	// Synchronous is SQLite's synchronous setting: "FULL" (the zero value
	// means FULL) syncs the WAL on every commit, so an acknowledged
	// change survives a power cut; "NORMAL" syncs only at checkpoints, so
	// an acknowledged change survives kill -9 of the process but the last
	// commits may be lost in a power cut. Other values are errors.
	Synchronous string
	// BusyTimeout is how long a statement waits for another process's
	// lock on the database. Zero means 10 seconds.
	BusyTimeout time.Duration
	// MaxBatch is the most Tx functions committed in one SQLite
	// transaction. Zero means 256; 1 turns group commit off.
	MaxBatch int
	// Readers is the number of read connections. Zero means 4.
	Readers int
	// QueueLinger is how long the writer waits for more work when all it
	// has are functions handed to it by [Store.Queue], so that they share
	// one commit: a Tx or Flush arriving meanwhile ends the wait at once.
	// It widens a queued change's crash window by at most this long.
	// Zero means 4 ms (a few calls' worth: BENCHMARKS.md, round 8);
	// negative means no wait.
	QueueLinger time.Duration
}

// Store is an open database. It is safe for concurrent use.
type Store struct {
	clock atomic.Pointer[func() time.Time] // see SetClock; nil: time.Now

	path     string
	wdb      *sql.DB // one connection, used only by the writer goroutine
	rdb      *sql.DB // read-only pool
	maxBatch int
	linger   time.Duration // see Options.QueueLinger; <= 0: none

	stmts map[string]*sql.Stmt // the writer's prepared statements; writer goroutine only
	noted map[string]bool      // queries to prepare after the current batch

	// The audit head cache, writer goroutine only: heads holds each run's
	// head as of the writer's last commit, valid while data_version (the
	// writer connection's PRAGMA data_version, which moves when another
	// connection commits) stays dv; bheads holds the heads that the
	// released functions of the current batch moved (or read), merged
	// into heads once the batch commits. See [Tx.head].
	heads  map[string]runHead
	bheads map[string]runHead
	dv     int64
	dvOK   bool

	reads readStmts // the read pool's prepared statements

	commitFault atomic.Pointer[func() error] // see SetCommitFault

	mu     sync.Mutex
	queue  []*request // waiting for the writer, in order (FIFO)
	closed bool
	qfails []*request // failed Queue'd functions not yet collected by a Flush
	wake   chan struct{}
	// lingering is set while the writer waits out QueueLinger: another
	// queued function that leaves the batch short of maxBatch changes
	// nothing it decides on, so it need not wake the writer (a wake-up, a
	// timer and a thread switch per call, on the other core).
	lingering bool

	done      chan struct{}
	closeOnce sync.Once
}

// A request's state: queued until the writer takes it (started) or its
// Tx caller gives up on it (cancelled).
const (
	reqQueued int32 = iota
	reqStarted
	reqCancelled
)

type request struct {
	ctx    context.Context
	fn     func(store.Tx) error // nil: a Flush barrier
	queued bool                 // from Queue: a failure is kept for Flush
	state  atomic.Int32
	waited atomic.Bool // Queued.Wait was called
	err    error       // the outcome, set before done is closed
	done   chan struct{}
	fails  []*request // a barrier's collected failures of Queue'd functions
}

func newRequest(ctx context.Context, fn func(store.Tx) error) *request {
	return &request{ctx: ctx, fn: fn, done: make(chan struct{})}
}

// Open opens the database file at path, creating it and migrating its
// schema to the current version when needed; opt nil means the defaults.
// The path must name a file: the store keeps a writer connection and a
// pool of readers on it, so ":memory:" does not work. The store is a
// *[Store] (see [OpenWith] for its engine-specific methods).
func Open(path string, opt *Options) (store.Store, error) {
	s, err := OpenWith(path, opt)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Compile-time checks that the engine keeps the contract.
var (
	_ store.Store = (*Store)(nil)
	_ store.Tx    = (*Tx)(nil)
)

// OpenWith is [Open] returning the engine's own type, for its
// engine-specific methods (Path, SetClock, SetCommitFault).
func OpenWith(path string, opt *Options) (*Store, error) {
	var o Options
	if opt != nil {
		o = *opt
	}
	sync := "FULL"
	if o.Synchronous != "" {
		sync = o.Synchronous
	}
	if sync != "FULL" && sync != "NORMAL" {
		return nil, fmt.Errorf("store: synchronous %q: want FULL or NORMAL", sync)
	}
	busy := o.BusyTimeout
	if busy == 0 {
		busy = 10 * time.Second
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 256
	}
	if o.Readers == 0 {
		o.Readers = 4
	}
	if o.QueueLinger == 0 {
		o.QueueLinger = 4 * time.Millisecond
	}
	if path == "" || path == ":memory:" {
		return nil, fmt.Errorf("store: %q is not a database file path", path)
	}

	// OFD locks survive an unrelated close(2) of the database file in
	// this process (POSIX locks do not). Best effort: Linux only, and only
	// before the process's first SQLite lock.
	_, _ = sqlite.OFDLocking(true)

	ms := strconv.FormatInt(busy.Milliseconds(), 10)
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+ms+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Set("_txlock", "immediate")
	wdb, err := sql.Open("sqlite", "file:"+url.PathEscape(path)+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: opening %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	if err := migrate(wdb); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	var mode string
	if err := wdb.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		wdb.Close()
		return nil, fmt.Errorf("store: %s: journal mode is %q, want wal (%v)", path, mode, err)
	}

	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout("+ms+")")
	rq.Add("_pragma", "foreign_keys(1)")
	rq.Add("_pragma", "query_only(1)")
	rdb, err := sql.Open("sqlite", "file:"+url.PathEscape(path)+"?"+rq.Encode())
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("store: opening %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(o.Readers)
	rdb.SetMaxIdleConns(o.Readers)

	s := &Store{
		path:     path,
		wdb:      wdb,
		rdb:      rdb,
		maxBatch: o.MaxBatch,
		linger:   o.QueueLinger,
		stmts:    map[string]*sql.Stmt{},
		noted:    map[string]bool{},
		heads:    map[string]runHead{},
		bheads:   map[string]runHead{},
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	s.reads.db = rdb
	go s.writer()
	return s, nil
}

// Close stops the writer after the transactions already handed to it
// (waiting Tx calls and Queue'd functions: each is committed or fails, and
// is answered) and closes the database. Tx, Queue and Flush calls after
// Close return [ErrClosed]. It is not an error to call Close more than
// once.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.signal()
		<-s.done
		err = errors.Join(s.reads.close(), s.rdb.Close(), s.wdb.Close())
	})
	return err
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Tx runs fn inside a write transaction and commits it. It returns fn's
// error (and nothing fn did is kept), a commit error (and nothing is kept),
// or nil once the transaction is durable.
//
// fn runs on the store's writer goroutine, possibly in the same SQLite
// transaction as other callers' functions, each under its own savepoint:
// it must only make store changes through its [Tx], never block on
// anything else (network, locks, channels, and above all Store.Tx, which
// would wait for itself forever), must return the errors its Tx methods
// return rather than carry on, and must not keep the Tx after it returns.
// Store reads inside fn do not see fn's own changes; use the Tx's reads.
// A panic in fn is returned as an error.
//
// ctx is checked until fn starts; once fn has started, Tx waits for the
// outcome so that its result always says whether the change was kept.
func (s *Store) Tx(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := newRequest(ctx, fn)
	if err := s.enqueue(r); err != nil {
		return err
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqQueued, reqCancelled) {
			return ctx.Err()
		}
		<-r.done // fn has started: wait for the outcome
		return r.err
	}
}

// enqueue hands r to the writer, behind everything handed to it before.
func (s *Store) enqueue(r *request) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	s.queue = append(s.queue, r)
	quiet := s.lingering && r.queued && len(s.queue) < s.maxBatch
	s.mu.Unlock()
	if !quiet {
		s.signal()
	}
	return nil
}

func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// writer takes the queued requests in order, up to maxBatch at a time,
// and commits them. After Close it drains the queue, then stops.
func (s *Store) writer() {
	defer close(s.done)
	batch := make([]*request, 0, s.maxBatch)
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
		n := min(len(s.queue), s.maxBatch)
		if s.linger > 0 && n < s.maxBatch && allQueued(s.queue) {
			// Only queued work: wait a little for more to share the
			// commit, unless a waiter (Tx, Flush) or the end comes.
			deadline := time.Now().Add(s.linger)
			s.lingering = true
			for {
				s.mu.Unlock()
				t := time.NewTimer(time.Until(deadline))
				select {
				case <-s.wake:
				case <-t.C:
				}
				t.Stop()
				s.mu.Lock()
				if s.closed || len(s.queue) >= s.maxBatch || !allQueued(s.queue) || !time.Now().Before(deadline) {
					break
				}
			}
			s.lingering = false
			n = min(len(s.queue), s.maxBatch)
		}
		batch = append(batch[:0], s.queue[:n]...)
		rest := copy(s.queue, s.queue[n:])
		clear(s.queue[rest:])
		s.queue = s.queue[:rest]
		s.mu.Unlock()
		s.commit(batch)
		clear(batch)
	}
}

// allQueued reports whether every request came from Queue (nobody waits
// on any of them).
func allQueued(rs []*request) bool {
	for _, r := range rs {
		if !r.queued {
			return false
		}
	}
	return true
}

// answer gives r its outcome. The batch's requests are answered in order,
// so a barrier collects the failures of every Queue'd function before it.
func (s *Store) answer(r *request, err error) {
	if r.fn == nil { // a Flush barrier
		if !r.state.CompareAndSwap(reqQueued, reqStarted) {
			close(r.done) // Flush gave up: leave the failures for the next
			return
		}
		s.mu.Lock()
		r.fails, s.qfails = s.qfails, nil
		s.mu.Unlock()
		close(r.done)
		return
	}
	r.err = err
	if r.queued && err != nil {
		s.keepFailure(r)
	}
	close(r.done)
}

// maxFailures bounds the failures kept for Flush: past it, those already
// reported by Queued.Wait are dropped.
const maxFailures = 1024

// keepFailure keeps a failed Queue'd request for the next Flush.
func (s *Store) keepFailure(r *request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.qfails) >= maxFailures {
		s.qfails = slices.DeleteFunc(s.qfails, func(f *request) bool { return f.waited.Load() })
	}
	s.qfails = append(s.qfails, r)
}

// commit runs the batch in one transaction and answers every request.
func (s *Store) commit(batch []*request) {
	results := make([]error, len(batch))
	answer := func() {
		for i, r := range batch {
			s.answer(r, results[i])
		}
	}
	failAll := func(err error) {
		for i, r := range batch {
			if results[i] == nil && r.fn != nil {
				results[i] = err
			}
		}
		s.dropHeads()
		answer()
	}
	// Requests that will run: a batch of one runs without a savepoint (a
	// failure rolls back the whole transaction, which holds nothing else).
	runnable := 0
	for _, r := range batch {
		if r.fn != nil && r.state.Load() == reqQueued && r.ctx.Err() == nil {
			runnable++
		}
	}
	if runnable == 0 {
		for i, r := range batch {
			if r.fn != nil {
				results[i] = r.ctx.Err()
				if results[i] == nil {
					results[i] = context.Canceled // cancelled by its Tx caller, who no longer waits
				}
			}
		}
		answer()
		return
	}
	savepoints := runnable > 1
	defer s.prepareNoted()
	sqltx, err := s.wdb.BeginTx(context.Background(), nil)
	if err != nil {
		failAll(fmt.Errorf("store: begin: %w", err))
		return
	}
	if err := s.checkDataVersion(&Tx{s: s, tx: sqltx}); err != nil {
		sqltx.Rollback()
		failAll(fmt.Errorf("store: reading data_version: %w", err))
		return
	}
	ran := 0
	for i, r := range batch {
		if r.fn == nil {
			continue
		}
		if !r.state.CompareAndSwap(reqQueued, reqStarted) {
			results[i] = context.Canceled // its Tx caller has returned ctx.Err()
			continue
		}
		if err := r.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		t := &Tx{s: s, tx: sqltx} // a Tx of its own: one kept by an earlier fn stays done
		if savepoints {
			if _, err := t.exec("SAVEPOINT req"); err != nil {
				sqltx.Rollback()
				failAll(fmt.Errorf("store: savepoint: %w", err))
				return
			}
		}
		err := run(r.fn, t)
		if err != nil {
			results[i] = err
			t.done = true
			if !savepoints {
				continue
			}
			_, e1 := sqltx.ExecContext(context.Background(), "ROLLBACK TO req")
			_, e2 := sqltx.ExecContext(context.Background(), "RELEASE req")
			if e := errors.Join(e1, e2); e != nil {
				// The error ended the whole transaction.
				sqltx.Rollback()
				failAll(fmt.Errorf("store: transaction aborted by an earlier change in the same commit: %w", e))
				return
			}
			continue
		}
		if savepoints {
			if _, err := t.exec("RELEASE req"); err != nil {
				t.done = true
				sqltx.Rollback()
				failAll(fmt.Errorf("store: release savepoint: %w", err))
				return
			}
		}
		t.done = true
		for run, h := range t.heads {
			s.bheads[run] = h
		}
		ran++
	}
	if ran == 0 {
		sqltx.Rollback()
		clear(s.bheads)
		answer()
		return
	}
	if f := s.commitFault.Load(); f != nil {
		if err := (*f)(); err != nil {
			sqltx.Rollback()
			failAll(fmt.Errorf("store: commit: %w", err))
			return
		}
	}
	if err := sqltx.Commit(); err != nil {
		failAll(fmt.Errorf("store: commit: %w", err))
		return
	}
	if len(s.heads)+len(s.bheads) > maxHeads {
		clear(s.heads)
	}
	for run, h := range s.bheads {
		s.heads[run] = h
	}
	clear(s.bheads)
	answer()
}

// Now returns the store's current time: time.Now, or the clock given
// to [Store.SetClock].
func (s *Store) Now() time.Time {
	if f := s.clock.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

// SetClock replaces the clock the store records every timestamp with
// (and compares expiry with); nil restores time.Now. Tests use it to
// control expiry. It may be called at any time, from any goroutine.
func (s *Store) SetClock(now func() time.Time) {
	if now == nil {
		s.clock.Store(nil)
		return
	}
	s.clock.Store(&now)
}

// SetCommitFault is fault injection for tests: from now on the writer
// calls f just before each commit, and an error from it fails that
// commit as a full disk or an I/O error would (the transaction is rolled
// back, nothing of it is kept, and every Tx and Queued of it gets the
// error, wrapped). f runs on the writer goroutine and must not call the
// store. Nil removes it. It may be called at any time, from any
// goroutine.
func (s *Store) SetCommitFault(f func() error) {
	if f == nil {
		s.commitFault.Store(nil)
		return
	}
	s.commitFault.Store(&f)
}

func run(fn func(store.Tx) error, t *Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store: panic in transaction function: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(t)
}

// Tx is the write side of a transaction; see [Store.Tx]. Its methods are
// valid only while the function given to Store.Tx runs.
type Tx struct {
	s     *Store
	tx    *sql.Tx
	done  bool
	heads map[string]runHead // audit heads this function moved; see [Tx.head]
}

func (t *Tx) exec(query string, args ...any) (sql.Result, error) {
	if t.done {
		return nil, store.ErrTxDone
	}
	if st := t.stmt(query); st != nil {
		return st.ExecContext(context.Background(), args...)
	}
	return t.tx.ExecContext(context.Background(), query, args...)
}

func (t *Tx) row(query string, args ...any) *sql.Row {
	return t.queryRow(context.Background(), query, args...)
}

// query and queryRow make a Tx a querier for the shared
// read functions.
func (t *Tx) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if t.done {
		return nil, store.ErrTxDone
	}
	if st := t.stmt(query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, query, args...)
}

// queryRow: see [Tx.query].
func (t *Tx) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.stmt(query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, query, args...)
}

// maxStmts bounds the writer's statement cache.
const maxStmts = 256

// stmt returns query's cached prepared statement bound to this
// transaction, or nil when it is not prepared yet. The writer's one
// connection is busy inside a transaction, so a new query is only noted
// here and prepared after the batch commits (see [Store.prepareNoted]).
func (t *Tx) stmt(query string) *sql.Stmt {
	if st := t.s.stmts[query]; st != nil {
		return t.tx.StmtContext(context.Background(), st)
	}
	if len(t.s.stmts)+len(t.s.noted) < maxStmts {
		t.s.noted[query] = true
	}
	return nil
}

// prepareNoted prepares the queries noted during the last batch, on the
// writer's connection, which is free between batches.
func (s *Store) prepareNoted() {
	for q := range s.noted {
		delete(s.noted, q)
		if st, err := s.wdb.PrepareContext(context.Background(), q); err == nil {
			s.stmts[q] = st
		}
	}
}

func (t *Tx) now() string { return formatTime(t.s.Now()) }

// stamp returns the current time as stored and as read back.
func (t *Tx) stamp() (string, time.Time) {
	at := t.s.Now().UTC().Round(0) // drop the monotonic reading
	return formatTime(at), at
}

// querier is what reads need: a read pool or a write transaction.
type querier interface {
	query(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	queryRow(ctx context.Context, query string, args ...any) *sql.Row
}

// timeFormat is RFC 3339 in UTC with a fixed nine-digit fraction, so that
// stored times compare correctly as text.
const timeFormat = "2006-01-02T15:04:05.000000000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func parseTime(s sql.NullString) time.Time {
	if !s.Valid || s.String == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s.String)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return formatTime(t)
}

// newID returns prefix followed by 16 random hex digits.
func newID(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand.Read does not fail on supported platforms
	}
	return prefix + hex.EncodeToString(b[:])
}

// affected turns "no row changed" into err.
func affected(res sql.Result, err error, none error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return none
	}
	return nil
}
