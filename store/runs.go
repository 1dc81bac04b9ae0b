package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
)

// RunStatus is where a run is.
type RunStatus string

const (
	RunRunning   RunStatus = "running"   // executing, or interrupted and resumable
	RunWaiting   RunStatus = "waiting"   // waiting for a person (gate, approval, outcome-unknown decision)
	RunCompleted RunStatus = "completed" // ended normally
	RunRejected  RunStatus = "rejected"  // a gate rejected it with no onReject
	RunFailed    RunStatus = "failed"    // ended with an error
)

// Ended reports whether the status is final: completed, rejected or failed.
func (s RunStatus) Ended() bool {
	return s == RunCompleted || s == RunRejected || s == RunFailed
}

func (s RunStatus) valid() bool { return s == RunRunning || s == RunWaiting || s.Ended() }

// Run is one execution of a playbook.
type Run struct {
	ID              string         // "run_" and 16 hex digits
	PlaybookID      string         // manifest.id
	PlaybookVersion string         // manifest.version
	DocumentDigest  string         // SHA-256 (hex) of Document
	Document        []byte         // the document's bytes exactly as imported; nil from ListRuns
	HarnessPath     string         // the harness file the run was started with
	Input           jsontext.Value // the run's input (JSON); nil when none
	Status          RunStatus
	CurrentStep     string // the step last started; "" before the first
	Reason          string // why the run was rejected or failed, or is waiting
	Created         time.Time
	Updated         time.Time
	AuditSeq        int64  // the audit head: seq of the run's last audit record (0: none)
	AuditHash       string // and its hash ([audit.Genesis] when none)
}

// CreateRun stores a new run from r's PlaybookID, PlaybookVersion,
// Document, HarnessPath and Input, and returns it. It sets ID (when r.ID
// is empty), DocumentDigest, Status (running), CurrentStep, Created,
// Updated and the audit head; other fields of r are ignored.
func (t *Tx) CreateRun(r Run) (Run, error) {
	if r.ID == "" {
		r.ID = newID("run_")
	}
	if r.Document == nil {
		r.Document = []byte{}
	}
	sum := sha256.Sum256(r.Document)
	r.DocumentDigest = hex.EncodeToString(sum[:])
	r.Status = RunRunning
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
		return Run{}, fmt.Errorf("store: creating run: %w", err)
	}
	return r, nil
}

// SetRunStatus sets a run's status and reason. A run that has ended
// (completed, rejected, failed) keeps its status: changing it is
// [ErrState] ([Tx.ReopenRun] alone takes a failed run back to running).
func (t *Tx) SetRunStatus(run string, status RunStatus, reason string) error {
	if !status.valid() {
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
	return fmt.Errorf("%w: run %s has ended (%s)", ErrState, run, r.Status)
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
	return fmt.Errorf("%w: run %s is %s; only a failed run is reopened", ErrState, run, r.Status)
}

// Run reads a run inside the transaction.
func (t *Tx) Run(id string) (Run, error) {
	if t.done {
		return Run{}, ErrTxDone
	}
	return getRun(context.Background(), t, id)
}

// GetRun returns the run with the given id, or [ErrNotFound].
func (s *Store) GetRun(ctx context.Context, id string) (Run, error) {
	return getRun(ctx, s.pool(), id)
}

const runCols = `id, playbook_id, playbook_version, document_digest, %s, harness_path, input, status, current_step, reason,
	created_at, updated_at, audit_last_seq, audit_last_hash`

func getRun(ctx context.Context, q querier, id string) (Run, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+fmt.Sprintf(runCols, "document")+` FROM runs WHERE id = ?`, id)
	if err != nil {
		return Run{}, fmt.Errorf("store: reading run: %w", err)
	}
	runs, err := scanRuns(rows)
	if err != nil {
		return Run{}, err
	}
	if len(runs) == 0 {
		return Run{}, fmt.Errorf("%w: run %q", ErrNotFound, id)
	}
	return runs[0], nil
}

// ListRuns returns every run, newest first, without their documents
// (Document is nil; use [Store.GetRun]). With statuses, only runs in one
// of them.
func (s *Store) ListRuns(ctx context.Context, statuses ...RunStatus) ([]Run, error) {
	query := `SELECT ` + fmt.Sprintf(runCols, "NULL") + ` FROM runs`
	var args []any
	if len(statuses) > 0 {
		query += ` WHERE status IN (?` + strings.Repeat(", ?", len(statuses)-1) + `)`
		for _, st := range statuses {
			args = append(args, string(st))
		}
	}
	query += ` ORDER BY created_at DESC, id`
	rows, err := s.pool().QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: listing runs: %w", err)
	}
	return scanRuns(rows)
}

