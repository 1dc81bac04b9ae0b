package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// CreateRun stores a new run, as store/sqlite's does: it sets ID (when
// r.ID is empty), DocumentDigest, Status (running), CurrentStep, Created,
// Updated and the audit head. The INSERT goes with the next batch; a
// duplicate id fails the transaction there.
func (t *tx) CreateRun(r store.Run) (store.Run, error) {
	if err := t.check(); err != nil {
		return store.Run{}, err
	}
	if r.ID == "" {
		r.ID = newID("run_")
	}
	if r.Document == nil {
		r.Document = []byte{}
	}
	sum := sha256.Sum256(r.Document)
	r.DocumentDigest = hex.EncodeToString(sum[:])
	r.Status = store.RunRunning
	r.CurrentStep, r.Reason = "", ""
	now, at := t.stamp()
	r.Created, r.Updated = at, at
	r.AuditSeq, r.AuditHash = 0, audit.Genesis
	if err := t.defer_(item{
		sql: `INSERT INTO runs (id, playbook_id, playbook_version, document_digest, document, harness_path, input,
		status, current_step, reason, created_at, updated_at, audit_last_seq, audit_last_hash)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'running', '', '', $8, $8, 0, $9)`,
		args: []any{r.ID, r.PlaybookID, r.PlaybookVersion, r.DocumentDigest, r.Document, r.HarnessPath, jsonArg(r.Input), now, audit.Genesis},
		what: "creating run",
	}); err != nil {
		return store.Run{}, err
	}
	if t.runs[r.ID] == nil {
		t.runs[r.ID] = &runState{status: string(store.RunRunning), hash: audit.Genesis}
		t.locking[r.ID] = true // the new row is this transaction's until it commits
	}
	return r, nil
}

// SetRunStatus sets a run's status and reason; an ended run keeps its
// status ([store.ErrState]).
func (t *tx) SetRunStatus(run string, status store.RunStatus, reason string) error {
	if !status.Valid() {
		return fmt.Errorf("store: run status %q is not one of running, waiting, completed, rejected, failed", status)
	}
	st, err := t.open(run)
	if err != nil {
		return err
	}
	if err := t.defer_(item{sql: `UPDATE runs SET status = $1, reason = $2, updated_at = $3 WHERE id = $4`,
		args: []any{string(status), reason, t.now(), run}, what: "setting run status"}); err != nil {
		return err
	}
	st.status = string(status)
	return nil
}

// ReopenRun moves a failed run back to running; any other status is
// [store.ErrState].
func (t *tx) ReopenRun(run string) error {
	st, err := t.locked(run)
	if err != nil {
		return err
	}
	if st.status != string(store.RunFailed) {
		return fmt.Errorf("%w: run %s is %s; only a failed run is reopened", store.ErrState, run, st.status)
	}
	if err := t.defer_(item{sql: `UPDATE runs SET status = 'running', reason = '', updated_at = $1 WHERE id = $2`,
		args: []any{t.now(), run}, what: "reopening run"}); err != nil {
		return err
	}
	st.status = string(store.RunRunning)
	return nil
}

// Run reads a run inside the transaction.
func (t *tx) Run(id string) (store.Run, error) {
	var runs []store.Run
	if err := t.send(item{sql: `SELECT ` + fmt.Sprintf(runCols, "document") + ` FROM runs WHERE id = $1`, args: []any{id},
		what: "reading run", rows: func(rows pgx.Rows) (err error) { runs, err = scanRuns(rows); return err }}); err != nil {
		return store.Run{}, err
	}
	if len(runs) == 0 {
		return store.Run{}, fmt.Errorf("%w: run %q", store.ErrNotFound, id)
	}
	return runs[0], nil
}

const runCols = `id, playbook_id, playbook_version, document_digest, %s, harness_path, input, status, current_step, reason,
	created_at, updated_at, audit_last_seq, audit_last_hash, owner, owner_epoch`

// GetRun returns the run with the given id, or [store.ErrNotFound].
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	return getRun(ctx, s.pool, id)
}

