package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

var _ store.ConsoleLogins = (*Store)(nil)

// CreateConsoleLogin implements [store.ConsoleLogins].
func (s *Store) CreateConsoleLogin(ctx context.Context, l store.ConsoleLogin) error {
	if l.Hash == "" || l.CSRFHash == "" {
		return errors.New("store: a console login needs the hashes of its cookie and its CSRF token")
	}
	err := s.Tx(ctx, func(stx store.Tx) error {
		t := stx.(*Tx)
		if _, err := t.exec(`DELETE FROM console_logins WHERE expires_at <= ?`, formatTime(l.Created)); err != nil {
			return err
		}
		_, err := t.exec(`INSERT INTO console_logins (hash, csrf_hash, who, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
			l.Hash, l.CSRFHash, nonNil(l.Who), formatTime(l.Created), formatTime(l.Expires))
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
	err := s.pool().queryRow(ctx, `SELECT csrf_hash, who, created_at, expires_at FROM console_logins WHERE hash = ? AND expires_at > ?`,
		hash, formatTime(now)).Scan(&l.CSRFHash, &l.Who, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ConsoleLogin{}, fmt.Errorf("%w: console login", store.ErrNotFound)
	}
	if err != nil {
		return store.ConsoleLogin{}, fmt.Errorf("store: reading a console login: %w", err)
	}
	l.Created = parseTime(sql.NullString{String: created, Valid: true})
	l.Expires = parseTime(sql.NullString{String: expires, Valid: true})
	return l, nil
}

// DeleteConsoleLogin implements [store.ConsoleLogins].
func (s *Store) DeleteConsoleLogin(ctx context.Context, hash string) error {
	err := s.Tx(ctx, func(stx store.Tx) error {
		_, err := stx.(*Tx).exec(`DELETE FROM console_logins WHERE hash = ?`, hash)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: ending a console login: %w", err)
	}
	return nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
