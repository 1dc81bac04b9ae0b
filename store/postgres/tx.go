package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// How a transaction talks to the server. A tx sends nothing until a
// method needs an answer: BEGIN goes with the first statement, and the
// writes whose result the caller does not need (an audit record, the
// outcome of a call, a new run, ...) wait in pending and go with the next
// statement that needs an answer, or with COMMIT, in one pipelined
// batch (pgx.Batch: one round trip). Their checks are made in the server
// (op_check raises an error with a SQLSTATE of its own), so a failed one
// aborts the transaction and the COMMIT behind it; the error is mapped
// to the store's sentinels ([mapErr]) and returned by the method that
// sent the batch, or by Tx. An audited call (StartCall, Append,
// FinishCall, Append) is two round trips: the run's lock with the call's
// INSERT, then the rest with COMMIT.
//
// A run's writes take its row lock first, in a statement of its own
// (SELECT ... FOR NO KEY UPDATE
// of its runs row: exclusive among the store's writers, while foreign
// key checks of other rows may still share it), and read its status and
// audit head from that row. The tx keeps both for the rest of the
// transaction, which holds the lock: no other transaction can change
// them meanwhile, and nothing is kept across transactions. The lock is
// never folded into the statement that needs it: in READ COMMITTED a
// statement that waits for a row lock reads the rest of the database as
// of before the wait, so the next call index it computed would be stale.

// item is one statement of a batch. rows reads a query's rows; without
// it the statement's rows (if any) are discarded. onErr maps an error
// the server raised for it.
type item struct {
	sql   string
	args  []any
	what  string
	rows  func(pgx.Rows) error
	onErr func(*pgconn.PgError) error
	move  *callMove // set by moveCall
}

// runState is what the tx knows of a run it holds the lock of.
type runState struct {
	status string
	seq    int64  // the head, with the records not sent yet
	hash   string // its hash
	dbSeq  int64  // the head as the server has it in this transaction
	unsent []audit.Record
}

// tx is one function's transaction; see [Store.Tx].
type tx struct {
	s       *Store
	conn    *pgxpool.Conn
	begun   bool  // BEGIN was sent
	done    bool  // the function returned
	broken  error // a statement failed: the server's transaction is aborted
	pending []item
	runs    map[string]*runState // runs locked in this transaction
	locking map[string]bool      // runs whose lock is sent or pending
	order   []string             // runs with unsent records, in the order of their first
	fences  map[string]fence     // Fence's conditions, by run
}

// fence is a condition of [tx.Fence]: the run's owner and epoch.
type fence struct {
	owner string
	epoch int64
	sent  bool // its check is sent or pending
}

func newTx(s *Store, conn *pgxpool.Conn) *tx {
	return &tx{s: s, conn: conn, runs: map[string]*runState{}, locking: map[string]bool{}}
}

var bg = context.Background()

// defer_ adds a statement to the next batch.
func (t *tx) defer_(it item) error {
	if t.done {
		return store.ErrTxDone
	}
	if t.broken != nil {
		return t.broken
	}
	t.pending = append(t.pending, it)
	return nil
}

// send sends the pending statements, the unsent audit records and items
// in one batch (BEGIN first when the transaction has not begun) and reads
// every result. The first error is returned, and breaks the transaction
// when the server's transaction is aborted by it.
func (t *tx) send(items ...item) error {
	if t.done {
		return store.ErrTxDone
	}
	if t.broken != nil {
		return t.broken
	}
	all := make([]item, 0, 1+len(t.pending)+len(t.order)+len(items))
	if !t.begun {
		all = append(all, item{sql: "BEGIN"})
	}
	// A run's one pending call move goes in the statement of its audit
	// records (one statement less per audited call).
	moves := map[string]int{}
	for _, it := range t.pending {
		if it.move != nil {
			moves[it.move.k.Run]++
		}
	}
	fold := map[string]*callMove{}
	for _, run := range t.order {
		if moves[run] == 1 {
			fold[run] = nil
		}
	}
	for _, it := range t.pending {
		if it.move != nil {
			if _, ok := fold[it.move.k.Run]; ok {
				fold[it.move.k.Run] = it.move
				continue
			}
		}
		all = append(all, it)
	}
	for _, run := range t.order {
		all = append(all, t.appendItem(run, fold[run]))
	}
	all = append(all, items...)
	t.pending, t.order = nil, nil
	if len(all) == 0 {
		return nil
	}
	t.begun = true
	var b pgx.Batch
	for _, it := range all {
		b.Queue(it.sql, it.args...)
	}
	br := t.conn.SendBatch(bg, &b)
	var first error
	for _, it := range all {
		if first != nil {
			break
		}
		if it.rows != nil {
			rows, err := br.Query()
			if err == nil {
				err = it.rows(rows)
				rows.Close()
				if e := rows.Err(); e != nil {
					err = e
				}
			}
			if err != nil {
				first = t.fail(it, err)
			}
			continue
		}
		if _, err := br.Exec(); err != nil {
			first = t.fail(it, err)
		}
	}
	if err := br.Close(); err != nil && first == nil {
		first = t.fail(item{what: "sending statements"}, err)
	}
	return first
}

