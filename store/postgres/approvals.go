package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/store"
)

// CreateApproval stores a pending approval and returns it; see
// store/sqlite's. The run must not have ended; the INSERT goes with the
// next batch (an approval naming a call that does not exist fails the
// transaction there).
func (t *tx) CreateApproval(a store.Approval) (store.Approval, error) {
	if a.Kind == "" {
		a.Kind = store.KindCall
	}
	if a.Kind != store.KindCall && a.Kind != store.KindOutcomeUnknown {
		return store.Approval{}, fmt.Errorf("store: approval kind %q is not call or outcome_unknown", a.Kind)
	}
	if _, err := t.open(a.Run); err != nil {
		return store.Approval{}, err
	}
	now, at := t.stamp()
	a.ID = newID("apr_")
	a.Status = store.ApprovalPending
	a.DecidedBy = ""
	a.Created = at
	a.Decided, a.Used = time.Time{}, time.Time{}
	if a.Expires.IsZero() && a.Kind == store.KindCall {
		a.Expires = at.Add(store.DefaultApprovalTTL)
	}
	a.Expires = a.Expires.UTC().Round(0)
	var callAttempt, callIdx *int
	if a.Call != nil {
		if a.Call.Run != a.Run || a.Call.Step != a.Step {
			return store.Approval{}, fmt.Errorf("store: approval for run %s step %q names %s", a.Run, a.Step, a.Call)
		}
		callAttempt, callIdx = &a.Call.Attempt, &a.Call.Index
	}
	if err := t.defer_(item{
		sql: `INSERT INTO approvals (id, kind, run, step, tool, def_digest, args_digest, call_attempt, call_idx,
		status, reason, decided_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10, '', $11, $12)`,
		args: []any{a.ID, string(a.Kind), a.Run, a.Step, []byte(a.Tool), a.DefDigest, a.ArgsDigest, callAttempt, callIdx,
			a.Reason, now, nullTime(a.Expires)},
		what: "creating approval",
	}); err != nil {
		return store.Approval{}, err
	}
	return a, nil
}

// DecideApproval approves or denies a pending approval; see
// store/sqlite's ([store.ErrState], [store.ErrExpired]).
func (t *tx) DecideApproval(id string, approve bool, reason, decidedBy string) (store.Approval, error) {
	a, err := t.Approval(id)
	if err != nil {
		return store.Approval{}, err
	}
	if a.Status != store.ApprovalPending {
		return store.Approval{}, fmt.Errorf("%w: approval %s is %s", store.ErrState, id, a.Status)
	}
	now, at := t.stamp()
	if !a.Expires.IsZero() && !at.Before(a.Expires) {
		return store.Approval{}, fmt.Errorf("%w: approval %s expired at %s", store.ErrExpired, id, formatTime(a.Expires))
	}
	a.Status = store.ApprovalDenied
	if approve {
		a.Status = store.ApprovalApproved
	}
	a.Reason, a.DecidedBy, a.Decided = reason, decidedBy, at
	n, err := t.update(a.Run, item{sql: `UPDATE approvals SET status = $1, reason = $2, decided_by = $3, decided_at = $4 WHERE id = $5 AND status = 'pending'`,
		args: []any{string(a.Status), reason, decidedBy, now, id}, what: "deciding approval"})
	if err != nil {
		return store.Approval{}, err
	}
	if n == 0 {
		return store.Approval{}, fmt.Errorf("%w: approval %s is no longer pending", store.ErrState, id)
	}
	return a, nil
}

// ConsumeApproval lets one call through; see store/sqlite's. With the
// run's lock, one UPDATE ... RETURNING.
func (t *tx) ConsumeApproval(run, step, tool, defDigest, argsDigest string) (store.Approval, bool, error) {
	return t.consume(run, `run = $2 AND step = $3 AND tool = $4 AND def_digest = $5 AND args_digest = $6`, run, step, []byte(tool), defDigest, argsDigest)
}