func scanRuns(rows *sql.Rows) ([]Run, error) {
	defer rows.Close()
	var out []Run
	for rows.Next() {
		var r Run
		var input []byte
		var status string
		var created, updated sql.NullString
		if err := rows.Scan(&r.ID, &r.PlaybookID, &r.PlaybookVersion, &r.DocumentDigest, &r.Document, &r.HarnessPath,
			&input, &status, &r.CurrentStep, &r.Reason, &created, &updated, &r.AuditSeq, &r.AuditHash); err != nil {
			return nil, fmt.Errorf("store: reading run: %w", err)
		}
		r.Input = jsonValue(input)
		r.Status = RunStatus(status)
		r.Created, r.Updated = parseTime(created), parseTime(updated)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading runs: %w", err)
	}
	return out, nil
}

// StepStatus is where a step attempt is.
type StepStatus string

const (
	StepRunning StepStatus = "running"
	StepDone    StepStatus = "done"
	StepFailed  StepStatus = "failed"
	StepWaiting StepStatus = "waiting" // a gate, or an agent step waiting for a person
)

// Step is one attempt at one step of a run. Attempts count from 1.
type Step struct {
	Run      string
	Step     string
	Attempt  int
	Status   StepStatus
	Output   jsontext.Value // nil until done, and when the step has none
	Error    string
	Started  time.Time
	Finished time.Time // zero while running or waiting
}

// StartStep records a new attempt at step (one more than its last
// attempt, 1 for the first), running, makes it the run's current step and
// returns the attempt number. The run must not have ended.
func (t *Tx) StartStep(run, step string) (attempt int, err error) {
	if err := t.runOpen(run); err != nil {
		return 0, err
	}
	if err := t.queryRow(`SELECT coalesce(max(attempt), 0) + 1 FROM steps WHERE run = ? AND step = ?`, run, step).Scan(&attempt); err != nil {
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
	return t.moveStep(run, step, attempt, StepRunning, StepWaiting)
}

// SetStepRunning: see [Tx.SetStepWaiting].
func (t *Tx) SetStepRunning(run, step string, attempt int) error {
	return t.moveStep(run, step, attempt, StepWaiting, StepRunning)
}

func (t *Tx) moveStep(run, step string, attempt int, from, to StepStatus) error {
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
func (t *Tx) FinishStep(run, step string, attempt int, status StepStatus, output jsontext.Value, errText string) error {
	if status != StepDone && status != StepFailed {
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
	err := t.queryRow(`SELECT status FROM steps WHERE run = ? AND step = ? AND attempt = ?`, run, step, attempt).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: step %q attempt %d of run %s", ErrNotFound, step, attempt, run)
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: step %q attempt %d of run %s %s (it is %s)", ErrState, step, attempt, run, what, st)
}

// runOpen checks that the run exists and has not ended.
func (t *Tx) runOpen(run string) error {
	if t.done {
		return ErrTxDone
	}
	var st string
	err := t.queryRow(`SELECT status FROM runs WHERE id = ?`, run).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: run %q", ErrNotFound, run)
	}
	if err != nil {
		return fmt.Errorf("store: reading run: %w", err)
	}
	if RunStatus(st).Ended() {
		return fmt.Errorf("%w: run %s has ended (%s)", ErrState, run, st)
	}
	return nil
}

// Steps returns a run's step attempts in the order they started.
func (s *Store) Steps(ctx context.Context, run string) ([]Step, error) {
	rows, err := s.pool().QueryContext(ctx, `SELECT run, step, attempt, status, output, error, started_at, finished_at
		FROM steps WHERE run = ? ORDER BY started_at, rowid`, run)
	if err != nil {
		return nil, fmt.Errorf("store: reading steps: %w", err)
	}
	defer rows.Close()
	var out []Step
	for rows.Next() {
		var st Step
		var status string
		var output []byte
		var started, finished sql.NullString
		if err := rows.Scan(&st.Run, &st.Step, &st.Attempt, &status, &output, &st.Error, &started, &finished); err != nil {
			return nil, fmt.Errorf("store: reading steps: %w", err)
		}
		st.Status = StepStatus(status)
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
