package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/store"
)

var _ store.ConsoleLogins = (*Store)(nil)

// CreateConsoleLogin implements [store.ConsoleLogins].
func (s *Store) CreateConsoleLogin(ctx context.Context, l store.ConsoleLogin) error {
	if l.Hash == "" || l.CSRFHash == "" {
		return errors.New("store: a console login needs the hashes of its cookie and its CSRF token")
	}
	who := l.Who
	if who == nil {
		who = []byte{}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM console_logins WHERE expires_at <= $1`, formatTime(l.Created)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO console_logins (hash, csrf_hash, who, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)`,
			l.Hash, l.CSRFHash, who, formatTime(l.Created), formatTime(l.Expires))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: recording a console login: %w", err)
	}
	return nil
}

// ConsoleLogin implements [store.ConsoleLogins].
func (s *Store) ConsoleLogin(ctx context.Context, hash string, now time.Time) (store.ConsoleLogin, error) {
	l := store.ConsoleLogin{Hash: hash}
	var created, expires string
	err := s.pool.QueryRow(ctx, `SELECT csrf_hash, who, created_at, expires_at FROM console_logins WHERE hash = $1 AND expires_at > $2`,
		hash, formatTime(now)).Scan(&l.CSRFHash, &l.Who, &created, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ConsoleLogin{}, fmt.Errorf("%w: console login", store.ErrNotFound)
	}
	if err != nil {
		return store.ConsoleLogin{}, fmt.Errorf("store: reading a console login: %w", err)
	}
	l.Created, l.Expires = parseTime(&created), parseTime(&expires)
	return l, nil
}

// DeleteConsoleLogin implements [store.ConsoleLogins].
func (s *Store) DeleteConsoleLogin(ctx context.Context, hash string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM console_logins WHERE hash = $1`, hash); err != nil {
		return fmt.Errorf("store: ending a console login: %w", err)
	}
	return nil
}
