package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/store"
)

var _ store.Outbox = (*Store)(nil)

// AddDelivery implements [store.Outbox]: one INSERT ... ON CONFLICT DO
// NOTHING, so two servers adding the same event add it once.
func (s *Store) AddDelivery(ctx context.Context, d store.Delivery) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO outbox (endpoint, event_id, event, attempts, next_at, last_error, done, dead, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (endpoint, event_id) DO NOTHING`,
		d.Endpoint, d.EventID, d.Event, d.Attempts, formatTime(d.Next), d.LastError, b01(d.Done), b01(d.Dead), formatTime(s.Now()))
	if err != nil {
		return false, fmt.Errorf("store: adding a delivery: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// DueDeliveries implements [store.Outbox]: one UPDATE claims the due
// rows that no other transaction holds (FOR UPDATE SKIP LOCKED) and
// returns them as they were.
func (s *Store) DueDeliveries(ctx context.Context, now time.Time, limit int) ([]store.Delivery, error) {
	rows, err := s.pool.Query(ctx, `UPDATE outbox o SET next_at = $2
		FROM (SELECT endpoint, event_id, next_at FROM outbox
			WHERE done = 0 AND dead = 0 AND next_at <= $1 ORDER BY next_at, endpoint, event_id LIMIT $3 FOR UPDATE SKIP LOCKED) d
		WHERE o.endpoint = d.endpoint AND o.event_id = d.event_id
		RETURNING o.endpoint, o.event_id, o.event, o.attempts, d.next_at, o.last_error, o.done, o.dead`,
		formatTime(now), formatTime(now.Add(store.DeliveryLease)), limit)
	if err != nil {
		return nil, fmt.Errorf("store: claiming due deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Delivery, error) {
		var d store.Delivery
		var next string
		var done, dead int
		err := r.Scan(&d.Endpoint, &d.EventID, &d.Event, &d.Attempts, &next, &d.LastError, &done, &dead)
		d.Next, d.Done, d.Dead = parseTime(&next), done == 1, dead == 1
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: claiming due deliveries: %w", err)
	}
	sortDue(out)
	return out, nil
}

// sortDue puts deliveries in the order they fell due (RETURNING keeps
// none).
func sortDue(ds []store.Delivery) {
	slices.SortFunc(ds, func(a, b store.Delivery) int {
		if c := a.Next.Compare(b.Next); c != 0 {
			return c
		}
		if c := strings.Compare(a.Endpoint, b.Endpoint); c != 0 {
			return c
		}
		return strings.Compare(a.EventID, b.EventID)
	})
}

// UpdateDelivery implements [store.Outbox].
func (s *Store) UpdateDelivery(ctx context.Context, d store.Delivery) error {
	tag, err := s.pool.Exec(ctx, `UPDATE outbox SET attempts = $3, next_at = $4, last_error = $5, done = $6, dead = $7
		WHERE endpoint = $1 AND event_id = $2`, d.Endpoint, d.EventID, d.Attempts, formatTime(d.Next), d.LastError, b01(d.Done), b01(d.Dead))
	if err != nil {
		return fmt.Errorf("store: updating a delivery: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: delivery %q to %q", store.ErrNotFound, d.EventID, d.Endpoint)
	}
	return nil
}

// NextDelivery implements [store.Outbox].
func (s *Store) NextDelivery(ctx context.Context) (time.Time, error) {
	var next *string
	if err := s.pool.QueryRow(ctx, `SELECT min(next_at) FROM outbox WHERE done = 0 AND dead = 0`).Scan(&next); err != nil {
		return time.Time{}, fmt.Errorf("store: reading the next delivery: %w", err)
	}
	return parseTime(next), nil
}
