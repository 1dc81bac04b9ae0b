package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/openplaybook/openplaybook/store"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
)

// CreateRun stores a new run from r's PlaybookID, PlaybookVersion,
// Document, HarnessPath and Input, and returns it. It sets ID (when r.ID
// is empty), DocumentDigest, Status (running), CurrentStep, Created,
// Updated and the audit head; other fields of r are ignored.
func (t *Tx) CreateRun(r store.Run) (store.Run, error) {
	if r.ID == "" {
		r.ID = newID("run_")
	}
	if r.Document == nil {
		r.Document = []byte{}
	}
	sum := sha256.Sum256(r.Document)
	r.DocumentDigest = hex.EncodeToString(sum[:])
	r.Status = store.RunRunning
	r.CurrentStep = ""
	r.Reason = ""
	now, at := t.stamp()
	r.Created, r.Updated = at, at
	r.AuditSeq = 0
	r.AuditHash = audit.Genesis
	_, err := t.exec(`INSERT INTO runs (id, playbook_id, playbook_version, document_digest, document, harness_path, input,
		status, current_step, reason, created_at, updated_at, audit_last_seq, audit_last_hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, '', '', ?, ?, 0, ?)`,
		r.ID, r.PlaybookID, r.PlaybookVersion, r.DocumentDigest, r.Document, r.HarnessPath, jsonArg(r.Input),
		string(r.Status), now, now, audit.Genesis)
	if err != nil {
		return store.Run{}, fmt.Errorf("store: creating run: %w", err)
	}
	return r, nil
}