func getRun(ctx context.Context, q reader, id string) (store.Run, error) {
	rows, err := q.Query(ctx, `SELECT `+fmt.Sprintf(runCols, "document")+` FROM runs WHERE id = $1`, id)
	if err != nil {
		return store.Run{}, fmt.Errorf("store: reading run: %w", err)
	}
	runs, err := scanRuns(rows)
	if err != nil {
		return store.Run{}, err
	}
	if len(runs) == 0 {
		return store.Run{}, fmt.Errorf("%w: run %q", store.ErrNotFound, id)
	}
	return runs[0], nil
}

// ListRuns returns the runs (with one of statuses, when given), newest
// first, without their documents.
func (s *Store) ListRuns(ctx context.Context, statuses ...store.RunStatus) ([]store.Run, error) {
	query := `SELECT ` + fmt.Sprintf(runCols, "NULL::bytea") + ` FROM runs`
	var args []any
	if len(statuses) > 0 {
		ss := make([]string, len(statuses))
		for i, st := range statuses {
			ss[i] = string(st)
		}
		query += ` WHERE status = ANY($1)`
		args = append(args, ss)
	}
	query += ` ORDER BY created_at DESC, id`
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: listing runs: %w", err)
	}
	return scanRuns(rows)
}

func scanRuns(rows pgx.Rows) ([]store.Run, error) {
	defer rows.Close()
	var out []store.Run
	for rows.Next() {
		var r store.Run
		var input, created, updated *string
		var status string
		if err := rows.Scan(&r.ID, &r.PlaybookID, &r.PlaybookVersion, &r.DocumentDigest, &r.Document, &r.HarnessPath,
			&input, &status, &r.CurrentStep, &r.Reason, &created, &updated, &r.AuditSeq, &r.AuditHash, &r.Owner, &r.OwnerEpoch); err != nil {
			return nil, fmt.Errorf("store: reading run: %w", err)
		}
		r.Input = jsonValue(input)
		r.Status = store.RunStatus(status)
		r.Created, r.Updated = parseTime(created), parseTime(updated)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading runs: %w", err)
	}
	return out, nil
}

// StartStep records a new attempt at step, running, makes it the run's
// current step and returns the attempt number. The run must not have
// ended.
func (t *tx) StartStep(run, step string) (attempt int, err error) {
	if _, err := t.open(run); err != nil {
		return 0, err
	}
	now := t.now()
	got := false
	if err := t.send(item{
		sql: `INSERT INTO steps (run, step, attempt, status, output, error, started_at)
		SELECT $1, $2, coalesce(max(attempt), 0) + 1, 'running', NULL, '', $3 FROM steps WHERE run = $1 AND step = $2
		RETURNING attempt`,
		args: []any{run, step, now}, what: "starting step",
		rows: func(rows pgx.Rows) error {
			if rows.Next() {
				got = true
				return rows.Scan(&attempt)
			}
			return nil
		},
	}); err != nil {
		return 0, err
	}
	if !got {
		return 0, fmt.Errorf("store: starting step %q: no row inserted", step)
	}
	if err := t.defer_(item{sql: `UPDATE runs SET current_step = $1, updated_at = $2 WHERE id = $3`,
		args: []any{step, now, run}, what: "starting step"}); err != nil {
		return 0, err
	}
	return attempt, nil
}

// SetStepWaiting and SetStepRunning move a step attempt between running
// and waiting.
func (t *tx) SetStepWaiting(run, step string, attempt int) error {
	return t.moveStep(run, step, attempt, store.StepRunning, store.StepWaiting)
}

// SetStepRunning: see [tx.SetStepWaiting].
func (t *tx) SetStepRunning(run, step string, attempt int) error {
	return t.moveStep(run, step, attempt, store.StepWaiting, store.StepRunning)
}