// ConsumeApprovalFor lets exactly one recorded call through; see
// store/sqlite's.
func (t *tx) ConsumeApprovalFor(k store.CallKey, defDigest, argsDigest string) (store.Approval, bool, error) {
	return t.consume(k.Run, `run = $2 AND step = $3 AND call_attempt = $4 AND call_idx = $5 AND def_digest = $6 AND args_digest = $7`,
		k.Run, k.Step, k.Attempt, k.Index, defDigest, argsDigest)
}

func (t *tx) consume(run, where string, args ...any) (store.Approval, bool, error) {
	if err := t.check(); err != nil {
		return store.Approval{}, false, err
	}
	var as []store.Approval
	err := t.send(append(t.lockItem(run), item{
		sql: `UPDATE approvals SET status = 'used', used_at = $1
		WHERE id = (SELECT id FROM approvals
			WHERE ` + where + `
			AND status = 'approved' AND (expires_at IS NULL OR expires_at > $1)
			ORDER BY created_at, id LIMIT 1)
		AND status = 'approved'
		RETURNING ` + approvalCols,
		args: append([]any{t.now()}, args...), what: "consuming approval",
		rows: func(rows pgx.Rows) (err error) { as, err = scanApprovals(rows); return err },
	})...)
	if err != nil || len(as) == 0 {
		return store.Approval{}, false, err
	}
	return as[0], true, nil
}

// VoidApprovals expires the pending and approved-but-unused approvals of
// kind call of one call; see store/sqlite's.
func (t *tx) VoidApprovals(k store.CallKey, reason string) ([]store.Approval, error) {
	return t.expire(k.Run, `UPDATE approvals SET status = 'expired', reason = $1
		WHERE status IN ('pending', 'approved') AND run = $2 AND step = $3 AND call_attempt = $4 AND call_idx = $5 AND kind = 'call'`,
		reason, k.Run, k.Step, k.Attempt, k.Index)
}

// ExpireAttemptApprovals expires the pending and approved-but-unused
// approvals of kind call of one step attempt; see store/sqlite's.
func (t *tx) ExpireAttemptApprovals(run, step string, attempt int, reason string) ([]store.Approval, error) {
	return t.expire(run, `UPDATE approvals SET status = 'expired', reason = $1
		WHERE status IN ('pending', 'approved') AND run = $2 AND step = $3 AND call_attempt = $4 AND kind = 'call'`,
		reason, run, step, attempt)
}

// ExpireApprovals expires a run's (every run's, with run "") pending and
// approved-but-unused approvals whose expiry has passed, and returns them.
func (t *tx) ExpireApprovals(run string) ([]store.Approval, error) {
	return t.expire(run, `UPDATE approvals SET status = 'expired'
		WHERE status IN ('pending', 'approved') AND expires_at IS NOT NULL AND expires_at <= $1 AND ($2 = '' OR run = $2)`,
		t.now(), run)
}

// expire runs an UPDATE of approvals (with run's lock, when run is not
// "") and returns the approvals it changed as they are now, oldest first.
func (t *tx) expire(run, update string, args ...any) ([]store.Approval, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	var items []item
	if run != "" {
		items = t.lockItem(run)
	}
	var out []store.Approval
	items = append(items, item{
		sql:  `WITH u AS (` + update + ` RETURNING ` + approvalCols + `) SELECT * FROM u ORDER BY created_at, id`,
		args: args, what: "expiring approvals",
		rows: func(rows pgx.Rows) (err error) { out, err = scanApprovals(rows); return err },
	})
	if err := t.send(items...); err != nil {
		return nil, err
	}
	if out == nil {
		out = []store.Approval{}
	}
	return out, nil
}

// VoidOutcomeUnknownApproval expires an approved, unused approval of kind
// outcome_unknown; see store/sqlite's.
func (t *tx) VoidOutcomeUnknownApproval(id, reason string) (store.Approval, bool, error) {
	a, err := t.Approval(id)
	if err != nil {
		if isNotFound(err) {
			return store.Approval{}, false, nil
		}
		return store.Approval{}, false, err
	}
	as, err := t.expire(a.Run, `UPDATE approvals SET status = 'expired', reason = $1
		WHERE status = 'approved' AND kind = 'outcome_unknown' AND id = $2`, reason, id)
	if err != nil || len(as) == 0 {
		return store.Approval{}, false, err
	}
	return as[0], true, nil
}

