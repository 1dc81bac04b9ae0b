// Package engine opens the store a harness names, whichever engine it is:
// store.sqlite (the default, package store/sqlite) or store.postgres
// (package store/postgres). It is the one place a harness's store is
// opened; [Probe] is what `openplaybook check` asks of it without opening
// it for writing.
//
// No error of this package holds the PostgreSQL URL or its password: they
// are replaced with "[redacted]" before an error leaves it.
package engine

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/sqlite"
)

// Open opens the store hs names. For SQLite it creates the file's
// directory (mode 0700) and makes the file mode 0600; for PostgreSQL it
// resolves store.postgres.url with sec, connects, migrates the schema to
// this build's version and checks it (see store/postgres). sec nil means
// hs.SecretResolver().
//
// Errors: a secret that does not resolve (a *[harness.SecretError] in the
// chain), an I/O or connection error, a schema this build cannot use. No
// error holds the URL or its password.
func Open(ctx context.Context, hs *harness.Harness, sec *harness.Secrets) (store.Store, error) {
	if hs.Store.Postgres != nil {
		if sec == nil {
			sec = hs.SecretResolver()
		}
		u, err := hs.Store.Postgres.Expand(sec)
		if err != nil {
			return nil, err
		}
		st, err := openPostgres(ctx, u)
		if err != nil {
			return nil, Scrub(fmt.Errorf("opening the PostgreSQL store: %w", err), u)
		}
		return st, nil
	}
	return OpenSQLite(hs.Store.SQLite)
}

// OpenSQLite opens the SQLite store at path, creating its directory
// (0700) and making the file 0600.
func OpenSQLite(path string) (store.Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	st, err := sqlite.Open(path, nil)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// OpenPostgres opens the PostgreSQL store at the connection URL u (see
// [Open]); the error never holds u or its password.
func OpenPostgres(ctx context.Context, u string) (store.Store, error) {
	st, err := openPostgres(ctx, u)
	if err != nil {
		return nil, Scrub(fmt.Errorf("opening the PostgreSQL store: %w", err), u)
	}
	return st, nil
}

// Scrub returns err with its message cleaned of the URL u, its password
// (as written and decoded) and its user info, or nil for nil. errors.Is
// and errors.As still see the original chain.
func Scrub(err error, u string) error {
	if err == nil {
		return nil
	}
	msg := ScrubText(err.Error(), u)
	if msg == err.Error() {
		return err
	}
	return &scrubbed{msg: msg, err: err}
}

// ScrubText is [Scrub] for text.
func ScrubText(text, u string) string {
	if u == "" {
		return text
	}
	var secrets []string
	secrets = append(secrets, u)
	if p, err := url.Parse(u); err == nil {
		if pw, ok := p.User.Password(); ok && pw != "" {
			secrets = append(secrets, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
		if pw := p.Query().Get("password"); pw != "" {
			secrets = append(secrets, pw, url.QueryEscape(pw))
		}
	}
	for _, s := range secrets {
		if s != "" {
			text = strings.ReplaceAll(text, s, "[redacted]")
		}
	}
	return text
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }
