package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/openplaybook/openplaybook/store"

	"github.com/go-json-experiment/json"
)

// SeedCustomers inserts the customers, replacing any with the same id, in
// one transaction. It is meant for tests, examples and imports.
func (s *Store) SeedCustomers(ctx context.Context, cs []store.Customer) error {
	return s.Tx(ctx, func(stx store.Tx) error {
		t := stx.(*Tx)
		for _, c := range cs {
			if err := t.PutCustomer(c); err != nil {
				return err
			}
		}
		return nil
	})
}

// PutCustomer inserts c, or replaces the customer with the same id.
func (t *Tx) PutCustomer(c store.Customer) error {
	if c.ID == "" {
		return errors.New("store: a customer needs an id")
	}
	tags, err := tagsJSON(c.Tags)
	if err != nil {
		return err
	}
	_, err = t.exec(`INSERT INTO customers (id, name, email, company, plan, tags, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET name = excluded.name, email = excluded.email, company = excluded.company,
		plan = excluded.plan, tags = excluded.tags, created_at = excluded.created_at`,
		c.ID, c.Name, c.Email, c.Company, c.Plan, tags, nullTime(c.Created))
	if err != nil {
		return fmt.Errorf("store: storing customer %q: %w", c.ID, err)
	}
	return nil
}

const customerCols = `id, name, email, company, plan, tags, created_at`

// GetCustomer returns the customer with the given id, or [ErrNotFound].
func (s *Store) GetCustomer(ctx context.Context, id string) (store.Customer, error) {
	cs, err := s.customers(ctx, `SELECT `+customerCols+` FROM customers WHERE id = ?`, id)
	if err != nil {
		return store.Customer{}, err
	}
	if len(cs) == 0 {
		return store.Customer{}, fmt.Errorf("%w: customer %q", store.ErrNotFound, id)
	}
	return cs[0], nil
}

// SearchCustomers returns up to limit customers (10 when limit <= 0) whose
// name, email or company contain every word of query (ASCII letters
// compared without case), best matches first: an exact email or id, then
// an exact name, then a name that starts with the query, then the rest by
// name. An empty query lists customers by name.
func (s *Store) SearchCustomers(ctx context.Context, query string, limit int) ([]store.Customer, error) {
	if limit <= 0 {
		limit = 10
	}
	q := strings.TrimSpace(query)
	var where []string
	args := []any{q, likePattern(q, false)}
	for _, w := range strings.Fields(q) {
		args = append(args, likePattern(w, true))
		n := "?" + strconv.Itoa(len(args))
		where = append(where, `(name LIKE `+n+` ESCAPE '\' OR email LIKE `+n+` ESCAPE '\' OR company LIKE `+n+` ESCAPE '\')`)
	}
	sqlq := `SELECT ` + customerCols + ` FROM customers`
	if len(where) > 0 {
		sqlq += ` WHERE ` + strings.Join(where, ` AND `)
	}
	sqlq += ` ORDER BY CASE
		WHEN email = ?1 COLLATE NOCASE OR id = ?1 THEN 0
		WHEN name = ?1 COLLATE NOCASE THEN 1
		WHEN name LIKE ?2 ESCAPE '\' THEN 2
		ELSE 3 END, name, id LIMIT ?` + strconv.Itoa(len(args)+1)
	args = append(args, limit)
	return s.customers(ctx, sqlq, args...)
}

// likePattern escapes s for LIKE ... ESCAPE '\' and makes it match s as a
// prefix, or anywhere when anywhere is set.
func likePattern(s string, anywhere bool) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	p := r.Replace(s) + "%"
	if anywhere {
		p = "%" + p
	}
	return p
}

