package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/openplaybook/openplaybook/store"

	"github.com/openplaybook/openplaybook/audit"
)

// Append adds rec to its run's audit log, in the same transaction as the
// changes it records, and returns the sealed record. It takes the run's
// head, sets Seq to the head's seq + 1, sets Time to now when it is empty,
// seals the record with the head's hash as prev ([audit.Genesis] for a
// run's first record), inserts it and moves the head. rec.Run must name a
// run; rec.Seq, rec.Prev and rec.Hash are ignored. It is [Tx.AppendAll]
// of one record.
//
// There is no way to change or remove a record: the package has no API for
// it and the database refuses it.
func (t *Tx) Append(rec audit.Record) (audit.Record, error) {
	out, err := t.AppendAll(rec)
	if err != nil {
		return audit.Record{}, err
	}
	return out[0], nil
}

// maxAppendRows bounds the rows of one multi-row INSERT (9 parameters
// each, far below SQLite's limit), and so the number of distinct
// statements AppendAll prepares.
const maxAppendRows = 32

// AppendAll adds several records of one run to its audit log, in order,
// as [Tx.Append] would one after another, and returns them sealed: each
// record's prev is the hash of the one before it. It inserts them in one
// multi-row INSERT (per 32 records) and moves the run's head once. Records
// with an empty Time get the same time, now. Every record must name the
// same run; no records is no change. On an error nothing is appended.
func (t *Tx) AppendAll(recs ...audit.Record) ([]audit.Record, error) {
	if t.done {
		return nil, store.ErrTxDone
	}
	if len(recs) == 0 {
		return nil, nil
	}
	run := recs[0].Run
	for _, r := range recs[1:] {
		if r.Run != run {
			return nil, fmt.Errorf("store: appending audit records of runs %q and %q in one call: one run at a time", run, r.Run)
		}
	}
	h, err := t.head(run)
	if err != nil {
		return nil, err
	}
	out := make([]audit.Record, len(recs))
	seq, prev, now := h.seq, h.hash, ""
	for i, rec := range recs {
		seq++
		rec.Seq = seq
		if rec.Time == "" {
			if now == "" {
				now = t.now()
			}
			rec.Time = now
		}
		rec.Hash = ""
		sealed, err := audit.Seal(rec, prev)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		out[i], prev = sealed, sealed.Hash
	}
	fail := func(what string, err error) ([]audit.Record, error) {
		// The head cache may be what was wrong: forget this run's head.
		t.forgetHead(run)
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	for rest := out; len(rest) > 0; {
		chunk := rest[:min(len(rest), maxAppendRows)]
		rest = rest[len(chunk):]
		args := make([]any, 0, 9*len(chunk))
		for _, r := range chunk {
			args = append(args, r.Run, r.Seq, r.Time, r.Kind, r.Step, []byte(r.Tool), jsonArg(r.Data), r.Prev, r.Hash)
		}
		if _, err := t.exec(appendQuery(len(chunk)), args...); err != nil {
			return fail("appending audit record", err)
		}
	}
	last := out[len(out)-1]
	res, err := t.exec(`UPDATE runs SET audit_last_seq = ?, audit_last_hash = ? WHERE id = ? AND audit_last_seq = ?`,
		last.Seq, last.Hash, run, h.seq)
	if err := affected(res, err, errors.New("the head moved")); err != nil {
		return fail("moving the audit head", err)
	}
	t.setHead(run, runHead{seq: last.Seq, hash: last.Hash})
	return out, nil
}

var appendQueries [maxAppendRows + 1]string

func init() {
	const row = `(?, ?, ?, ?, ?, ?, ?, ?, ?)`
	for n := 1; n <= maxAppendRows; n++ {
		appendQueries[n] = `INSERT INTO audit (run, seq, time, kind, step, tool, data, prev, hash) VALUES ` +
			row + strings.Repeat(", "+row, n-1)
	}
}

func appendQuery(n int) string { return appendQueries[n] }

// runHead is a run's audit head: its last record's seq and hash.
type runHead struct {
	seq  int64
	hash string
}

// maxHeads bounds the writer's audit head cache; when it would grow past
// it, it is emptied.
const maxHeads = 4096

// head returns the run's audit head. The writer keeps the heads it knows
// (see [Store.heads]): this function's own moves first, then those of the
// functions released before it in the batch, then those of earlier
// commits, which the batch's data_version check has not invalidated. Only
// a head it does not know is read from the database.
func (t *Tx) head(run string) (runHead, error) {
	if h, ok := t.heads[run]; ok {
		return h, nil
	}
	s := t.s
	if h, ok := s.bheads[run]; ok {
		return h, nil
	}
	if h, ok := s.heads[run]; ok {
		return h, nil
	}
	var h runHead
	err := t.row(`SELECT audit_last_seq, audit_last_hash FROM runs WHERE id = ?`, run).Scan(&h.seq, &h.hash)
	if errors.Is(err, sql.ErrNoRows) {
		return runHead{}, fmt.Errorf("%w: run %q", store.ErrNotFound, run)
	}
	if err != nil {
		return runHead{}, fmt.Errorf("store: reading the audit head: %w", err)
	}
	// What the database holds before this function changed the head: as
	// valid for the rest of the batch as the heads released before it.
	s.bheads[run] = h
	return h, nil
}

// setHead records a head this function moved; it joins the batch's heads
// when the function's changes are released, and is dropped with them when
// they are rolled back.
func (t *Tx) setHead(run string, h runHead) {
	if t.heads == nil {
		t.heads = map[string]runHead{}
	}
	t.heads[run] = h
}

// forgetHead drops every cached head of the run.
func (t *Tx) forgetHead(run string) {
	delete(t.heads, run)
	delete(t.s.bheads, run)
	delete(t.s.heads, run)
}

// checkDataVersion, at the start of a batch's transaction, drops the head
// cache when another connection (another Store on the file, the CLI, a
// raw connection) has committed since the writer's last check: its
// changes may have moved heads.
func (s *Store) checkDataVersion(t *Tx) error {
	var dv int64
	if err := t.row(`PRAGMA data_version`).Scan(&dv); err != nil {
		s.dropHeads()
		return err
	}
	if !s.dvOK || dv != s.dv {
		clear(s.heads)
		s.dv, s.dvOK = dv, true
	}
	return nil
}

// dropHeads empties the head cache, after a batch that did not commit.
func (s *Store) dropHeads() {
	clear(s.heads)
	clear(s.bheads)
}

// Audit returns a run's audit records in order.
func (s *Store) Audit(ctx context.Context, run string) ([]audit.Record, error) {
	return readAudit(ctx, s.pool(), run)
}

func readAudit(ctx context.Context, q querier, run string) ([]audit.Record, error) {
	var out []audit.Record
	err := eachAudit(ctx, q, run, 0, -1, func(r audit.Record) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// auditQuery reads a run's records above a seq, in seq order, at most a
// number of them. The run column is the query's own (equal under the
// BINARY collation, byte for byte), so it is not read: a long log is
// read a column a record faster.
const auditQuery = `SELECT seq, time, kind, step, tool, data, prev, hash FROM audit WHERE run = ? AND seq > ? ORDER BY seq LIMIT ?`

// eachAudit calls fn with each of a run's records whose seq is above
// after, in seq order, at most limit of them (all when limit < 0), read
// row by row through q (one query: one snapshot). fn's error stops the
// read and is returned.
func eachAudit(ctx context.Context, q querier, run string, after int64, limit int, fn func(audit.Record) error) error {
	rows, err := q.query(ctx, auditQuery, run, after, limit)
	if err != nil {
		return fmt.Errorf("store: reading audit: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		r := audit.Record{Run: run}
		var tool, data []byte
		if err := rows.Scan(&r.Seq, &r.Time, &r.Kind, &r.Step, &tool, &data, &r.Prev, &r.Hash); err != nil {
			return fmt.Errorf("store: reading audit: %w", err)
		}
		r.Tool = string(tool)
		r.Data = jsonValue(data)
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: reading audit: %w", err)
	}
	return nil
}

// AuditPage returns at most limit of a run's records whose seq is above
// after, in seq order ([store.AuditPager]): none past the end. A limit
// below 1 is an error.
func (s *Store) AuditPage(ctx context.Context, run string, after int64, limit int) ([]audit.Record, error) {
	return auditPage(ctx, s.pool(), run, after, limit)
}

func auditPage(ctx context.Context, q querier, run string, after int64, limit int) ([]audit.Record, error) {
	if limit < 1 {
		return nil, fmt.Errorf("store: reading audit: a page of %d records (at least 1)", limit)
	}
	out := make([]audit.Record, 0, min(limit, 1024))
	err := eachAudit(ctx, q, run, after, limit, func(r audit.Record) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// AuditHead returns the seq and hash of a run's last audit record as the
// run row records them (0 and [audit.Genesis] before the first).
func (s *Store) AuditHead(ctx context.Context, run string) (seq int64, hash string, err error) {
	return auditHead(ctx, s.pool(), run)
}

func auditHead(ctx context.Context, q querier, run string) (seq int64, hash string, err error) {
	err = q.queryRow(ctx, `SELECT audit_last_seq, audit_last_hash FROM runs WHERE id = ?`, run).Scan(&seq, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", fmt.Errorf("%w: run %q", store.ErrNotFound, run)
	}
	if err != nil {
		return 0, "", fmt.Errorf("store: reading the audit head: %w", err)
	}
	return seq, hash, nil
}

// VerifyAudit reads a run's audit log and head from one snapshot and
// checks them with [audit.Verify]: every record's hash and prev, the
// sequence, and that the log ends at the head. It returns the problems
// found, none when the chain verifies.
func (s *Store) VerifyAudit(ctx context.Context, run string) ([]audit.Problem, error) {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	defer tx.Rollback()
	return verifyAudit(ctx, readTx{s, tx}, run)
}

// Audit returns a run's audit records in order, as this transaction sees
// them: with its own appends and those of the functions committed
// before it in the same commit.
func (t *Tx) Audit(run string) ([]audit.Record, error) {
	if t.done {
		return nil, store.ErrTxDone
	}
	return readAudit(context.Background(), t, run)
}

// VerifyAudit is [Store.VerifyAudit] inside the transaction: the chain
// and head as this transaction sees them (its own appends and its
// batch-mates' included), which a read of the store could not see
// before the commit.
func (t *Tx) VerifyAudit(run string) ([]audit.Problem, error) {
	if t.done {
		return nil, store.ErrTxDone
	}
	return verifyAudit(context.Background(), t, run)
}

// verifyAudit reads a run's head and records through q, which must be
// one snapshot, and checks them.
func verifyAudit(ctx context.Context, q querier, run string) ([]audit.Problem, error) {
	seq, hash, err := auditHead(ctx, q, run)
	if err != nil {
		return nil, err
	}
	// The records are checked as they are read: what is kept is the
	// problems and the last record's hash, however long the log.
	var v audit.Verifier
	if err := eachAudit(ctx, q, run, 0, -1, func(r audit.Record) error {
		v.Add(r)
		return nil
	}); err != nil {
		return nil, err
	}
	return v.EndHead(seq, hash), nil
}