// fail maps a statement's error and breaks the transaction.
func (t *tx) fail(it item, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && it.onErr != nil {
		if e := it.onErr(pe); e != nil {
			err = e
		}
	}
	err = mapErr(it.what, err)
	t.broken = err
	return err
}

// mapErr wraps a statement's error: the engine's own SQLSTATEs are the
// store's sentinels.
func mapErr(what string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case codeState:
			return fmt.Errorf("%w: %s", store.ErrState, pe.Message)
		case codeNotFound:
			return fmt.Errorf("%w: %s", store.ErrNotFound, pe.Message)
		case codeFenced:
			return fmt.Errorf("%w: %s", store.ErrFenced, pe.Message)
		}
	}
	if errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrState) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrExpired) {
		return err
	}
	if what == "" {
		return fmt.Errorf("store: %w", err)
	}
	return fmt.Errorf("store: %s: %w", what, err)
}

// commit sends what is pending with COMMIT.
func (t *tx) commit() error {
	if t.broken != nil {
		t.rollback()
		return t.broken
	}
	if !t.begun && len(t.pending) == 0 && len(t.order) == 0 {
		return nil // nothing to do
	}
	var last []item
	for run, f := range t.fences {
		if !f.sent { // a fenced transaction that never locked the run
			last = append(last, t.lockItem(run)...)
		}
	}
	err := t.send(append(last, item{sql: "COMMIT", what: "commit"})...)
	if err != nil {
		t.rollback()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) && !errors.Is(err, store.ErrState) && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrFenced) {
			return fmt.Errorf("%w (the connection failed while committing: the transaction may or may not have committed)", err)
		}
		return err
	}
	if st := t.conn.Conn().PgConn().TxStatus(); st != 'I' {
		return fmt.Errorf("store: commit: the server's transaction status is %q after COMMIT, want idle", st)
	}
	return nil
}

// rollback ends the server's transaction, if one is open; a connection
// that cannot is closed, so the pool drops it.
func (t *tx) rollback() {
	t.pending, t.order = nil, nil
	pc := t.conn.Conn().PgConn()
	if pc.IsClosed() || !t.begun {
		return
	}
	if pc.TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	if _, err := t.conn.Exec(ctx, "ROLLBACK"); err != nil || pc.TxStatus() != 'I' {
		t.conn.Conn().Close(bg)
	}
}

// release gives the connection back to the pool (which drops it when it
// is closed or not idle).
func (t *tx) release() {
	if t.conn == nil {
		return
	}
	pc := t.conn.Conn().PgConn()
	if !pc.IsClosed() && pc.TxStatus() != 'I' {
		t.conn.Conn().Close(bg)
	}
	t.conn.Release()
	t.conn = nil
}

// lockItem is the statement that takes run's row lock and reads its
// status and head, or nothing when that is sent or pending already.
func (t *tx) lockItem(run string) []item {
	if t.locking[run] {
		return nil
	}
	t.locking[run] = true
	return append([]item{{
		sql:  `SELECT status, audit_last_seq, audit_last_hash FROM runs WHERE id = $1 FOR NO KEY UPDATE`,
		args: []any{run},
		what: "locking run " + run,
		rows: func(rows pgx.Rows) error {
			if !rows.Next() {
				delete(t.locking, run) // no such run (yet): a later lock reads again
				return nil
			}
			st := &runState{}
			if err := rows.Scan(&st.status, &st.seq, &st.hash); err != nil {
				return err
			}
			st.dbSeq = st.seq
			t.runs[run] = st
			return nil
		},
	}}, t.fenceItem(run)...)
}

