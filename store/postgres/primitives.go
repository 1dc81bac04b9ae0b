package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/store"
)

// SeedCustomers upserts the customers in one transaction.
func (s *Store) SeedCustomers(ctx context.Context, cs []store.Customer) error {
	return s.Tx(ctx, func(stx store.Tx) error {
		t := stx.(*tx)
		for _, c := range cs {
			if err := t.PutCustomer(c); err != nil {
				return err
			}
		}
		return nil
	})
}

// PutCustomer inserts c, or replaces the customer with the same id (with
// the next batch).
func (t *tx) PutCustomer(c store.Customer) error {
	if c.ID == "" {
		return errors.New("store: a customer needs an id")
	}
	tags, err := tagsJSON(c.Tags)
	if err != nil {
		return err
	}
	return t.defer_(item{sql: `INSERT INTO customers (id, name, email, company, plan, tags, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (id) DO UPDATE SET name = excluded.name, email = excluded.email, company = excluded.company,
		plan = excluded.plan, tags = excluded.tags, created_at = excluded.created_at`,
		args: []any{c.ID, c.Name, c.Email, c.Company, c.Plan, tags, nullTime(c.Created)}, what: fmt.Sprintf("storing customer %q", c.ID)})
}

const customerCols = `id, name, email, company, plan, tags, created_at`

// GetCustomer returns the customer with the given id, or
// [store.ErrNotFound].
func (s *Store) GetCustomer(ctx context.Context, id string) (store.Customer, error) {
	cs, err := s.customers(ctx, `SELECT `+customerCols+` FROM customers WHERE id = $1`, id)
	if err != nil {
		return store.Customer{}, err
	}
	if len(cs) == 0 {
		return store.Customer{}, fmt.Errorf("%w: customer %q", store.ErrNotFound, id)
	}
	return cs[0], nil
}

// SearchCustomers is store/sqlite's: up to limit customers (10 when
// limit <= 0) whose name, email or company contain every word of query
// (ASCII letters compared without case: the columns' C collation), best
// matches first.
func (s *Store) SearchCustomers(ctx context.Context, query string, limit int) ([]store.Customer, error) {
	if limit <= 0 {
		limit = 10
	}
	q := strings.TrimSpace(query)
	var where []string
	args := []any{q, likePattern(q, false)}
	for _, w := range strings.Fields(q) {
		args = append(args, likePattern(w, true))
		n := "$" + strconv.Itoa(len(args))
		where = append(where, `(name ILIKE `+n+` ESCAPE '\' OR email ILIKE `+n+` ESCAPE '\' OR company ILIKE `+n+` ESCAPE '\')`)
	}
	sqlq := `SELECT ` + customerCols + ` FROM customers`
	if len(where) > 0 {
		sqlq += ` WHERE ` + strings.Join(where, ` AND `)
	}
	sqlq += ` ORDER BY CASE
		WHEN lower(email) = lower($1) OR id = $1 THEN 0
		WHEN lower(name) = lower($1) THEN 1
		WHEN name ILIKE $2 ESCAPE '\' THEN 2
		ELSE 3 END, name, id LIMIT $` + strconv.Itoa(len(args)+1)
	args = append(args, limit)
	return s.customers(ctx, sqlq, args...)
}

func likePattern(s string, anywhere bool) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	p := r.Replace(s) + "%"
	if anywhere {
		p = "%" + p
	}
	return p
}

func (s *Store) customers(ctx context.Context, query string, args ...any) ([]store.Customer, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: reading customers: %w", err)
	}
	defer rows.Close()
	var out []store.Customer
	for rows.Next() {
		var c store.Customer
		var tags string
		var created *string
		if err := rows.Scan(&c.ID, &c.Name, &c.Email, &c.Company, &c.Plan, &tags, &created); err != nil {
			return nil, fmt.Errorf("store: reading customers: %w", err)
		}
		if err := json.Unmarshal([]byte(tags), &c.Tags); err != nil {
			return nil, fmt.Errorf("store: customer %q tags: %w", c.ID, err)
		}
		c.Created = parseTime(created)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading customers: %w", err)
	}
	return out, nil
}

