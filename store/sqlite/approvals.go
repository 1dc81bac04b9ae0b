package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

// CreateApproval stores a pending approval and returns it. Of a it reads
// Kind (empty means call), Run, Step, Tool, DefDigest, ArgsDigest, Call,
// Reason and Expires; a zero Expires means [DefaultApprovalTTL] from now
// for kind call, and never for kind outcome_unknown. The run must not have
// ended.
func (t *Tx) CreateApproval(a store.Approval) (store.Approval, error) {
	if a.Kind == "" {
		a.Kind = store.KindCall
	}
	if a.Kind != store.KindCall && a.Kind != store.KindOutcomeUnknown {
		return store.Approval{}, fmt.Errorf("store: approval kind %q is not call or outcome_unknown", a.Kind)
	}
	if err := t.runOpen(a.Run); err != nil {
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
	var callAttempt, callIdx any
	if a.Call != nil {
		if a.Call.Run != a.Run || a.Call.Step != a.Step {
			return store.Approval{}, fmt.Errorf("store: approval for run %s step %q names %s", a.Run, a.Step, a.Call)
		}
		callAttempt, callIdx = a.Call.Attempt, a.Call.Index
	}
	if _, err := t.exec(`INSERT INTO approvals (id, kind, run, step, tool, def_digest, args_digest, call_attempt, call_idx,
		status, reason, decided_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, '', ?, ?)`,
		a.ID, string(a.Kind), a.Run, a.Step, []byte(a.Tool), a.DefDigest, a.ArgsDigest, callAttempt, callIdx,
		a.Reason, now, nullTime(a.Expires)); err != nil {
		return store.Approval{}, fmt.Errorf("store: creating approval: %w", err)
	}
	return a, nil
}

// DecideApproval approves or denies a pending approval, recording the
// reason and who decided, and returns it. Deciding one that is not
// pending is [ErrState]; one whose expiry has passed is [ErrExpired] (use
// [Tx.ExpireApprovals] to record that).
func (t *Tx) DecideApproval(id string, approve bool, reason, decidedBy string) (store.Approval, error) {
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
	res, err := t.exec(`UPDATE approvals SET status = ?, reason = ?, decided_by = ?, decided_at = ? WHERE id = ? AND status = 'pending'`,
		string(a.Status), reason, decidedBy, now, id)
	if err := affected(res, err, fmt.Errorf("%w: approval %s is no longer pending", store.ErrState, id)); err != nil {
		return store.Approval{}, err
	}
	return a, nil
}

// ConsumeApproval lets one call through: it finds an approved, unexpired,
// unused approval (of either kind) for exactly this run, step, tool name
// (byte for byte), definition digest and arguments digest, marks it used,
// and returns it with ok true. With none, ok is false and nothing changes.
// An approval lets exactly one call run once: of two ConsumeApproval calls
// for the same approval, exactly one gets ok.
func (t *Tx) ConsumeApproval(run, step, tool, defDigest, argsDigest string) (a store.Approval, ok bool, err error) {
	return t.consume(`run = ?2 AND step = ?3 AND tool = ?4 AND def_digest = ?5 AND args_digest = ?6`, run, step, []byte(tool), defDigest, argsDigest)
}

// consume marks the oldest approved, unexpired approval matching where
// (whose placeholders start at ?2; ?1 is now) used, and returns it.
func (t *Tx) consume(where string, args ...any) (a store.Approval, ok bool, err error) {
	if t.done {
		return store.Approval{}, false, store.ErrTxDone
	}
	var id string
	err = t.row(`UPDATE approvals SET status = 'used', used_at = ?1
		WHERE id = (SELECT id FROM approvals
			WHERE `+where+`
			AND status = 'approved' AND (expires_at IS NULL OR expires_at > ?1)
			ORDER BY created_at, id LIMIT 1)
		AND status = 'approved'
		RETURNING id`, append([]any{t.now()}, args...)...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Approval{}, false, nil
	}
	if err != nil {
		return store.Approval{}, false, fmt.Errorf("store: consuming approval: %w", err)
	}
	a, err = t.Approval(id)
	if err != nil {
		return store.Approval{}, false, err
	}
	return a, true, nil
}

// ConsumeApprovalFor lets exactly one recorded call through: it finds an
// approved, unexpired, unused approval (of either kind) of that call (its
// run, step, attempt and index) whose definition digest (the runtime
// binds the live definition and the serving binding into it) and
// arguments digest are these, marks it used and returns it with ok true.
// With none, ok is false and nothing changes; of two calls for the same
// approval, exactly one gets ok.
func (t *Tx) ConsumeApprovalFor(k store.CallKey, defDigest, argsDigest string) (a store.Approval, ok bool, err error) {
	return t.consume(`run = ?2 AND step = ?3 AND call_attempt = ?4 AND call_idx = ?5 AND def_digest = ?6 AND args_digest = ?7`,
		k.Run, k.Step, k.Attempt, k.Index, defDigest, argsDigest)
}

// VoidApprovals marks the pending and approved-but-unused approvals of
// kind call of one call as expired, with reason, and returns them: what
// they were asked for no longer holds (the tool's live definition or its
// binding changed), so a person must be asked again.
func (t *Tx) VoidApprovals(k store.CallKey, reason string) ([]store.Approval, error) {
	return t.expireWhere(`run = ?2 AND step = ?3 AND call_attempt = ?4 AND call_idx = ?5 AND kind = 'call'`, reason, k.Run, k.Step, k.Attempt, k.Index)
}

// ExpireAttemptApprovals marks the pending and approved-but-unused
// approvals of kind call asked for in one step attempt as expired, with
// reason (what the approval.voided record of each says): an approval
// never outlives the attempt it was asked in.
func (t *Tx) ExpireAttemptApprovals(run, step string, attempt int, reason string) ([]store.Approval, error) {
	return t.expireWhere(`run = ?2 AND step = ?3 AND call_attempt = ?4 AND kind = 'call'`, reason, run, step, attempt)
}

func (t *Tx) expireWhere(where, reason string, args ...any) ([]store.Approval, error) {
	if t.done {
		return nil, store.ErrTxDone
	}
	return t.expired(`UPDATE approvals SET status = 'expired', reason = ?1
		WHERE status IN ('pending', 'approved') AND `+where+` RETURNING id`, append([]any{reason}, args...)...)
}

// expired runs an UPDATE ... RETURNING id of approvals and returns them
// as they are now.
func (t *Tx) expired(query string, args ...any) ([]store.Approval, error) {
	rows, err := t.query(context.Background(), query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: expiring approvals: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]store.Approval, 0, len(ids))
	for _, id := range ids {
		a, err := t.Approval(id)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// ExpireApprovals marks a run's pending and approved-but-unused approvals
// whose expiry has passed as expired and returns them, so that the
// runtime can record it. With run "", every run's.
func (t *Tx) ExpireApprovals(run string) ([]store.Approval, error) {
	if t.done {
		return nil, store.ErrTxDone
	}
	return t.expired(`UPDATE approvals SET status = 'expired'
		WHERE status IN ('pending', 'approved') AND expires_at IS NOT NULL AND expires_at <= ?1 AND (?2 = '' OR run = ?2)
		RETURNING id`, t.now(), run)
}

// Approval reads one approval inside the transaction, or [ErrNotFound].
func (t *Tx) Approval(id string) (store.Approval, error) {
	if t.done {
		return store.Approval{}, store.ErrTxDone
	}
	return getApproval(context.Background(), t, id)
}

// GetApproval returns one approval, or [ErrNotFound].
func (s *Store) GetApproval(ctx context.Context, id string) (store.Approval, error) {
	return getApproval(ctx, s.pool(), id)
}

func getApproval(ctx context.Context, q querier, id string) (store.Approval, error) {
	as, err := listApprovals(ctx, q, `WHERE id = ?`, id)
	if err != nil {
		return store.Approval{}, err
	}
	if len(as) == 0 {
		return store.Approval{}, fmt.Errorf("%w: approval %q", store.ErrNotFound, id)
	}
	return as[0], nil
}

// PendingApprovals returns the approvals of a run (every run's when run
// is "") that wait for a decision and have not expired, oldest first.
func (s *Store) PendingApprovals(ctx context.Context, run string) ([]store.Approval, error) {
	return listApprovals(ctx, s.pool(), `WHERE status = 'pending' AND (expires_at IS NULL OR expires_at > ?1) AND (?2 = '' OR run = ?2)
		ORDER BY created_at, id`, formatTime(s.Now()), run)
}

// Approvals returns every approval of a run, oldest first.
func (s *Store) Approvals(ctx context.Context, run string) ([]store.Approval, error) {
	return runApprovals(ctx, s.pool(), run)
}

func runApprovals(ctx context.Context, q querier, run string) ([]store.Approval, error) {
	return listApprovals(ctx, q, `WHERE run = ? ORDER BY created_at, id`, run)
}

// Approvals returns every approval of a run, oldest first, as this
// transaction sees them (its own changes and its batch-mates' included).
func (t *Tx) Approvals(run string) ([]store.Approval, error) {
	if t.done {
		return nil, store.ErrTxDone
	}
	return runApprovals(context.Background(), t, run)
}

func listApprovals(ctx context.Context, q querier, where string, args ...any) ([]store.Approval, error) {
	rows, err := q.query(ctx, `SELECT id, kind, run, step, tool, def_digest, args_digest, call_attempt, call_idx,
		status, reason, decided_by, created_at, expires_at, decided_at, used_at FROM approvals `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("store: reading approvals: %w", err)
	}
	defer rows.Close()
	var out []store.Approval
	for rows.Next() {
		var a store.Approval
		var kind, status string
		var tool []byte
		var callAttempt, callIdx sql.NullInt64
		var created, expires, decided, used sql.NullString
		if err := rows.Scan(&a.ID, &kind, &a.Run, &a.Step, &tool, &a.DefDigest, &a.ArgsDigest, &callAttempt, &callIdx,
			&status, &a.Reason, &a.DecidedBy, &created, &expires, &decided, &used); err != nil {
			return nil, fmt.Errorf("store: reading approvals: %w", err)
		}
		a.Kind, a.Status, a.Tool = store.ApprovalKind(kind), store.ApprovalStatus(status), string(tool)
		if callAttempt.Valid && callIdx.Valid {
			a.Call = &store.CallKey{Run: a.Run, Step: a.Step, Attempt: int(callAttempt.Int64), Index: int(callIdx.Int64)}
		}
		a.Created, a.Expires, a.Decided, a.Used = parseTime(created), parseTime(expires), parseTime(decided), parseTime(used)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading approvals: %w", err)
	}
	return out, nil
}

// OpenGate records that a gate step attempt (already started with
// [Tx.StartStep]) waits for a person, and returns the gate.
func (t *Tx) OpenGate(run, step string, attempt int) (store.Gate, error) {
	if err := t.runOpen(run); err != nil {
		return store.Gate{}, err
	}
	now, at := t.stamp()
	if _, err := t.exec(`INSERT INTO gates (run, step, attempt, status, reason, decided_by, opened_at) VALUES (?, ?, ?, 'waiting', '', '', ?)`,
		run, step, attempt, now); err != nil {
		return store.Gate{}, fmt.Errorf("store: opening gate %q: %w", step, err)
	}
	return store.Gate{Run: run, Step: step, Attempt: attempt, Status: store.GateWaiting, Opened: at}, nil
}

// DecideGate approves or rejects a waiting gate and returns it. A gate
// already decided is [ErrState].
func (t *Tx) DecideGate(run, step string, attempt int, approve bool, reason, decidedBy string) (store.Gate, error) {
	status := store.GateRejected
	if approve {
		status = store.GateApproved
	}
	res, err := t.exec(`UPDATE gates SET status = ?, reason = ?, decided_by = ?, decided_at = ?
		WHERE run = ? AND step = ? AND attempt = ? AND status = 'waiting'`, string(status), reason, decidedBy, t.now(), run, step, attempt)
	if err != nil {
		return store.Gate{}, fmt.Errorf("store: deciding gate %q: %w", step, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return store.Gate{}, err
	}
	gs, err := listGates(context.Background(), t, `WHERE run = ? AND step = ? AND attempt = ?`, run, step, attempt)
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

// Gates returns a run's gates (every run's when run is "") in the order
// they opened. To list what waits for a person, keep those with status
// waiting.
func (s *Store) Gates(ctx context.Context, run string) ([]store.Gate, error) {
	return runGates(ctx, s.pool(), run)
}

func runGates(ctx context.Context, q querier, run string) ([]store.Gate, error) {
	return listGates(ctx, q, `WHERE (?1 = '' OR run = ?1) ORDER BY opened_at, rowid`, run)
}

func listGates(ctx context.Context, q querier, where string, args ...any) ([]store.Gate, error) {
	rows, err := q.query(ctx, `SELECT run, step, attempt, status, reason, decided_by, opened_at, decided_at FROM gates `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("store: reading gates: %w", err)
	}
	defer rows.Close()
	var out []store.Gate
	for rows.Next() {
		var g store.Gate
		var status string
		var opened, decided sql.NullString
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

// VoidOutcomeUnknownApproval marks an approved, unused approval of kind
// outcome_unknown as expired, with reason: the runtime could not follow
// it (the call it would run again is not in the store as it was sent).
// It returns the approval as it is now, and false when it was not
// approved and unused (nothing changed).
func (t *Tx) VoidOutcomeUnknownApproval(id, reason string) (store.Approval, bool, error) {
	if t.done {
		return store.Approval{}, false, store.ErrTxDone
	}
	as, err := t.expired(`UPDATE approvals SET status = 'expired', reason = ?1
		WHERE status = 'approved' AND kind = 'outcome_unknown' AND id = ?2 RETURNING id`, reason, id)
	if err != nil || len(as) == 0 {
		return store.Approval{}, false, err
	}
	return as[0], true, nil
}
