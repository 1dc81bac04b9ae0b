package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/openplaybook/openplaybook/audit"
)

// Append adds rec to its run's audit log, in the same transaction as the
// changes it records, and returns the sealed record. It reads the run's
// head, sets Seq to the head's seq + 1, sets Time to now when it is empty,
// seals the record with the head's hash as prev ([audit.Genesis] for a
// run's first record), inserts it and moves the head. rec.Run must name a
// run; rec.Seq, rec.Prev and rec.Hash are ignored.
//
// There is no way to change or remove a record: the package has no API for
// it and the database refuses it.
func (t *Tx) Append(rec audit.Record) (audit.Record, error) {
	if t.done {
		return audit.Record{}, ErrTxDone
	}
	var seq int64
	var prev string
	err := t.queryRow(`SELECT audit_last_seq, audit_last_hash FROM runs WHERE id = ?`, rec.Run).Scan(&seq, &prev)
	if errors.Is(err, sql.ErrNoRows) {
		return audit.Record{}, fmt.Errorf("%w: run %q", ErrNotFound, rec.Run)
	}
	if err != nil {
		return audit.Record{}, fmt.Errorf("store: reading the audit head: %w", err)
	}
	rec.Seq = seq + 1
	if rec.Time == "" {
		rec.Time = t.now()
	}
	rec.Hash = ""
	sealed, err := audit.Seal(rec, prev)
	if err != nil {
		return audit.Record{}, fmt.Errorf("store: %w", err)
	}
	if _, err := t.exec(`INSERT INTO audit (run, seq, time, kind, step, tool, data, prev, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sealed.Run, sealed.Seq, sealed.Time, sealed.Kind, sealed.Step, []byte(sealed.Tool), jsonArg(sealed.Data),
		sealed.Prev, sealed.Hash); err != nil {
		return audit.Record{}, fmt.Errorf("store: appending audit record: %w", err)
	}
	res, err := t.exec(`UPDATE runs SET audit_last_seq = ?, audit_last_hash = ? WHERE id = ? AND audit_last_seq = ?`,
		sealed.Seq, sealed.Hash, sealed.Run, seq)
	if err := affected(res, err, errors.New("the head moved")); err != nil {
		return audit.Record{}, fmt.Errorf("store: moving the audit head: %w", err)
	}
	return sealed, nil
}

// Audit returns a run's audit records in order.
func (s *Store) Audit(ctx context.Context, run string) ([]audit.Record, error) {
	return readAudit(ctx, s.rdb, run)
}

func readAudit(ctx context.Context, q querier, run string) ([]audit.Record, error) {
	rows, err := q.QueryContext(ctx, `SELECT run, seq, time, kind, step, tool, data, prev, hash FROM audit WHERE run = ? ORDER BY seq`, run)
	if err != nil {
		return nil, fmt.Errorf("store: reading audit: %w", err)
	}
	defer rows.Close()
	var out []audit.Record
	for rows.Next() {
		var r audit.Record
		var tool, data []byte
		if err := rows.Scan(&r.Run, &r.Seq, &r.Time, &r.Kind, &r.Step, &tool, &data, &r.Prev, &r.Hash); err != nil {
			return nil, fmt.Errorf("store: reading audit: %w", err)
		}
		r.Tool = string(tool)
		r.Data = jsonValue(data)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading audit: %w", err)
	}
	return out, nil
}

// AuditHead returns the seq and hash of a run's last audit record as the
// run row records them (0 and [audit.Genesis] before the first).
func (s *Store) AuditHead(ctx context.Context, run string) (seq int64, hash string, err error) {
	return auditHead(ctx, s.rdb, run)
}

func auditHead(ctx context.Context, q querier, run string) (seq int64, hash string, err error) {
	err = q.QueryRowContext(ctx, `SELECT audit_last_seq, audit_last_hash FROM runs WHERE id = ?`, run).Scan(&seq, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", fmt.Errorf("%w: run %q", ErrNotFound, run)
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
	seq, hash, err := auditHead(ctx, tx, run)
	if err != nil {
		return nil, err
	}
	recs, err := readAudit(ctx, tx, run)
	if err != nil {
		return nil, err
	}
	probs := audit.Verify(recs, seq, hash)
	if seq == 0 && len(recs) > 0 {
		// audit.Verify skips the head check for a zero head.
		probs = append(probs, audit.Problem{Seq: int64(len(recs)), Message: fmt.Sprintf(
			"the run's head says it has no records but the log has %d: the head was reset", len(recs))})
	}
	return probs, nil
}
