package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/openplaybook/openplaybook/store"

	"github.com/go-json-experiment/json/jsontext"
)

// StartCall records a new call in a running step attempt and returns it
// with Index (the next index in that attempt), State and Started set: the
// decision allowed gives state started, refused gives refused (finished
// now), waiting gives waiting. Of c, StartCall reads Run, Step, Attempt,
// Tool, DefDigest, Args, ArgsDigest, Decision, Code, Reason and
// SideEffecting.
func (t *Tx) StartCall(c store.Call) (store.Call, error) {
	switch c.Decision {
	case store.DecisionAllowed:
		c.State = store.CallStarted
	case store.DecisionRefused:
		c.State = store.CallRefused
	case store.DecisionWaiting:
		c.State = store.CallWaiting
	default:
		return store.Call{}, fmt.Errorf("store: call decision %q is not one of allowed, refused, waiting", c.Decision)
	}
	if t.done {
		return store.Call{}, store.ErrTxDone
	}
	now, at := t.stamp()
	c.Started = at
	c.Finished = time.Time{}
	var finished any
	if c.State == store.CallRefused {
		c.Finished = at
		finished = now
	}
	c.Result, c.Error = nil, ""
	return t.insertCall(c, now, finished, "starting call")
}

// RecordCall records a call that has already been decided, and run when
// allowed, in its final state, in one INSERT: what [Tx.StartCall] and
// [Tx.FinishCall] record in two statements, for a call (a read) that is
// recorded only after it ran. c.State is succeeded (with c.Result) or
// failed (with c.Error), with c.Decision allowed; or refused, with
// c.Decision refused (and c.Reason; Result and Error are cleared). Of c,
// RecordCall also reads Run, Step, Attempt, Tool, DefDigest, Args,
// ArgsDigest, Code, Reason and SideEffecting, and Started and Finished, which
// default to now when zero. It makes the checks StartCall makes (the run
// has not ended, the step attempt is running), assigns Index as StartCall
// does and returns the call as recorded.
func (t *Tx) RecordCall(c store.Call) (store.Call, error) {
	if t.done {
		return store.Call{}, store.ErrTxDone
	}
	_, at := t.stamp()
	c, err := recordable(c, at)
	if err != nil {
		return store.Call{}, err
	}
	return t.insertCall(c, formatTime(c.Started), formatTime(c.Finished), "recording call")
}

// recordable checks a call RecordCall takes and returns it as it is
// recorded: a refused call without result or error, times in UTC, those
// not given now.
func recordable(c store.Call, now time.Time) (store.Call, error) {
	switch {
	case (c.State == store.CallSucceeded || c.State == store.CallFailed) && c.Decision == store.DecisionAllowed:
	case c.State == store.CallRefused && c.Decision == store.DecisionRefused:
		c.Result, c.Error = nil, ""
	default:
		return store.Call{}, fmt.Errorf("store: recording a call %s with decision %q: want succeeded or failed with allowed, or refused with refused",
			c.State, c.Decision)
	}
	if c.Started.IsZero() {
		c.Started = now
	}
	if c.Finished.IsZero() {
		c.Finished = now
	}
	c.Started, c.Finished = c.Started.UTC().Round(0), c.Finished.UTC().Round(0)
	if c.Finished.Before(c.Started) {
		return store.Call{}, fmt.Errorf("store: recording a call that finished (%s) before it started (%s)",
			formatTime(c.Finished), formatTime(c.Started))
	}
	return c, nil
}

// maxCallRows bounds the rows of one multi-row call INSERT (17
// parameters each), and so the number of distinct statements RecordCalls
// prepares.
const maxCallRows = 16