func (t *tx) moveStep(run, step string, attempt int, from, to store.StepStatus) error {
	n, err := t.update(run, item{sql: `UPDATE steps SET status = $1 WHERE run = $2 AND step = $3 AND attempt = $4 AND status = $5`,
		args: []any{string(to), run, step, attempt, string(from)}, what: "step " + step})
	if err != nil {
		return err
	}
	if n == 0 {
		return t.stepStateError(run, step, attempt, "is not "+string(from))
	}
	return nil
}

// FinishStep ends a running or waiting step attempt as done or failed.
func (t *tx) FinishStep(run, step string, attempt int, status store.StepStatus, output jsontext.Value, errText string) error {
	if status != store.StepDone && status != store.StepFailed {
		return fmt.Errorf("store: a step finishes as done or failed, not %q", status)
	}
	n, err := t.update(run, item{sql: `UPDATE steps SET status = $1, output = $2, error = $3, finished_at = $4
		WHERE run = $5 AND step = $6 AND attempt = $7 AND status IN ('running', 'waiting')`,
		args: []any{string(status), jsonArg(output), errText, t.now(), run, step, attempt}, what: "finishing step " + step})
	if err != nil {
		return err
	}
	if n == 0 {
		return t.stepStateError(run, step, attempt, "has finished")
	}
	return nil
}

// update takes run's lock and runs one UPDATE (or other statement)
// whose affected row count it returns.
func (t *tx) update(run string, it item) (int64, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	var n int64
	sql := `WITH u AS (` + it.sql + ` RETURNING 1) SELECT count(*) FROM u`
	it.sql = sql
	it.rows = func(rows pgx.Rows) error {
		if rows.Next() {
			return rows.Scan(&n)
		}
		return nil
	}
	if err := t.send(append(t.lockItem(run), it)...); err != nil {
		return 0, err
	}
	return n, nil
}

func (t *tx) stepStateError(run, step string, attempt int, what string) error {
	var st *string
	if err := t.send(item{sql: `SELECT status FROM steps WHERE run = $1 AND step = $2 AND attempt = $3`, args: []any{run, step, attempt},
		what: "reading step", rows: func(rows pgx.Rows) error {
			if rows.Next() {
				return rows.Scan(&st)
			}
			return nil
		}}); err != nil {
		return err
	}
	if st == nil {
		return fmt.Errorf("%w: step %q attempt %d of run %s", store.ErrNotFound, step, attempt, run)
	}
	return fmt.Errorf("%w: step %q attempt %d of run %s %s (it is %s)", store.ErrState, step, attempt, run, what, *st)
}

// Steps returns a run's step attempts in the order they started.
func (s *Store) Steps(ctx context.Context, run string) ([]store.Step, error) {
	return listSteps(ctx, s.pool, run)
}

func listSteps(ctx context.Context, q reader, run string) ([]store.Step, error) {
	rows, err := q.Query(ctx, `SELECT run, step, attempt, status, output, error, started_at, finished_at
		FROM steps WHERE run = $1 ORDER BY started_at, rowid`, run)
	if err != nil {
		return nil, fmt.Errorf("store: reading steps: %w", err)
	}
	defer rows.Close()
	var out []store.Step
	for rows.Next() {
		var st store.Step
		var status string
		var output, started, finished *string
		if err := rows.Scan(&st.Run, &st.Step, &st.Attempt, &status, &output, &st.Error, &started, &finished); err != nil {
			return nil, fmt.Errorf("store: reading steps: %w", err)
		}
		st.Status = store.StepStatus(status)
		st.Output = jsonValue(output)
		st.Started, st.Finished = parseTime(started), parseTime(finished)
		out = append(out, st)
	}
	return out, rows.Err()
}

// jsonArg binds a JSON value as text, nil as NULL.
func jsonArg(v jsontext.Value) *string {
	if len(v) == 0 {
		return nil
	}
	s := string(v)
	return &s
}

func jsonValue(s *string) jsontext.Value {
	if s == nil {
		return nil
	}
	return jsontext.Value(*s)
}

var errNoRow = errors.New("no row")

var _ = strings.Repeat
