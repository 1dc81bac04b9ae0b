package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/openplaybook/openplaybook/store"
)

// RunPage returns a page of runs as [store.Store.RunPage] says, in one
// SELECT. The columns it reads are all in the index runs_list (schema
// version 4), so SQLite scans that index alone and never reads a run's
// row, whose stored document lies before its status in the record; the
// gates and approvals each run waits for are aggregated in the same
// statement from their tables' run-keyed indexes.
func (s *Store) RunPage(ctx context.Context, f store.RunFilter, after store.RunCursor, limit int) ([]store.ListedRun, error) {
	query, args := runPageQuery(f, after, store.ClampRunPage(limit), formatTime(s.Now()))
	rows, err := s.pool().query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: listing runs: %w", err)
	}
	defer rows.Close()
	var out []store.ListedRun
	for rows.Next() {
		var r store.ListedRun
		var status string
		var created, updated sql.NullString
		var gates, approvals []byte
		if err := rows.Scan(&r.ID, &r.PlaybookID, &r.PlaybookVersion, &status, &r.CurrentStep, &r.Reason,
			&created, &updated, &gates, &approvals); err != nil {
			return nil, fmt.Errorf("store: listing runs: %w", err)
		}
		r.Status = store.RunStatus(status)
		r.Created, r.Updated = parseTime(created), parseTime(updated)
		if err := store.DecodePendingLists(&r, gates, approvals); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: listing runs: %w", err)
	}
	return out, nil
}

// runPageQuery builds RunPage's statement: the parts of the filter that
// are set, and the cursor as a range on the index (created_at at most
// the cursor's, and past the cursor's id at its created_at).
func runPageQuery(f store.RunFilter, after store.RunCursor, limit int, now string) (string, []any) {
	const waitingGates = `SELECT 1 FROM gates g WHERE g.run = r.id AND g.status = 'waiting'`
	const pendingApprovals = `SELECT 1 FROM approvals a WHERE a.run = r.id AND a.status = 'pending' AND (a.expires_at IS NULL OR a.expires_at > ?1)`
	var b strings.Builder
	b.WriteString(`SELECT r.id, r.playbook_id, r.playbook_version, r.status, r.current_step, r.reason, r.created_at, r.updated_at,
	(SELECT json_group_array(step) FROM (SELECT g.step FROM gates g WHERE g.run = r.id AND g.status = 'waiting' ORDER BY g.opened_at, g.step, g.attempt)),
	(SELECT json_group_array(json_array(id, kind, step)) FROM (SELECT a.id, a.kind, a.step FROM approvals a
		WHERE a.run = r.id AND a.status = 'pending' AND (a.expires_at IS NULL OR a.expires_at > ?1) ORDER BY a.created_at, a.id))
FROM runs r INDEXED BY runs_list WHERE 1`)
	args := []any{now}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("?%d", len(args))
	}
	if !after.IsZero() {
		c, id := arg(formatTime(after.Created)), arg(after.ID)
		fmt.Fprintf(&b, ` AND r.created_at <= %s AND (r.created_at < %s OR r.id > %s)`, c, c, id)
	}
	if len(f.Statuses) > 0 {
		ps := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			ps[i] = arg(string(st))
		}
		b.WriteString(` AND r.status IN (` + strings.Join(ps, ", ") + `)`)
	}
	if f.Playbook != "" {
		b.WriteString(` AND r.playbook_id = ` + arg(f.Playbook))
	}
	if f.Decide {
		b.WriteString(` AND (EXISTS (` + waitingGates + `) OR EXISTS (` + pendingApprovals + `))`)
	}
	if !f.CreatedFrom.IsZero() {
		b.WriteString(` AND r.created_at >= ` + arg(formatTime(f.CreatedFrom)))
	}
	if !f.CreatedBefore.IsZero() {
		b.WriteString(` AND r.created_at < ` + arg(formatTime(f.CreatedBefore)))
	}
	b.WriteString(` ORDER BY r.created_at DESC, r.id LIMIT ` + arg(limit))
	return b.String(), args
}
