package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

var _ store.Vault = (*Store)(nil)

// Credential implements [store.Vault].
func (s *Store) Credential(ctx context.Context, name string) (store.Credential, error) {
	c := store.Credential{Name: name}
	var updated string
	err := s.pool().queryRow(ctx, `SELECT sealed, version, updated_at FROM vault WHERE name = ?`, name).Scan(&c.Sealed, &c.Version, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Credential{}, fmt.Errorf("%w: vault entry %q", store.ErrNotFound, name)
	}
	if err != nil {
		return store.Credential{}, fmt.Errorf("store: reading vault entry %q: %w", name, err)
	}
	c.Updated = parseTime(sql.NullString{String: updated, Valid: true})
	return c, nil
}

// Credentials implements [store.Vault].
func (s *Store) Credentials(ctx context.Context) ([]store.Credential, error) {
	rows, err := s.pool().query(ctx, `SELECT name, sealed, version, updated_at FROM vault ORDER BY name`)
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
		c.Updated = parseTime(sql.NullString{String: updated, Valid: true})
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: listing the vault: %w", err)
	}
	return out, nil
}

// PutCredential implements [store.Vault]: the version is compared and
// bumped in one transaction of the writer.
func (s *Store) PutCredential(ctx context.Context, name string, sealed []byte, version int64) (int64, error) {
	if name == "" || len(sealed) == 0 {
		return 0, errors.New("store: a vault entry needs a name and a sealed value")
	}
	err := s.Tx(ctx, func(stx store.Tx) error {
		t := stx.(*Tx)
		var res sql.Result
		var err error
		if version == 0 {
			res, err = t.exec(`INSERT INTO vault (name, sealed, version, updated_at) VALUES (?, ?, 1, ?) ON CONFLICT (name) DO NOTHING`, name, sealed, t.now())
		} else {
			res, err = t.exec(`UPDATE vault SET sealed = ?, version = version + 1, updated_at = ? WHERE name = ? AND version = ?`, sealed, t.now(), name, version)
		}
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("%w: vault entry %q (version %d)", store.ErrConflict, name, version)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return 0, err
		}
		return 0, fmt.Errorf("store: writing vault entry %q: %w", name, err)
	}
	return version + 1, nil
}

// DeleteCredential implements [store.Vault].
func (s *Store) DeleteCredential(ctx context.Context, name string) error {
	return s.Tx(ctx, func(stx store.Tx) error {
		t := stx.(*Tx)
		if _, err := t.exec(`DELETE FROM vault_leases WHERE name = ?`, name); err != nil {
			return fmt.Errorf("store: deleting vault entry %q: %w", name, err)
		}
		res, err := t.exec(`DELETE FROM vault WHERE name = ?`, name)
		if err != nil {
			return fmt.Errorf("store: deleting vault entry %q: %w", name, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("%w: vault entry %q", store.ErrNotFound, name)
		}
		return nil
	})
}

// LeaseCredential implements [store.Vault]: one upsert that takes the
// lease only from nobody, from holder itself, or from a holder whose lease
// ran out.
func (s *Store) LeaseCredential(ctx context.Context, name, holder string, now, until time.Time) (bool, error) {
	var got bool
	err := s.Tx(ctx, func(stx store.Tx) error {
		res, err := stx.(*Tx).exec(`INSERT INTO vault_leases (name, holder, until) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
			WHERE vault_leases.holder = excluded.holder OR vault_leases.until <= ?`,
			name, holder, formatTime(until), formatTime(now))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		got = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("store: leasing vault entry %q: %w", name, err)
	}
	return got, nil
}

// ReleaseCredential implements [store.Vault].
func (s *Store) ReleaseCredential(ctx context.Context, name, holder string) error {
	err := s.Tx(ctx, func(stx store.Tx) error {
		_, err := stx.(*Tx).exec(`DELETE FROM vault_leases WHERE name = ? AND holder = ?`, name, holder)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: releasing vault entry %q: %w", name, err)
	}
	return nil
}
