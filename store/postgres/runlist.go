package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/openplaybook/openplaybook/store"
)

// RunPage returns a page of runs as [store.Store.RunPage] says, in one
// SELECT over the index runs_list (created_at descending, id; schema
// version 4). It never names the document column, and a large document
// is stored out of line (TOAST), so reading a run's row does not read
// it; the gates and approvals each run waits for are aggregated in the
// same statement from their run-keyed indexes.
func (s *Store) RunPage(ctx context.Context, f store.RunFilter, after store.RunCursor, limit int) ([]store.ListedRun, error) {
	query, args := runPageQuery(f, after, store.ClampRunPage(limit), formatTime(s.Now()))
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: listing runs: %w", err)
	}
	defer rows.Close()
	var out []store.ListedRun
	for rows.Next() {
		var r store.ListedRun
		var status string
		var created, updated *string
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
// are set, and the cursor as a row comparison the index serves.
func runPageQuery(f store.RunFilter, after store.RunCursor, limit int, now string) (string, []any) {
	const waitingGates = `SELECT 1 FROM gates g WHERE g.run = r.id AND g.status = 'waiting'`
	const pendingApprovals = `SELECT 1 FROM approvals a WHERE a.run = r.id AND a.status = 'pending' AND (a.expires_at IS NULL OR a.expires_at > $1)`
	var b strings.Builder
	b.WriteString(`SELECT r.id, r.playbook_id, r.playbook_version, r.status, r.current_step, r.reason, r.created_at, r.updated_at,
	(SELECT json_agg(g.step ORDER BY g.opened_at, g.step, g.attempt)::text FROM gates g WHERE g.run = r.id AND g.status = 'waiting'),
	(SELECT json_agg(json_build_array(a.id, a.kind, a.step) ORDER BY a.created_at, a.id)::text FROM approvals a
		WHERE a.run = r.id AND a.status = 'pending' AND (a.expires_at IS NULL OR a.expires_at > $1))
FROM runs r WHERE true`)
	args := []any{now}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if !after.IsZero() {
		c, id := arg(formatTime(after.Created)), arg(after.ID)
		fmt.Fprintf(&b, ` AND r.created_at <= %s AND (r.created_at < %s OR r.id > %s)`, c, c, id)
	}
	if len(f.Statuses) > 0 {
		ss := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			ss[i] = string(st)
		}
		b.WriteString(` AND r.status = ANY(` + arg(ss) + `)`)
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
	// The limit is written into the statement, not passed: with a
	// parameter, the generic plan PostgreSQL switches a prepared
	// statement to after five runs does not know the page is small, and
	// sorts the whole table instead of reading the index in order.
	fmt.Fprintf(&b, ` ORDER BY r.created_at DESC, r.id LIMIT %d`, limit)
	return b.String(), args
}