// SetRunStatus sets a run's status and reason. A run that has ended
// (completed, rejected, failed) keeps its status: changing it is
// [ErrState] ([Tx.ReopenRun] alone takes a failed run back to running).
func (t *Tx) SetRunStatus(run string, status store.RunStatus, reason string) error {
	if !status.Valid() {
		return fmt.Errorf("store: run status %q is not one of running, waiting, completed, rejected, failed", status)
	}
	res, err := t.exec(`UPDATE runs SET status = ?, reason = ?, updated_at = ?
		WHERE id = ? AND status IN ('running', 'waiting')`, string(status), reason, t.now(), run)
	if err != nil {
		return fmt.Errorf("store: setting run status: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	r, err := t.Run(run)
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: run %s has ended (%s)", store.ErrState, run, r.Status)
}

// ReopenRun moves a failed run back to running, with no reason: the one
// way an ended run's status changes, for a retry of its failed step
// (runtime.Session.Retry records why in the same transaction). A run that
// is not failed (running, waiting, completed, rejected) is [ErrState].
func (t *Tx) ReopenRun(run string) error {
	res, err := t.exec(`UPDATE runs SET status = 'running', reason = '', updated_at = ? WHERE id = ? AND status = 'failed'`, t.now(), run)
	if err != nil {
		return fmt.Errorf("store: reopening run: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	r, err := t.Run(run)
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: run %s is %s; only a failed run is reopened", store.ErrState, run, r.Status)
}

// Run reads a run inside the transaction.
func (t *Tx) Run(id string) (store.Run, error) {
	if t.done {
		return store.Run{}, store.ErrTxDone
	}
	return getRun(context.Background(), t, id)
}

// GetRun returns the run with the given id, or [ErrNotFound].
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	return getRun(ctx, s.pool(), id)
}

const runCols = `id, playbook_id, playbook_version, document_digest, %s, harness_path, input, status, current_step, reason,
	created_at, updated_at, audit_last_seq, audit_last_hash, owner, owner_epoch`

func getRun(ctx context.Context, q querier, id string) (store.Run, error) {
	rows, err := q.query(ctx, `SELECT `+fmt.Sprintf(runCols, "document")+` FROM runs WHERE id = ?`, id)
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

// ListRuns returns every run, newest first, without their documents
// (Document is nil; use [Store.GetRun]). With statuses, only runs in one
// of them.
func (s *Store) ListRuns(ctx context.Context, statuses ...store.RunStatus) ([]store.Run, error) {
	query := `SELECT ` + fmt.Sprintf(runCols, "NULL") + ` FROM runs`
	var args []any
	if len(statuses) > 0 {
		query += ` WHERE status IN (?` + strings.Repeat(", ?", len(statuses)-1) + `)`
		for _, st := range statuses {
			args = append(args, string(st))
		}
	}
	query += ` ORDER BY created_at DESC, id`
	rows, err := s.pool().query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: listing runs: %w", err)
	}
	return scanRuns(rows)
}

func scanRuns(rows *sql.Rows) ([]store.Run, error) {
	defer rows.Close()
	var out []store.Run
	for rows.Next() {
		var r store.Run
		var input []byte
		var status string
		var created, updated sql.NullString
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

// StartStep records a new attempt at step (one more than its last
// attempt, 1 for the first), running, makes it the run's current step and
// returns the attempt number. The run must not have ended.
func (t *Tx) StartStep(run, step string) (attempt int, err error) {
	if err := t.runOpen(run); err != nil {
		return 0, err
	}
	if err := t.row(`SELECT coalesce(max(attempt), 0) + 1 FROM steps WHERE run = ? AND step = ?`, run, step).Scan(&attempt); err != nil {
		return 0, fmt.Errorf("store: starting step: %w", err)
	}
	now := t.now()
	if _, err := t.exec(`INSERT INTO steps (run, step, attempt, status, output, error, started_at) VALUES (?, ?, ?, 'running', NULL, '', ?)`,
		run, step, attempt, now); err != nil {
		return 0, fmt.Errorf("store: starting step: %w", err)
	}
	if _, err := t.exec(`UPDATE runs SET current_step = ?, updated_at = ? WHERE id = ?`, step, now, run); err != nil {
		return 0, fmt.Errorf("store: starting step: %w", err)
	}
	return attempt, nil
}

// SetStepWaiting and SetStepRunning move a step attempt between running
// and waiting.
func (t *Tx) SetStepWaiting(run, step string, attempt int) error {
	return t.moveStep(run, step, attempt, store.StepRunning, store.StepWaiting)
}

// SetStepRunning: see [Tx.SetStepWaiting].
func (t *Tx) SetStepRunning(run, step string, attempt int) error {
	return t.moveStep(run, step, attempt, store.StepWaiting, store.StepRunning)
}

func (t *Tx) moveStep(run, step string, attempt int, from, to store.StepStatus) error {
	res, err := t.exec(`UPDATE steps SET status = ? WHERE run = ? AND step = ? AND attempt = ? AND status = ?`,
		string(to), run, step, attempt, string(from))
	if err := affected(res, err, errNoRow); err != nil {
		if errors.Is(err, errNoRow) {
			return t.stepStateError(run, step, attempt, "is not "+string(from))
		}
		return fmt.Errorf("store: step %s: %w", step, err)
	}
	return nil
}

// FinishStep ends a running or waiting step attempt as done or failed,
// with its output (JSON, may be nil) and error text.
func (t *Tx) FinishStep(run, step string, attempt int, status store.StepStatus, output jsontext.Value, errText string) error {
	if status != store.StepDone && status != store.StepFailed {
		return fmt.Errorf("store: a step finishes as done or failed, not %q", status)
	}
	res, err := t.exec(`UPDATE steps SET status = ?, output = ?, error = ?, finished_at = ?
		WHERE run = ? AND step = ? AND attempt = ? AND status IN ('running', 'waiting')`,
		string(status), jsonArg(output), errText, t.now(), run, step, attempt)
	if err := affected(res, err, errNoRow); err != nil {
		if errors.Is(err, errNoRow) {
			return t.stepStateError(run, step, attempt, "has finished")
		}
		return fmt.Errorf("store: finishing step %s: %w", step, err)
	}
	return nil
}

var errNoRow = errors.New("no row")

func (t *Tx) stepStateError(run, step string, attempt int, what string) error {
	var st string
	err := t.row(`SELECT status FROM steps WHERE run = ? AND step = ? AND attempt = ?`, run, step, attempt).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: step %q attempt %d of run %s", store.ErrNotFound, step, attempt, run)
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: step %q attempt %d of run %s %s (it is %s)", store.ErrState, step, attempt, run, what, st)
}

// runOpen checks that the run exists and has not ended.
func (t *Tx) runOpen(run string) error {
	if t.done {
		return store.ErrTxDone
	}
	var st string
	err := t.row(`SELECT status FROM runs WHERE id = ?`, run).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: run %q", store.ErrNotFound, run)
	}
	if err != nil {
		return fmt.Errorf("store: reading run: %w", err)
	}
	if store.RunStatus(st).Ended() {
		return fmt.Errorf("%w: run %s has ended (%s)", store.ErrState, run, st)
	}
	return nil
}

// Steps returns a run's step attempts in the order they started.
func (s *Store) Steps(ctx context.Context, run string) ([]store.Step, error) {
	return listSteps(ctx, s.pool(), run)
}

func listSteps(ctx context.Context, q querier, run string) ([]store.Step, error) {
	rows, err := q.query(ctx, `SELECT run, step, attempt, status, output, error, started_at, finished_at
		FROM steps WHERE run = ? ORDER BY started_at, rowid`, run)
	if err != nil {
		return nil, fmt.Errorf("store: reading steps: %w", err)
	}
	defer rows.Close()
	var out []store.Step
	for rows.Next() {
		var st store.Step
		var status string
		var output []byte
		var started, finished sql.NullString
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

// jsonArg binds a JSON value as TEXT, nil as NULL.
func jsonArg(v jsontext.Value) any {
	if len(v) == 0 {
		return nil
	}
	return string(v)
}

func jsonValue(b []byte) jsontext.Value {
	if b == nil {
		return nil
	}
	return jsontext.Value(b)
}

// ClaimRun makes owner the run's owner and moves its owner epoch up by
// one; see [store.Tx.ClaimRun]. One process uses an SQLite store, so
// nothing else claims its runs.
func (t *Tx) ClaimRun(run, owner string) (int64, error) {
	if t.done {
		return 0, store.ErrTxDone
	}
	var epoch int64
	err := t.row(`UPDATE runs SET owner = ?, owner_epoch = owner_epoch + 1 WHERE id = ? RETURNING owner_epoch`, owner, run).Scan(&epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("%w: run %q", store.ErrNotFound, run)
	}
	if err != nil {
		return 0, fmt.Errorf("store: claiming run: %w", err)
	}
	return epoch, nil
}

// Fence checks at once that the run has owner and epoch; see
// [store.Tx.Fence]. The store has one writer at a time, so nothing
// changes them before this transaction commits.
func (t *Tx) Fence(run, owner string, epoch int64) error {
	if t.done {
		return store.ErrTxDone
	}
	var o string
	var e int64
	err := t.row(`SELECT owner, owner_epoch FROM runs WHERE id = ?`, run).Scan(&o, &e)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: run %q", store.ErrNotFound, run)
	}
	if err != nil {
		return fmt.Errorf("store: reading run owner: %w", err)
	}
	if o != owner || e != epoch {
		return fmt.Errorf("%w: run %s is owned by %q at epoch %d, not %q at %d", store.ErrFenced, run, o, e, owner, epoch)
	}
	return nil
}