func (s *Store) customers(ctx context.Context, query string, args ...any) ([]store.Customer, error) {
	rows, err := s.pool().query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: reading customers: %w", err)
	}
	defer rows.Close()
	var out []store.Customer
	for rows.Next() {
		var c store.Customer
		var tags string
		var created sql.NullString
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

// AddNote stores a note and returns it with ID ("note_" and 16 hex
// digits) and Created set.
func (t *Tx) AddNote(n store.Note) (store.Note, error) {
	tags, err := tagsJSON(n.Tags)
	if err != nil {
		return store.Note{}, err
	}
	now, at := t.stamp()
	n.ID, n.Created = newID("note_"), at
	if _, err := t.exec(`INSERT INTO notes (id, customer_id, body, tags, author, run, step, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		n.ID, n.CustomerID, n.Body, tags, n.Author, n.Run, n.Step, now); err != nil {
		return store.Note{}, fmt.Errorf("store: adding note: %w", err)
	}
	return n, nil
}

// ListNotes returns up to limit notes (20 when limit <= 0), newest first,
// only those about customerID when it is not "", and only those carrying
// tag when it is not "".
func (s *Store) ListNotes(ctx context.Context, customerID, tag string, limit int) ([]store.Note, error) {
	if limit <= 0 {
		limit = 20
	}
	rows, err := s.pool().query(ctx, `SELECT id, customer_id, body, tags, author, run, step, created_at FROM notes
		WHERE (?1 = '' OR customer_id = ?1) AND (?2 = '' OR EXISTS (SELECT 1 FROM json_each(notes.tags) WHERE value = ?2))
		ORDER BY created_at DESC, rowid DESC LIMIT ?3`, customerID, tag, limit)
	if err != nil {
		return nil, fmt.Errorf("store: reading notes: %w", err)
	}
	defer rows.Close()
	var out []store.Note
	for rows.Next() {
		var n store.Note
		var tags string
		var created sql.NullString
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

// SurfaceToday puts an item on the Today list and returns it with ID,
// Priority and Created set.
func (t *Tx) SurfaceToday(it store.TodayItem) (store.TodayItem, error) {
	if it.Priority == "" {
		it.Priority = "normal"
	}
	now, at := t.stamp()
	it.ID, it.Created, it.Dismissed = newID("today_"), at, time.Time{}
	if _, err := t.exec(`INSERT INTO today (id, title, summary, priority, customer_id, link, run, step, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, it.ID, it.Title, it.Summary, it.Priority, it.CustomerID, it.Link, it.Run, it.Step, now); err != nil {
		return store.TodayItem{}, fmt.Errorf("store: surfacing today item: %w", err)
	}
	return it, nil
}

// DismissToday takes an item off the Today list. Dismissing an item
// twice is [ErrState].
func (t *Tx) DismissToday(id string) error {
	res, err := t.exec(`UPDATE today SET dismissed_at = ? WHERE id = ? AND dismissed_at IS NULL`, t.now(), id)
	if err := affected(res, err, errNoRow); err != nil {
		if !errors.Is(err, errNoRow) {
			return fmt.Errorf("store: dismissing today item: %w", err)
		}
		var n int
		if err := t.row(`SELECT count(*) FROM today WHERE id = ?`, id).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: today item %q", store.ErrNotFound, id)
		}
		return fmt.Errorf("%w: today item %q was already dismissed", store.ErrState, id)
	}
	return nil
}

// ListToday returns the Today list: high priority first, then normal,
// then low, newest first within each; dismissed items only when
// includeDismissed, after the others.
func (s *Store) ListToday(ctx context.Context, includeDismissed bool) ([]store.TodayItem, error) {
	rows, err := s.pool().query(ctx, `SELECT id, title, summary, priority, customer_id, link, run, step, created_at, dismissed_at
		FROM today WHERE ? OR dismissed_at IS NULL
		ORDER BY dismissed_at IS NOT NULL, CASE priority WHEN 'high' THEN 0 WHEN 'normal' THEN 1 ELSE 2 END, created_at DESC, rowid DESC`,
		includeDismissed)
	if err != nil {
		return nil, fmt.Errorf("store: reading today: %w", err)
	}
	defer rows.Close()
	var out []store.TodayItem
	for rows.Next() {
		var it store.TodayItem
		var created, dismissed sql.NullString
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
