package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

var _ store.Outbox = (*Store)(nil)

// AddDelivery implements [store.Outbox]: one INSERT ... ON CONFLICT DO
// NOTHING in a transaction of the writer.
func (s *Store) AddDelivery(ctx context.Context, d store.Delivery) (added bool, err error) {
	err = s.Tx(ctx, func(stx store.Tx) error {
		t := stx.(*Tx)
		res, err := t.exec(`INSERT INTO outbox (endpoint, event_id, event, attempts, next_at, last_error, done, dead, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (endpoint, event_id) DO NOTHING`,
			d.Endpoint, d.EventID, d.Event, d.Attempts, formatTime(d.Next), d.LastError, d.Done, d.Dead, t.now())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		added = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("store: adding a delivery: %w", err)
	}
	return added, nil
}

// DueDeliveries implements [store.Outbox]: the due rows are read and
// claimed in one transaction of the writer.
func (s *Store) DueDeliveries(ctx context.Context, now time.Time, limit int) ([]store.Delivery, error) {
	var out []store.Delivery
	err := s.Tx(ctx, func(stx store.Tx) error {
		t := stx.(*Tx)
		out = nil
		rows, err := t.query(ctx, `SELECT endpoint, event_id, event, attempts, next_at, last_error, done, dead FROM outbox
			WHERE done = 0 AND dead = 0 AND next_at <= ? ORDER BY next_at, endpoint, event_id LIMIT ?`, formatTime(now), limit)
		if err != nil {
			return err
		}
		for rows.Next() {
			var d store.Delivery
			var next string
			var done, dead int
			if err := rows.Scan(&d.Endpoint, &d.EventID, &d.Event, &d.Attempts, &next, &d.LastError, &done, &dead); err != nil {
				rows.Close()
				return err
			}
			d.Next, d.Done, d.Dead = parseTime(sql.NullString{String: next, Valid: true}), done == 1, dead == 1
			out = append(out, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		lease := formatTime(now.Add(store.DeliveryLease))
		for _, d := range out {
			if _, err := t.exec(`UPDATE outbox SET next_at = ? WHERE endpoint = ? AND event_id = ?`, lease, d.Endpoint, d.EventID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: claiming due deliveries: %w", err)
	}
	return out, nil
}

// UpdateDelivery implements [store.Outbox].
func (s *Store) UpdateDelivery(ctx context.Context, d store.Delivery) error {
	err := s.Tx(ctx, func(stx store.Tx) error {
		res, err := stx.(*Tx).exec(`UPDATE outbox SET attempts = ?, next_at = ?, last_error = ?, done = ?, dead = ?
			WHERE endpoint = ? AND event_id = ?`, d.Attempts, formatTime(d.Next), d.LastError, d.Done, d.Dead, d.Endpoint, d.EventID)
		if err != nil {
			return fmt.Errorf("store: updating a delivery: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("%w: delivery %q to %q", store.ErrNotFound, d.EventID, d.Endpoint)
		}
		return nil
	})
	return err
}

// NextDelivery implements [store.Outbox].
func (s *Store) NextDelivery(ctx context.Context) (time.Time, error) {
	var next sql.NullString
	if err := s.pool().queryRow(ctx, `SELECT min(next_at) FROM outbox WHERE done = 0 AND dead = 0`).Scan(&next); err != nil {
		return time.Time{}, fmt.Errorf("store: reading the next delivery: %w", err)
	}
	return parseTime(next), nil
}