// fenceItem is the check of run's fence, when it has one not sent yet:
// sent after the run's lock, it reads the owner and epoch no other
// transaction can change before this one ends.
func (t *tx) fenceItem(run string) []item {
	f, ok := t.fences[run]
	if !ok || f.sent {
		return nil
	}
	f.sent = true
	t.fences[run] = f
	return []item{{
		sql: `SELECT CASE WHEN owner = $2 AND owner_epoch = $3 THEN true
			ELSE op_check(false, '` + codeFenced + `', format('run %s is owned by %L at epoch %s, not %L at %s', id, owner, owner_epoch, $2::text, $3::bigint)) END
			FROM runs WHERE id = $1`,
		args: []any{run, f.owner, f.epoch},
		what: "checking the owner of run " + run,
	}}
}

// Fence makes the transaction conditional on run's owner and epoch; see
// [store.Tx.Fence]. The check is sent with the run's lock (or, when the
// run is locked already, with the next statement), or before COMMIT
// when the transaction never locks the run.
func (t *tx) Fence(run, owner string, epoch int64) error {
	if err := t.check(); err != nil {
		return err
	}
	if t.fences == nil {
		t.fences = map[string]fence{}
	}
	if f, ok := t.fences[run]; ok && f.sent {
		if f.owner != owner || f.epoch != epoch {
			return fmt.Errorf("store: run %s is fenced twice in one transaction with different owners", run)
		}
		return nil
	}
	t.fences[run] = fence{owner: owner, epoch: epoch}
	if t.locking[run] {
		return t.defer_(t.fenceItem(run)[0])
	}
	return nil
}

// ClaimRun makes owner the run's owner and moves its owner epoch up by
// one, under the run's row lock; see [store.Tx.ClaimRun].
func (t *tx) ClaimRun(run, owner string) (int64, error) {
	if _, err := t.locked(run); err != nil {
		return 0, err
	}
	var epoch int64
	var found bool
	err := t.send(item{
		sql:  `UPDATE runs SET owner = $2, owner_epoch = owner_epoch + 1 WHERE id = $1 RETURNING owner_epoch`,
		args: []any{run, owner},
		what: "claiming run " + run,
		rows: func(rows pgx.Rows) error {
			if rows.Next() {
				found = true
				return rows.Scan(&epoch)
			}
			return nil
		},
	})
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("%w: run %q", store.ErrNotFound, run)
	}
	return epoch, nil
}

// lockLater puts run's lock in the next batch.
func (t *tx) lockLater(run string) error {
	if t.done {
		return store.ErrTxDone
	}
	if t.broken != nil {
		return t.broken
	}
	t.pending = append(t.pending, t.lockItem(run)...)
	return nil
}

// locked takes run's lock (sending it, with what is pending and items,
// when it is not held yet) and returns what the tx knows of the run;
// [store.ErrNotFound] when there is no such run.
func (t *tx) locked(run string, items ...item) (*runState, error) {
	if st := t.runs[run]; st != nil {
		if len(items) > 0 {
			if err := t.send(items...); err != nil {
				return nil, err
			}
		}
		return st, nil
	}
	if err := t.send(append(t.lockItem(run), items...)...); err != nil {
		return nil, err
	}
	if st := t.runs[run]; st != nil {
		return st, nil
	}
	return nil, fmt.Errorf("%w: run %q", store.ErrNotFound, run)
}

// open checks that the run (locked) has not ended.
func (t *tx) open(run string) (*runState, error) {
	st, err := t.locked(run)
	if err != nil {
		return nil, err
	}
	if store.RunStatus(st.status).Ended() {
		return nil, fmt.Errorf("%w: run %s has ended (%s)", store.ErrState, run, st.status)
	}
	return st, nil
}

func (t *tx) check() error {
	if t.done {
		return store.ErrTxDone
	}
	return t.broken
}

func (t *tx) now() string { return formatTime(t.s.Now()) }

// stamp returns the current time as stored and as read back.
func (t *tx) stamp() (string, time.Time) {
	at := t.s.Now().UTC().Round(0)
	return formatTime(at), at
}