// RecordCalls records several calls of one step attempt, in order, as
// [Tx.RecordCall] would one after another, and returns them with their
// Index: the step attempt is checked once, the next index is read once,
// and the rows go in multi-row INSERTs (per 16 calls). Each call must be
// one RecordCall takes, and all must name the same Run, Step and Attempt.
// An error is the Tx function's to return: the transaction (or the
// queued function's savepoint) then rolls back what RecordCalls
// inserted before it. No calls is no change.
func (t *Tx) RecordCalls(calls []store.Call) ([]store.Call, error) {
	if t.done {
		return nil, store.ErrTxDone
	}
	if len(calls) == 0 {
		return nil, nil
	}
	out := make([]store.Call, len(calls))
	_, at := t.stamp()
	first := calls[0].CallKey
	for i, c := range calls {
		if c.Run != first.Run || c.Step != first.Step || c.Attempt != first.Attempt {
			return nil, fmt.Errorf("store: recording calls of step %q attempt %d and step %q attempt %d (runs %s, %s) together: one step attempt at a time",
				first.Step, first.Attempt, c.Step, c.Attempt, first.Run, c.Run)
		}
		c, err := recordable(c, at)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	var next int
	err := t.row(`SELECT (SELECT coalesce(max(idx) + 1, 0) FROM calls WHERE run = ?1 AND step = ?2 AND attempt = ?3)
		FROM runs r JOIN steps s ON s.run = r.id AND s.step = ?2 AND s.attempt = ?3
		WHERE r.id = ?1 AND r.status IN ('running', 'waiting') AND s.status = 'running'`,
		first.Run, first.Step, first.Attempt).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, t.whyNoCall(out[0], "recording calls")
	}
	if err != nil {
		return nil, fmt.Errorf("store: recording calls: %w", err)
	}
	for rest := out; len(rest) > 0; {
		chunk := rest[:min(len(rest), maxCallRows)]
		rest = rest[len(chunk):]
		args := make([]any, 0, 17*len(chunk))
		for i := range chunk {
			c := &chunk[i]
			c.Index = next
			next++
			args = append(args, c.Run, c.Step, c.Attempt, c.Index, []byte(c.Tool), c.DefDigest, jsonArg(c.Args), c.ArgsDigest,
				string(c.Decision), c.Reason, string(c.State), c.SideEffecting, jsonArg(c.Result), c.Error,
				formatTime(c.Started), formatTime(c.Finished), c.Code)
		}
		if _, err := t.exec(recordCallsQuery(len(chunk)), args...); err != nil {
			return nil, fmt.Errorf("store: recording calls: %w", err)
		}
	}
	return out, nil
}

var recordCallsQueries [maxCallRows + 1]string

func init() {
	const row = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	for n := 1; n <= maxCallRows; n++ {
		recordCallsQueries[n] = `INSERT INTO calls (run, step, attempt, idx, tool, def_digest, args, args_digest, decision, reason, state,
		side_effecting, result, error, started_at, finished_at, code) VALUES ` + row + strings.Repeat(", "+row, n-1)
	}
}

func recordCallsQuery(n int) string { return recordCallsQueries[n] }

// insertCall inserts c as the next call of its step attempt, when the run
// has not ended and the attempt is running, in one statement, and returns
// it with its Index.
func (t *Tx) insertCall(c store.Call, started string, finished any, what string) (store.Call, error) {
	err := t.row(`INSERT INTO calls (run, step, attempt, idx, tool, def_digest, args, args_digest, decision, reason, state,
		side_effecting, result, error, started_at, finished_at, code)
		SELECT ?1, ?2, ?3, (SELECT coalesce(max(idx) + 1, 0) FROM calls WHERE run = ?1 AND step = ?2 AND attempt = ?3),
			?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16
		FROM runs r JOIN steps s ON s.run = r.id AND s.step = ?2 AND s.attempt = ?3
		WHERE r.id = ?1 AND r.status IN ('running', 'waiting') AND s.status = 'running'
		RETURNING idx`,
		c.Run, c.Step, c.Attempt, []byte(c.Tool), c.DefDigest, jsonArg(c.Args), c.ArgsDigest, string(c.Decision), c.Reason,
		string(c.State), c.SideEffecting, jsonArg(c.Result), c.Error, started, finished, c.Code).Scan(&c.Index)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Call{}, t.whyNoCall(c, what)
	}
	if err != nil {
		return store.Call{}, fmt.Errorf("store: %s: %w", what, err)
	}
	return c, nil
}

// whyNoCall says why a call could not be inserted into its step attempt.
func (t *Tx) whyNoCall(c store.Call, what string) error {
	var runStatus, stepStatus sql.NullString
	err := t.row(`SELECT r.status, s.status
		FROM runs r LEFT JOIN steps s ON s.run = r.id AND s.step = ?2 AND s.attempt = ?3
		WHERE r.id = ?1`, c.Run, c.Step, c.Attempt).Scan(&runStatus, &stepStatus)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: run %q", store.ErrNotFound, c.Run)
	case err != nil:
		return fmt.Errorf("store: %s: %w", what, err)
	case store.RunStatus(runStatus.String).Ended():
		return fmt.Errorf("%w: run %s has ended (%s)", store.ErrState, c.Run, runStatus.String)
	case !stepStatus.Valid:
		return fmt.Errorf("%w: step %q attempt %d of run %s", store.ErrNotFound, c.Step, c.Attempt, c.Run)
	case store.StepStatus(stepStatus.String) != store.StepRunning:
		return fmt.Errorf("%w: step %q attempt %d of run %s is %s, not running", store.ErrState, c.Step, c.Attempt, c.Run, stepStatus.String)
	}
	return fmt.Errorf("store: %s: the call was not inserted (run %s, step attempt %s)", what, runStatus.String, stepStatus.String)
}

