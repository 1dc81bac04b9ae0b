package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/openplaybook/openplaybook/store"
)

// StartCall records a new call in a running step attempt, as
// store/sqlite's does, and returns it with Index, State and Started set.
// The run's lock and the INSERT (which checks the run and the attempt
// itself) go in one batch.
func (t *tx) StartCall(c store.Call) (store.Call, error) {
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
	if err := t.check(); err != nil {
		return store.Call{}, err
	}
	now, at := t.stamp()
	c.Started = at
	c.Finished = time.Time{}
	var finished *string
	if c.State == store.CallRefused {
		c.Finished = at
		finished = &now
	}
	c.Result, c.Error = nil, ""
	return t.insertCall(c, now, finished, "starting call")
}

// RecordCall records a call that has already been decided (and run when
// allowed) in its final state in one INSERT; see store/sqlite's.
func (t *tx) RecordCall(c store.Call) (store.Call, error) {
	if err := t.check(); err != nil {
		return store.Call{}, err
	}
	_, at := t.stamp()
	c, err := recordable(c, at)
	if err != nil {
		return store.Call{}, err
	}
	fin := formatTime(c.Finished)
	return t.insertCall(c, formatTime(c.Started), &fin, "recording call")
}

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

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}

// RecordCalls records several calls of one step attempt, in order, as
// RecordCall would one after another: one batch checks the attempt and
// reads the next index (with the run's lock), and one INSERT of every row
// goes with the next batch.
func (t *tx) RecordCalls(calls []store.Call) ([]store.Call, error) {
	if err := t.check(); err != nil {
		return nil, err
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
	next, got := 0, false
	if _, err := t.locked(first.Run, item{
		sql: `SELECT (SELECT coalesce(max(idx) + 1, 0) FROM calls WHERE run = $1 AND step = $2 AND attempt = $3)
		FROM runs r JOIN steps s ON s.run = r.id AND s.step = $2 AND s.attempt = $3
		WHERE r.id = $1 AND r.status IN ('running', 'waiting') AND s.status = 'running'`,
		args: []any{first.Run, first.Step, first.Attempt}, what: "recording calls",
		rows: func(rows pgx.Rows) error {
			if rows.Next() {
				got = true
				return rows.Scan(&next)
			}
			return nil
		},
	}); err != nil {
		return nil, err
	}
	if !got {
		return nil, t.whyNoCall(out[0], "recording calls")
	}
	n := len(out)
	var (
		idx, side                                = make([]int32, n), make([]int32, n)
		tool                                     = make([][]byte, n)
		def, argsDigest, decision, reason, state = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		args, result                             = make([]*string, n), make([]*string, n)
		errText, started, finished, code         = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	)
	for i := range out {
		c := &out[i]
		c.Index = next + i
		idx[i], side[i], tool[i] = int32(c.Index), int32(b01(c.SideEffecting)), []byte(c.Tool)
		def[i], argsDigest[i], decision[i], reason[i], state[i] = c.DefDigest, c.ArgsDigest, string(c.Decision), c.Reason, string(c.State)
		args[i], result[i] = jsonArg(c.Args), jsonArg(c.Result)
		errText[i], started[i], finished[i], code[i] = c.Error, formatTime(c.Started), formatTime(c.Finished), c.Code
	}
	if err := t.defer_(item{
		sql: `INSERT INTO calls (run, step, attempt, idx, tool, def_digest, args, args_digest, decision, reason, state,
		side_effecting, result, error, started_at, finished_at, code)
		SELECT $1, $2, $3, u.* FROM unnest($4::integer[], $5::bytea[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
			$11::text[], $12::integer[], $13::text[], $14::text[], $15::text[], $16::text[], $17::text[]) AS u`,
		args: []any{first.Run, first.Step, first.Attempt, idx, tool, def, args, argsDigest, decision, reason, state,
			side, result, errText, started, finished, code},
		what: "recording calls",
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// insertCall inserts c as the next call of its step attempt, when the run
// has not ended and the attempt is running, with the run's lock, in one
// batch, and returns it with its Index.
func (t *tx) insertCall(c store.Call, started string, finished *string, what string) (store.Call, error) {
	got := false
	_, err := t.locked(c.Run, item{
		sql: `INSERT INTO calls (run, step, attempt, idx, tool, def_digest, args, args_digest, decision, reason, state,
		side_effecting, result, error, started_at, finished_at, code)
		SELECT $1, $2, $3, (SELECT coalesce(max(idx) + 1, 0) FROM calls WHERE run = $1 AND step = $2 AND attempt = $3),
			$4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16
		FROM runs r JOIN steps s ON s.run = r.id AND s.step = $2 AND s.attempt = $3
		WHERE r.id = $1 AND r.status IN ('running', 'waiting') AND s.status = 'running'
		RETURNING idx`,
		args: []any{c.Run, c.Step, c.Attempt, []byte(c.Tool), c.DefDigest, jsonArg(c.Args), c.ArgsDigest, string(c.Decision), c.Reason,
			string(c.State), b01(c.SideEffecting), jsonArg(c.Result), c.Error, started, finished, c.Code},
		what: what,
		rows: func(rows pgx.Rows) error {
			if rows.Next() {
				got = true
				return rows.Scan(&c.Index)
			}
			return nil
		},
	})
	if err != nil {
		return store.Call{}, err
	}
	if !got {
		return store.Call{}, t.whyNoCall(c, what)
	}
	return c, nil
}

// whyNoCall says why a call could not be inserted into its step attempt.
func (t *tx) whyNoCall(c store.Call, what string) error {
	st, err := t.locked(c.Run)
	if err != nil {
		return err
	}
	if store.RunStatus(st.status).Ended() {
		return fmt.Errorf("%w: run %s has ended (%s)", store.ErrState, c.Run, st.status)
	}
	var stepStatus *string
	if err := t.send(item{sql: `SELECT status FROM steps WHERE run = $1 AND step = $2 AND attempt = $3`,
		args: []any{c.Run, c.Step, c.Attempt}, what: what, rows: func(rows pgx.Rows) error {
			if rows.Next() {
				return rows.Scan(&stepStatus)
			}
			return nil
		}}); err != nil {
		return err
	}
	switch {
	case stepStatus == nil:
		return fmt.Errorf("%w: step %q attempt %d of run %s", store.ErrNotFound, c.Step, c.Attempt, c.Run)
	case store.StepStatus(*stepStatus) != store.StepRunning:
		return fmt.Errorf("%w: step %q attempt %d of run %s is %s, not running", store.ErrState, c.Step, c.Attempt, c.Run, *stepStatus)
	}
	return fmt.Errorf("store: %s: the call was not inserted (run %s, step attempt %s)", what, st.status, *stepStatus)
}

// FinishCall records the outcome of a started (or outcome_unknown) call.
// The UPDATE goes with the next batch, checked in the server: a call in
// another state fails the transaction with [store.ErrState] there.
func (t *tx) FinishCall(k store.CallKey, state store.CallState, result jsontext.Value, errText string) error {
	if state != store.CallSucceeded && state != store.CallFailed {
		return fmt.Errorf("store: a call finishes as succeeded or failed, not %q", state)
	}
	return t.moveCall(k, []string{string(store.CallStarted), string(store.CallOutcomeUnknown)},
		`state = $6, result = $7, error = $8, finished_at = $9`, string(state), jsonArg(result), errText, t.now())
}

// DecideCall settles a waiting call once its approval is decided.
func (t *tx) DecideCall(k store.CallKey, allowed bool, code, reason string) error {
	if allowed {
		return t.moveCall(k, []string{string(store.CallWaiting)}, `state = 'started', decision = 'allowed'`)
	}
	return t.moveCall(k, []string{string(store.CallWaiting)}, `state = 'refused', decision = 'refused', code = $6, reason = $7, finished_at = $8`,
		code, reason, t.now())
}

// MarkOutcomeUnknown marks a started call as outcome_unknown and creates
// the pending approval of kind outcome_unknown for it; see store/sqlite's.
func (t *tx) MarkOutcomeUnknown(k store.CallKey, reason string) (store.Approval, error) {
	if err := t.moveCall(k, []string{string(store.CallStarted)}, `state = 'outcome_unknown', reason = $6`, reason); err != nil {
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

// moveCall queues an UPDATE of one call in one of the states from, whose
// check the server makes (op_check): the call missing is
// [store.ErrNotFound], in another state [store.ErrState].
func (t *tx) moveCall(k store.CallKey, from []string, set string, args ...any) error {
	if err := t.lockLater(k.Run); err != nil {
		return err
	}
	mv := &callMove{k: k, from: from, set: set, args: args}
	return t.defer_(item{
		sql: `WITH u AS (UPDATE calls SET ` + set + ` WHERE run = $1 AND step = $2 AND attempt = $3 AND idx = $4 AND state = ANY($5::text[]) RETURNING 1)
		SELECT CASE WHEN EXISTS (SELECT 1 FROM u) THEN true ELSE op_check(false, CASE WHEN c.state IS NULL THEN '` + codeNotFound + `' ELSE '` + codeState + `' END, coalesce(c.state, '')) END
		FROM (SELECT 1) AS one LEFT JOIN calls c ON c.run = $1 AND c.step = $2 AND c.attempt = $3 AND c.idx = $4`,
		args:  append([]any{k.Run, k.Step, k.Attempt, k.Index, from}, args...),
		what:  k.String(),
		onErr: mv.mapErr,
		move:  mv,
	})
}

// callMove is a queued UPDATE of one call (see [tx.moveCall]): set's
// placeholders start at $6. [tx.appendItem] folds it into the statement
// of its run's audit records when it is the run's only one pending.
type callMove struct {
	k    store.CallKey
	from []string
	set  string
	args []any
}

func (mv *callMove) mapErr(pe *pgconn.PgError) error {
	switch pe.Code {
	case codeNotFound:
		return fmt.Errorf("%w: %s", store.ErrNotFound, mv.k)
	case codeState:
		return fmt.Errorf("%w: %s is %s", store.ErrState, mv.k, pe.Message)
	}
	return nil
}

// Call reads one call inside the transaction, or [store.ErrNotFound].
func (t *tx) Call(k store.CallKey) (store.Call, error) {
	cs, err := t.Calls(k.Run, store.CallFilter{Step: k.Step, Attempt: k.Attempt, Index: &k.Index})
	if err != nil {
		return store.Call{}, err
	}
	if len(cs) == 0 {
		return store.Call{}, fmt.Errorf("%w: %s", store.ErrNotFound, k)
	}
	return cs[0], nil
}

// Calls is [Store.Calls] inside the transaction.
func (t *tx) Calls(run string, f store.CallFilter) ([]store.Call, error) {
	q, args := callsQuery(run, f)
	var out []store.Call
	if err := t.send(item{sql: q, args: args, what: "reading calls", rows: func(rows pgx.Rows) (err error) {
		out, err = scanCalls(rows)
		return err
	}}); err != nil {
		return nil, err
	}
	return out, nil
}

// Calls returns a run's calls that match f, in the order they started.
func (s *Store) Calls(ctx context.Context, run string, f store.CallFilter) ([]store.Call, error) {
	return listCalls(ctx, s.pool, run, f)
}

func listCalls(ctx context.Context, r reader, run string, f store.CallFilter) ([]store.Call, error) {
	q, args := callsQuery(run, f)
	rows, err := r.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: reading calls: %w", err)
	}
	return scanCalls(rows)
}

func callsQuery(run string, f store.CallFilter) (string, []any) {
	query := `SELECT run, step, attempt, idx, tool, def_digest, args, args_digest, decision, code, reason, state, side_effecting,
		result, error, started_at, finished_at FROM calls WHERE run = $1`
	args := []any{run}
	add := func(cond string, v any) {
		args = append(args, v)
		query += ` AND ` + cond + ` $` + strconv.Itoa(len(args))
	}
	if f.Step != "" {
		add(`step =`, f.Step)
	}
	if f.Attempt != 0 {
		add(`attempt =`, f.Attempt)
	}
	if f.Index != nil {
		add(`idx =`, *f.Index)
	}
	if len(f.States) > 0 {
		ss := make([]string, len(f.States))
		for i, st := range f.States {
			ss[i] = string(st)
		}
		args = append(args, ss)
		query += ` AND state = ANY($` + strconv.Itoa(len(args)) + `::text[])`
	}
	return query + ` ORDER BY rowid`, args
}

// CallPage returns at most limit of the calls of one step attempt of a
// run whose index is above after, in index order ([store.CallPager]):
// none past the end. A limit below 1 is an error.
func (s *Store) CallPage(ctx context.Context, run, step string, attempt, after, limit int) ([]store.Call, error) {
	return callPage(ctx, s.pool, run, step, attempt, after, limit)
}

func callPage(ctx context.Context, q reader, run, step string, attempt, after, limit int) ([]store.Call, error) {
	if limit < 1 {
		return nil, fmt.Errorf("store: reading calls: a page of %d calls (at least 1)", limit)
	}
	rows, err := q.Query(ctx, `SELECT run, step, attempt, idx, tool, def_digest, args, args_digest, decision, code, reason, state, side_effecting,
		result, error, NULL::text, NULL::text FROM calls WHERE run = $1 AND step = $2 AND attempt = $3 AND idx > $4 ORDER BY idx LIMIT $5`,
		run, step, attempt, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: reading calls: %w", err)
	}
	return scanCalls(rows) // the times are not read ([store.CallPager])
}

// CallCount returns the number of a run's calls ([store.CallPager]).
func (s *Store) CallCount(ctx context.Context, run string) (int, error) {
	return callCount(ctx, s.pool, run)
}

func callCount(ctx context.Context, q reader, run string) (int, error) {
	var n int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM calls WHERE run = $1`, run).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: counting calls: %w", err)
	}
	return n, nil
}

func scanCalls(rows pgx.Rows) ([]store.Call, error) {
	defer rows.Close()
	var out []store.Call
	for rows.Next() {
		var c store.Call
		var tool []byte
		var args, result, started, finished *string
		var decision, state string
		var side int32
		if err := rows.Scan(&c.Run, &c.Step, &c.Attempt, &c.Index, &tool, &c.DefDigest, &args, &c.ArgsDigest, &decision,
			&c.Code, &c.Reason, &state, &side, &result, &c.Error, &started, &finished); err != nil {
			return nil, fmt.Errorf("store: reading calls: %w", err)
		}
		c.Tool = string(tool)
		c.SideEffecting = side != 0
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
