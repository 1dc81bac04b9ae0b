package postgres

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// Append adds rec to its run's audit log in this transaction and returns
// the sealed record: [tx.AppendAll] of one record.
func (t *tx) Append(rec audit.Record) (audit.Record, error) {
	out, err := t.AppendAll(rec)
	if err != nil {
		return audit.Record{}, err
	}
	return out[0], nil
}

// AppendAll seals several records of one run onto its chain, in order,
// and returns them. The head comes from the run's row, read with its lock
// (once per transaction); the records and the head's move go with the
// next batch, as one INSERT and one UPDATE (checked in the server).
// Records with an empty Time get the same time, now. On an error nothing
// is appended.
func (t *tx) AppendAll(recs ...audit.Record) ([]audit.Record, error) {
	if err := t.check(); err != nil {
		return nil, err
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
	st, err := t.locked(run)
	if err != nil {
		return nil, err
	}
	out := make([]audit.Record, len(recs))
	seq, prev, now := st.seq, st.hash, ""
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
	if len(st.unsent) == 0 {
		t.order = append(t.order, run)
	}
	st.unsent = append(st.unsent, out...)
	st.seq, st.hash = seq, prev
	return out, nil
}

// appendItem is the statement that inserts run's unsent records and moves
// its head, which must be where this transaction last left it (it holds
// the lock: anything else is a bug, and fails the transaction), and
// makes mv's update of a call when mv is not nil.
func (t *tx) appendItem(run string, mv *callMove) item {
	st := t.runs[run]
	n := len(st.unsent)
	seqs := make([]int64, n)
	times, kinds, steps, prevs, hashes := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	tools := make([][]byte, n)
	data := make([]*string, n)
	for i, r := range st.unsent {
		seqs[i], times[i], kinds[i], steps[i], prevs[i], hashes[i] = r.Seq, r.Time, r.Kind, r.Step, r.Prev, r.Hash
		tools[i] = []byte(r.Tool)
		data[i] = jsonArg(r.Data)
	}
	it := item{
		sql: `WITH ins AS (INSERT INTO audit (run, seq, time, kind, step, tool, data, prev, hash)
			SELECT $1, u.* FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::text[], $8::text[], $9::text[]) AS u),
		up AS (UPDATE runs SET audit_last_seq = $10, audit_last_hash = $11 WHERE id = $1 AND audit_last_seq = $12 RETURNING 1)
		SELECT CASE WHEN EXISTS (SELECT 1 FROM up) THEN true ELSE op_check(false, '` + codeHead + `', 'the audit head of the run moved while this transaction held its lock') END`,
		args: []any{run, seqs, times, kinds, steps, tools, data, prevs, hashes, st.seq, st.hash, st.dbSeq},
		what: "appending audit records",
	}
	if mv != nil {
		// The call's placeholders follow: step, attempt, index and
		// states at $13 to $16, set's own ($6, ...) from $17.
		set := placeholder.ReplaceAllStringFunc(mv.set, func(p string) string {
			n, _ := strconv.Atoi(p[1:])
			return "$" + strconv.Itoa(n-6+17)
		})
		it.sql = `WITH ins AS (INSERT INTO audit (run, seq, time, kind, step, tool, data, prev, hash)
			SELECT $1, u.* FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::text[], $8::text[], $9::text[]) AS u),
		up AS (UPDATE runs SET audit_last_seq = $10, audit_last_hash = $11 WHERE id = $1 AND audit_last_seq = $12 RETURNING 1),
		mv AS (UPDATE calls SET ` + set + ` WHERE run = $1 AND step = $13 AND attempt = $14 AND idx = $15 AND state = ANY($16::text[]) RETURNING 1)
		SELECT CASE WHEN EXISTS (SELECT 1 FROM up) THEN true ELSE op_check(false, '` + codeHead + `', 'the audit head of the run moved while this transaction held its lock') END,
			CASE WHEN EXISTS (SELECT 1 FROM mv) THEN true ELSE op_check(false, CASE WHEN c.state IS NULL THEN '` + codeNotFound + `' ELSE '` + codeState + `' END, coalesce(c.state, '')) END
		FROM (SELECT 1) AS one LEFT JOIN calls c ON c.run = $1 AND c.step = $13 AND c.attempt = $14 AND c.idx = $15`
		it.args = append(append(it.args, mv.k.Step, mv.k.Attempt, mv.k.Index, mv.from), mv.args...)
		it.what = mv.k.String()
		it.onErr = mv.mapErr
	}
	st.dbSeq = st.seq
	st.unsent = nil
	return it
}

// Audit returns a run's audit records in order, as this transaction sees
// them.
func (t *tx) Audit(run string) ([]audit.Record, error) {
	var out []audit.Record
	err := t.send(item{sql: auditQuery, args: []any{run}, what: "reading audit",
		rows: func(rows pgx.Rows) (err error) { out, err = scanAudit(rows); return err }})
	return out, err
}

// VerifyAudit is [Store.VerifyAudit] inside the transaction.
func (t *tx) VerifyAudit(run string) ([]audit.Problem, error) {
	var probs []audit.Problem
	err := t.send(item{sql: verifyQuery, args: []any{run}, what: "reading audit",
		rows: func(rows pgx.Rows) (err error) { probs, err = verifyRows(rows, run); return err }})
	return probs, err
}

const auditQuery = `SELECT run, seq, time, kind, step, tool, data, prev, hash FROM audit WHERE run = $1 ORDER BY seq`

// verifyQuery reads a run's head and records in one statement: one
// snapshot.
const verifyQuery = `SELECT r.audit_last_seq, r.audit_last_hash, a.run, a.seq, a.time, a.kind, a.step, a.tool, a.data, a.prev, a.hash
	FROM runs r LEFT JOIN audit a ON a.run = r.id WHERE r.id = $1 ORDER BY a.seq`

// Audit returns a run's audit records in order.
func (s *Store) Audit(ctx context.Context, run string) ([]audit.Record, error) {
	rows, err := s.pool.Query(ctx, auditQuery, run)
	if err != nil {
		return nil, fmt.Errorf("store: reading audit: %w", err)
	}
	return scanAudit(rows)
}

func scanAudit(rows pgx.Rows) ([]audit.Record, error) {
	defer rows.Close()
	var out []audit.Record
	for rows.Next() {
		var r audit.Record
		var tool []byte
		var data *string
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
// run row records them.
func (s *Store) AuditHead(ctx context.Context, run string) (seq int64, hash string, err error) {
	return auditHead(ctx, s.pool, run)
}

func auditHead(ctx context.Context, q reader, run string) (seq int64, hash string, err error) {
	err = q.QueryRow(ctx, `SELECT audit_last_seq, audit_last_hash FROM runs WHERE id = $1`, run).Scan(&seq, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", fmt.Errorf("%w: run %q", store.ErrNotFound, run)
	}
	if err != nil {
		return 0, "", fmt.Errorf("store: reading the audit head: %w", err)
	}
	return seq, hash, nil
}

// VerifyAudit reads a run's records and head in one statement (one
// snapshot) and checks them with [audit.Verify].
func (s *Store) VerifyAudit(ctx context.Context, run string) ([]audit.Problem, error) {
	rows, err := s.pool.Query(ctx, verifyQuery, run)
	if err != nil {
		return nil, fmt.Errorf("store: reading audit: %w", err)
	}
	return verifyRows(rows, run)
}

func verifyRows(rows pgx.Rows, run string) ([]audit.Problem, error) {
	defer rows.Close()
	// Each record is checked as it is read: what is kept is the
	// problems and the last record's hash, however long the log.
	var (
		seq   int64
		hash  string
		found bool
		v     audit.Verifier
	)
	for rows.Next() {
		var r struct {
			run, time, kind, step, prev, hash *string
			seq                               *int64
			tool                              []byte
			data                              *string
		}
		if err := rows.Scan(&seq, &hash, &r.run, &r.seq, &r.time, &r.kind, &r.step, &r.tool, &r.data, &r.prev, &r.hash); err != nil {
			return nil, fmt.Errorf("store: reading audit: %w", err)
		}
		found = true
		if r.seq == nil {
			continue // a run without records
		}
		v.Add(audit.Record{Run: *r.run, Seq: *r.seq, Time: *r.time, Kind: *r.kind, Step: *r.step, Tool: string(r.tool),
			Data: jsonValue(r.data), Prev: *r.prev, Hash: *r.hash})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading audit: %w", err)
	}
	if !found {
		return nil, fmt.Errorf("%w: run %q", store.ErrNotFound, run)
	}
	return v.EndHead(seq, hash), nil
}

// AuditPage returns at most limit of a run's records whose seq is above
// after, in seq order ([store.AuditPager]): none past the end. A limit
// below 1 is an error.
func (s *Store) AuditPage(ctx context.Context, run string, after int64, limit int) ([]audit.Record, error) {
	return auditPage(ctx, s.pool, run, after, limit)
}

func auditPage(ctx context.Context, q reader, run string, after int64, limit int) ([]audit.Record, error) {
	if limit < 1 {
		return nil, fmt.Errorf("store: reading audit: a page of %d records (at least 1)", limit)
	}
	rows, err := q.Query(ctx, auditPageQuery, run, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: reading audit: %w", err)
	}
	return scanAudit(rows)
}

const auditPageQuery = `SELECT run, seq, time, kind, step, tool, data, prev, hash FROM audit WHERE run = $1 AND seq > $2 ORDER BY seq LIMIT $3`

// placeholder matches a statement's $N.
var placeholder = regexp.MustCompile(`\$[0-9]+`)

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
