package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/store"
)

var _ store.Vault = (*Store)(nil)

// Credential implements [store.Vault].
func (s *Store) Credential(ctx context.Context, name string) (store.Credential, error) {
	c := store.Credential{Name: name}
	var updated string
	err := s.pool.QueryRow(ctx, `SELECT sealed, version, updated_at FROM vault WHERE name = $1`, name).Scan(&c.Sealed, &c.Version, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Credential{}, fmt.Errorf("%w: vault entry %q", store.ErrNotFound, name)
	}
	if err != nil {
		return store.Credential{}, fmt.Errorf("store: reading vault entry %q: %w", name, err)
	}
	c.Updated = parseTime(&updated)
	return c, nil
}

// Credentials implements [store.Vault].
func (s *Store) Credentials(ctx context.Context) ([]store.Credential, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, sealed, version, updated_at FROM vault ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: listing the vault: %w", err)
	}
	defer rows.Close()
	var out []store.Credential
	for rows.Next() {
		var c store.Credential
		var updated string
		if err := rows.Scan(&c.Name, &c.Sealed, &c.Version, &updated); err != nil {
			return nil, fmt.Errorf("store: listing the vault: %w", err)
		}
		c.Updated = parseTime(&updated)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: listing the vault: %w", err)
	}
	return out, nil
}

// PutCredential implements [store.Vault]: one INSERT ... ON CONFLICT DO
// NOTHING (version 0) or one UPDATE ... WHERE version, so of two
// processes writing over the same version one wins and the other gets
// [store.ErrConflict].
func (s *Store) PutCredential(ctx context.Context, name string, sealed []byte, version int64) (int64, error) {
	if name == "" || len(sealed) == 0 {
		return 0, errors.New("store: a vault entry needs a name and a sealed value")
	}
	now := formatTime(s.Now())
	var n int64
	if version == 0 {
		tag, err := s.pool.Exec(ctx, `INSERT INTO vault (name, sealed, version, updated_at) VALUES ($1, $2, 1, $3) ON CONFLICT (name) DO NOTHING`, name, sealed, now)
		if err != nil {
			return 0, fmt.Errorf("store: writing vault entry %q: %w", name, err)
		}
		n = tag.RowsAffected()
	} else {
		tag, err := s.pool.Exec(ctx, `UPDATE vault SET sealed = $1, version = version + 1, updated_at = $2 WHERE name = $3 AND version = $4`, sealed, now, name, version)
		if err != nil {
			return 0, fmt.Errorf("store: writing vault entry %q: %w", name, err)
		}
		n = tag.RowsAffected()
	}
	if n != 1 {
		return 0, fmt.Errorf("%w: vault entry %q (version %d)", store.ErrConflict, name, version)
	}
	return version + 1, nil
}

// DeleteCredential implements [store.Vault].
func (s *Store) DeleteCredential(ctx context.Context, name string) error {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM vault_leases WHERE name = $1`, name); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM vault WHERE name = $1`, name)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("store: deleting vault entry %q: %w", name, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: vault entry %q", store.ErrNotFound, name)
	}
	return nil
}

// LeaseCredential implements [store.Vault]: one upsert that takes the
// lease only from nobody, from holder itself, or from a holder whose lease
// ran out; the row lock orders two processes asking at once.
func (s *Store) LeaseCredential(ctx context.Context, name, holder string, now, until time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO vault_leases (name, holder, until) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
		WHERE vault_leases.holder = excluded.holder OR vault_leases.until <= $4`,
		name, holder, formatTime(until), formatTime(now))
	if err != nil {
		return false, fmt.Errorf("store: leasing vault entry %q: %w", name, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseCredential implements [store.Vault].
func (s *Store) ReleaseCredential(ctx context.Context, name, holder string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM vault_leases WHERE name = $1 AND holder = $2`, name, holder); err != nil {
		return fmt.Errorf("store: releasing vault entry %q: %w", name, err)
	}
	return nil
}