// AddNote stores a note (with the next batch) and returns it with ID and
// Created set.
func (t *tx) AddNote(n store.Note) (store.Note, error) {
	tags, err := tagsJSON(n.Tags)
	if err != nil {
		return store.Note{}, err
	}
	if err := t.check(); err != nil {
		return store.Note{}, err
	}
	now, at := t.stamp()
	n.ID, n.Created = newID("note_"), at
	if err := t.defer_(item{sql: `INSERT INTO notes (id, customer_id, body, tags, author, run, step, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		args: []any{n.ID, n.CustomerID, n.Body, tags, n.Author, n.Run, n.Step, now}, what: "adding note"}); err != nil {
		return store.Note{}, err
	}
	return n, nil
}

// ListNotes returns up to limit notes (20 when limit <= 0), newest first,
// of customerID (any when ""), carrying tag (any when "").
func (s *Store) ListNotes(ctx context.Context, customerID, tag string, limit int) ([]store.Note, error) {
	if limit <= 0 {
		limit = 20
	}
	rows, err := s.pool.Query(ctx, `SELECT id, customer_id, body, tags, author, run, step, created_at FROM notes
		WHERE ($1 = '' OR customer_id = $1)
		AND ($2 = '' OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(notes.tags::jsonb) AS v (value) WHERE v.value = $2))
		ORDER BY created_at DESC, rowid DESC LIMIT $3`, customerID, tag, limit)
	if err != nil {
		return nil, fmt.Errorf("store: reading notes: %w", err)
	}
	defer rows.Close()
	var out []store.Note
	for rows.Next() {
		var n store.Note
		var tags string
		var created *string
		if err := rows.Scan(&n.ID, &n.CustomerID, &n.Body, &tags, &n.Author, &n.Run, &n.Step, &created); err != nil {
			return nil, fmt.Errorf("store: reading notes: %w", err)
		}
		if err := json.Unmarshal([]byte(tags), &n.Tags); err != nil {
			return nil, fmt.Errorf("store: note %q tags: %w", n.ID, err)
		}
		n.Created = parseTime(created)
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading notes: %w", err)
	}
	return out, nil
}

// SurfaceToday puts an item on the Today list (with the next batch) and
// returns it with ID, Priority and Created set.
func (t *tx) SurfaceToday(it store.TodayItem) (store.TodayItem, error) {
	if err := t.check(); err != nil {
		return store.TodayItem{}, err
	}
	if it.Priority == "" {
		it.Priority = "normal"
	}
	now, at := t.stamp()
	it.ID, it.Created, it.Dismissed = newID("today_"), at, time.Time{}
	if err := t.defer_(item{sql: `INSERT INTO today (id, title, summary, priority, customer_id, link, run, step, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, args: []any{it.ID, it.Title, it.Summary, it.Priority, it.CustomerID, it.Link, it.Run, it.Step, now},
		what: "surfacing today item"}); err != nil {
		return store.TodayItem{}, err
	}
	return it, nil
}

// DismissToday takes an item off the Today list; twice is
// [store.ErrState], an unknown id [store.ErrNotFound].
func (t *tx) DismissToday(id string) error {
	if err := t.check(); err != nil {
		return err
	}
	var n, exists int64
	if err := t.send(item{sql: `WITH u AS (UPDATE today SET dismissed_at = $1 WHERE id = $2 AND dismissed_at IS NULL RETURNING 1)
		SELECT (SELECT count(*) FROM u), (SELECT count(*) FROM today WHERE id = $2)`, args: []any{t.now(), id}, what: "dismissing today item",
		rows: func(rows pgx.Rows) error {
			if rows.Next() {
				return rows.Scan(&n, &exists)
			}
			return nil
		}}); err != nil {
		return err
	}
	switch {
	case n == 1:
		return nil
	case exists == 0:
		return fmt.Errorf("%w: today item %q", store.ErrNotFound, id)
	}
	return fmt.Errorf("%w: today item %q was already dismissed", store.ErrState, id)
}

// ListToday returns the Today list: high priority first, then normal,
// then low, newest first within each; dismissed items only when
// includeDismissed, after the others.
func (s *Store) ListToday(ctx context.Context, includeDismissed bool) ([]store.TodayItem, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, title, summary, priority, customer_id, link, run, step, created_at, dismissed_at
		FROM today WHERE $1 OR dismissed_at IS NULL
		ORDER BY dismissed_at IS NOT NULL, CASE priority WHEN 'high' THEN 0 WHEN 'normal' THEN 1 ELSE 2 END, created_at DESC, rowid DESC`,
		includeDismissed)
	if err != nil {
		return nil, fmt.Errorf("store: reading today: %w", err)
	}
	defer rows.Close()
	var out []store.TodayItem
	for rows.Next() {
		var it store.TodayItem
		var created, dismissed *string
		if err := rows.Scan(&it.ID, &it.Title, &it.Summary, &it.Priority, &it.CustomerID, &it.Link, &it.Run, &it.Step,
			&created, &dismissed); err != nil {
			return nil, fmt.Errorf("store: reading today: %w", err)
		}
		it.Created, it.Dismissed = parseTime(created), parseTime(dismissed)
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading today: %w", err)
	}
	return out, nil
}

func tagsJSON(tags []string) (string, error) {
	if tags == nil {
		tags = []string{}
	}
	b, err := json.Marshal(tags)
	if err != nil {
		return "", fmt.Errorf("store: encoding tags: %w", err)
	}
	return string(b), nil
}