// FinishCall records the outcome of a started call: succeeded with its
// result, or failed with its error text. A call that is outcome_unknown
// can be finished too, when a person has found out what happened.
func (t *Tx) FinishCall(k store.CallKey, state store.CallState, result jsontext.Value, errText string) error {
	if state != store.CallSucceeded && state != store.CallFailed {
		return fmt.Errorf("store: a call finishes as succeeded or failed, not %q", state)
	}
	return t.moveCall(k, []store.CallState{store.CallStarted, store.CallOutcomeUnknown},
		`state = ?, result = ?, error = ?, finished_at = ?`, string(state), jsonArg(result), errText, t.now())
}

// DecideCall settles a waiting call once its approval is decided: allowed
// makes it started (decision allowed, ready to run), otherwise it is
// refused with the refusal code and the reason.
func (t *Tx) DecideCall(k store.CallKey, allowed bool, code, reason string) error {
	if allowed {
		return t.moveCall(k, []store.CallState{store.CallWaiting}, `state = 'started', decision = 'allowed'`)
	}
	return t.moveCall(k, []store.CallState{store.CallWaiting}, `state = 'refused', decision = 'refused', code = ?, reason = ?, finished_at = ?`, code, reason, t.now())
}

// MarkOutcomeUnknown marks a started call whose outcome was never
// recorded (the process died while it ran) as outcome_unknown, and
// creates the pending decision a person must take: an [Approval] of kind
// outcome_unknown for exactly that call, without expiry. Approving it lets
// the same call (same step, tool, definition and arguments) run once
// more, through [Tx.ConsumeApproval]; denying it means it is not re-run.
func (t *Tx) MarkOutcomeUnknown(k store.CallKey, reason string) (store.Approval, error) {
	if err := t.moveCall(k, []store.CallState{store.CallStarted}, `state = 'outcome_unknown', reason = ?`, reason); err != nil {
		return store.Approval{}, err
	}
	c, err := t.Call(k)
	if err != nil {
		return store.Approval{}, err
	}
	key := k
	return t.CreateApproval(store.Approval{
		Kind:       store.KindOutcomeUnknown,
		Run:        k.Run,
		Step:       k.Step,
		Tool:       c.Tool,
		DefDigest:  c.DefDigest,
		ArgsDigest: c.ArgsDigest,
		Call:       &key,
		Reason:     reason,
	})
}

func (t *Tx) moveCall(k store.CallKey, from []store.CallState, set string, args ...any) error {
	q := `UPDATE calls SET ` + set + ` WHERE run = ? AND step = ? AND attempt = ? AND idx = ? AND state IN (?` + strings.Repeat(", ?", len(from)-1) + `)`
	args = append(args, k.Run, k.Step, k.Attempt, k.Index)
	for _, f := range from {
		args = append(args, string(f))
	}
	res, err := t.exec(q, args...)
	if err := affected(res, err, errNoRow); err != nil {
		if !errors.Is(err, errNoRow) {
			return fmt.Errorf("store: %s: %w", k, err)
		}
		c, err := t.Call(k)
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: %s is %s", store.ErrState, k, c.State)
	}
	return nil
}

// Call reads one call inside the transaction, or [ErrNotFound].
func (t *Tx) Call(k store.CallKey) (store.Call, error) {
	if t.done {
		return store.Call{}, store.ErrTxDone
	}
	cs, err := listCalls(context.Background(), t, k.Run, store.CallFilter{Step: k.Step, Attempt: k.Attempt, Index: &k.Index})
	if err != nil {
		return store.Call{}, err
	}
	if len(cs) == 0 {
		return store.Call{}, fmt.Errorf("%w: %s", store.ErrNotFound, k)
	}
	return cs[0], nil
}

// Calls returns a run's calls that match f, in the order they started.
// To find the calls a crash interrupted, filter on [CallStarted].
func (s *Store) Calls(ctx context.Context, run string, f store.CallFilter) ([]store.Call, error) {
	return listCalls(ctx, s.pool(), run, f)
}