// Approval reads one approval inside the transaction.
func (t *tx) Approval(id string) (store.Approval, error) {
	var as []store.Approval
	if err := t.send(item{sql: `SELECT ` + approvalCols + ` FROM approvals WHERE id = $1`, args: []any{id}, what: "reading approval",
		rows: func(rows pgx.Rows) (err error) { as, err = scanApprovals(rows); return err }}); err != nil {
		return store.Approval{}, err
	}
	if len(as) == 0 {
		return store.Approval{}, fmt.Errorf("%w: approval %q", store.ErrNotFound, id)
	}
	return as[0], nil
}

// Approvals returns every approval of a run, oldest first, as this
// transaction sees them.
func (t *tx) Approvals(run string) ([]store.Approval, error) {
	var as []store.Approval
	if err := t.send(item{sql: `SELECT ` + approvalCols + ` FROM approvals WHERE run = $1 ORDER BY created_at, id`, args: []any{run},
		what: "reading approvals", rows: func(rows pgx.Rows) (err error) { as, err = scanApprovals(rows); return err }}); err != nil {
		return nil, err
	}
	return as, nil
}

// GetApproval returns one approval, or [store.ErrNotFound].
func (s *Store) GetApproval(ctx context.Context, id string) (store.Approval, error) {
	as, err := s.approvals(ctx, `WHERE id = $1`, id)
	if err != nil {
		return store.Approval{}, err
	}
	if len(as) == 0 {
		return store.Approval{}, fmt.Errorf("%w: approval %q", store.ErrNotFound, id)
	}
	return as[0], nil
}

// PendingApprovals returns the pending, unexpired approvals of run (of
// every run when run is ""), oldest first.
func (s *Store) PendingApprovals(ctx context.Context, run string) ([]store.Approval, error) {
	return s.approvals(ctx, `WHERE status = 'pending' AND (expires_at IS NULL OR expires_at > $1) AND ($2 = '' OR run = $2)
		ORDER BY created_at, id`, formatTime(s.Now()), run)
}

// Approvals returns every approval of a run, oldest first.
func (s *Store) Approvals(ctx context.Context, run string) ([]store.Approval, error) {
	return runApprovals(ctx, s.pool, run)
}

func runApprovals(ctx context.Context, q reader, run string) ([]store.Approval, error) {
	return listApprovals(ctx, q, `WHERE run = $1 ORDER BY created_at, id`, run)
}

const approvalCols = `id, kind, run, step, tool, def_digest, args_digest, call_attempt, call_idx,
	status, reason, decided_by, created_at, expires_at, decided_at, used_at`

func (s *Store) approvals(ctx context.Context, where string, args ...any) ([]store.Approval, error) {
	return listApprovals(ctx, s.pool, where, args...)
}

func listApprovals(ctx context.Context, q reader, where string, args ...any) ([]store.Approval, error) {
	rows, err := q.Query(ctx, `SELECT `+approvalCols+` FROM approvals `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("store: reading approvals: %w", err)
	}
	return scanApprovals(rows)
}

func scanApprovals(rows pgx.Rows) ([]store.Approval, error) {
	defer rows.Close()
	var out []store.Approval
	for rows.Next() {
		var a store.Approval
		var kind, status string
		var tool []byte
		var callAttempt, callIdx *int32
		var created, expires, decided, used *string
		if err := rows.Scan(&a.ID, &kind, &a.Run, &a.Step, &tool, &a.DefDigest, &a.ArgsDigest, &callAttempt, &callIdx,
			&status, &a.Reason, &a.DecidedBy, &created, &expires, &decided, &used); err != nil {
			return nil, fmt.Errorf("store: reading approvals: %w", err)
		}
		a.Kind, a.Status, a.Tool = store.ApprovalKind(kind), store.ApprovalStatus(status), string(tool)
		if callAttempt != nil && callIdx != nil {
			a.Call = &store.CallKey{Run: a.Run, Step: a.Step, Attempt: int(*callAttempt), Index: int(*callIdx)}
		}
		a.Created, a.Expires, a.Decided, a.Used = parseTime(created), parseTime(expires), parseTime(decided), parseTime(used)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading approvals: %w", err)
	}
	return out, nil
}

// OpenGate records that a gate step attempt waits for a person.
func (t *tx) OpenGate(run, step string, attempt int) (store.Gate, error) {
	if _, err := t.open(run); err != nil {
		return store.Gate{}, err
	}
	now, at := t.stamp()
	if err := t.defer_(item{sql: `INSERT INTO gates (run, step, attempt, status, reason, decided_by, opened_at) VALUES ($1, $2, $3, 'waiting', '', '', $4)`,
		args: []any{run, step, attempt, now}, what: fmt.Sprintf("opening gate %q", step)}); err != nil {
		return store.Gate{}, err
	}
	return store.Gate{Run: run, Step: step, Attempt: attempt, Status: store.GateWaiting, Opened: at}, nil
}

// DecideGate approves or rejects a waiting gate and returns it; a gate
// already decided is [store.ErrState].
func (t *tx) DecideGate(run, step string, attempt int, approve bool, reason, decidedBy string) (store.Gate, error) {
	if err := t.check(); err != nil {
		return store.Gate{}, err
	}
	status := store.GateRejected
	if approve {
		status = store.GateApproved
	}
	var n int64
	var gs []store.Gate
	err := t.send(append(t.lockItem(run),
		item{sql: `WITH u AS (UPDATE gates SET status = $1, reason = $2, decided_by = $3, decided_at = $4
		WHERE run = $5 AND step = $6 AND attempt = $7 AND status = 'waiting' RETURNING 1) SELECT count(*) FROM u`,
			args: []any{string(status), reason, decidedBy, t.now(), run, step, attempt}, what: fmt.Sprintf("deciding gate %q", step),
			rows: func(rows pgx.Rows) error {
				if rows.Next() {
					return rows.Scan(&n)
				}
				return nil
			}},
		item{sql: gateQuery + ` WHERE run = $1 AND step = $2 AND attempt = $3`, args: []any{run, step, attempt}, what: "reading gate",
			rows: func(rows pgx.Rows) (err error) { gs, err = scanGates(rows); return err }})...)
	if err != nil {
		return store.Gate{}, err
	}
	if len(gs) == 0 {
		return store.Gate{}, fmt.Errorf("%w: gate %q attempt %d of run %s", store.ErrNotFound, step, attempt, run)
	}
	if n == 0 {
		return store.Gate{}, fmt.Errorf("%w: gate %q attempt %d of run %s was already decided (%s)", store.ErrState, step, attempt, run, gs[0].Status)
	}
	return gs[0], nil
}

const gateQuery = `SELECT run, step, attempt, status, reason, decided_by, opened_at, decided_at FROM gates`

// Gates returns a run's gates (every run's when run is "") in the order
// they opened.
func (s *Store) Gates(ctx context.Context, run string) ([]store.Gate, error) {
	return runGates(ctx, s.pool, run)
}

func runGates(ctx context.Context, q reader, run string) ([]store.Gate, error) {
	rows, err := q.Query(ctx, gateQuery+` WHERE ($1 = '' OR run = $1) ORDER BY opened_at, rowid`, run)
	if err != nil {
		return nil, fmt.Errorf("store: reading gates: %w", err)
	}
	return scanGates(rows)
}

func scanGates(rows pgx.Rows) ([]store.Gate, error) {
	defer rows.Close()
	var out []store.Gate
	for rows.Next() {
		var g store.Gate
		var status string
		var opened, decided *string
		if err := rows.Scan(&g.Run, &g.Step, &g.Attempt, &status, &g.Reason, &g.DecidedBy, &opened, &decided); err != nil {
			return nil, fmt.Errorf("store: reading gates: %w", err)
		}
		g.Status = store.GateStatus(status)
		g.Opened, g.Decided = parseTime(opened), parseTime(decided)
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading gates: %w", err)
	}
	return out, nil
}