// Calls is [Store.Calls] inside the transaction: it sees the
// transaction's own changes and its batch-mates'.
func (t *Tx) Calls(run string, f store.CallFilter) ([]store.Call, error) {
	if t.done {
		return nil, store.ErrTxDone
	}
	return listCalls(context.Background(), t, run, f)
}

// CallPage returns at most limit of the calls of one step attempt of a
// run whose index is above after, in index order ([store.CallPager]):
// none past the end. A limit below 1 is an error.
func (s *Store) CallPage(ctx context.Context, run, step string, attempt, after, limit int) ([]store.Call, error) {
	return callPage(ctx, s.pool(), run, step, attempt, after, limit)
}

func callPage(ctx context.Context, q querier, run, step string, attempt, after, limit int) ([]store.Call, error) {
	if limit < 1 {
		return nil, fmt.Errorf("store: reading calls: a page of %d calls (at least 1)", limit)
	}
	rows, err := q.query(ctx, callPageQuery, run, step, attempt, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: reading calls: %w", err)
	}
	return scanCallsOf(rows, &store.CallKey{Run: run, Step: step, Attempt: attempt}, min(limit, 1024))
}

// callPageQuery reads a page of one step attempt's calls: without the
// key's first three columns, which are the query's, and the times, 12
// columns of 17 (a long run's calls are read a page at a time by
// `audit --verify`).
const callPageQuery = `SELECT idx, tool, def_digest, args, args_digest, decision, code, reason, state, side_effecting,
	result, error FROM calls WHERE run = ? AND step = ? AND attempt = ? AND idx > ? ORDER BY idx LIMIT ?`

// CallCount returns the number of a run's calls ([store.CallPager]).
func (s *Store) CallCount(ctx context.Context, run string) (int, error) {
	return callCount(ctx, s.pool(), run)
}

func callCount(ctx context.Context, q querier, run string) (int, error) {
	var n int
	if err := q.queryRow(ctx, `SELECT count(*) FROM calls WHERE run = ?`, run).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: counting calls: %w", err)
	}
	return n, nil
}

func listCalls(ctx context.Context, q querier, run string, f store.CallFilter) ([]store.Call, error) {
	query := `SELECT run, step, attempt, idx, tool, def_digest, args, args_digest, decision, code, reason, state, side_effecting,
		result, error, started_at, finished_at FROM calls WHERE run = ?`
	args := []any{run}
	if f.Step != "" {
		query += ` AND step = ?`
		args = append(args, f.Step)
	}
	if f.Attempt != 0 {
		query += ` AND attempt = ?`
		args = append(args, f.Attempt)
	}
	if f.Index != nil {
		query += ` AND idx = ?`
		args = append(args, *f.Index)
	}
	if len(f.States) > 0 {
		query += ` AND state IN (?` + strings.Repeat(", ?", len(f.States)-1) + `)`
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	query += ` ORDER BY rowid`
	rows, err := q.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: reading calls: %w", err)
	}
	return scanCalls(rows)
}

// scanCalls reads call rows (the columns of listCalls) and closes rows.
func scanCalls(rows *sql.Rows) ([]store.Call, error) { return scanCallsOf(rows, nil, 0) }

// scanCallsOf reads calls whose rows begin with run, step and attempt,
// or, when key is not nil, with idx and end before the times (the calls
// are then all of key's step attempt, their times zero); size is the
// room to make for them.
func scanCallsOf(rows *sql.Rows, key *store.CallKey, size int) ([]store.Call, error) {
	defer rows.Close()
	out := make([]store.Call, 0, size)
	var c store.Call
	var tool, args, result []byte
	var decision, state string
	var started, finished sql.NullString
	dest := []any{&c.Run, &c.Step, &c.Attempt, &c.Index, &tool, &c.DefDigest, &args, &c.ArgsDigest, &decision,
		&c.Code, &c.Reason, &state, &c.SideEffecting, &result, &c.Error, &started, &finished}
	if key != nil {
		dest = dest[3 : len(dest)-2]
	}
	for rows.Next() {
		c = store.Call{}
		if key != nil {
			c.Run, c.Step, c.Attempt = key.Run, key.Step, key.Attempt
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("store: reading calls: %w", err)
		}
		c.Tool = string(tool)
		c.Args, c.Result = jsonValue(args), jsonValue(result)
		c.Decision, c.State = store.Decision(decision), store.CallState(state)
		c.Started, c.Finished = parseTime(started), parseTime(finished)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading calls: %w", err)
	}
	return out, nil
}
