// Package teststore is for tests only: it picks the store engine the
// suites that run on both engines use (the runtime's scenarios, the CLI's
// run tests, the serve tests), from the environment:
//
//	OPENPLAYBOOK_TEST_STORE=sqlite    (or unset) the SQLite engine, a file in the test's temp dir
//	OPENPLAYBOOK_TEST_STORE=postgres  the PostgreSQL engine, a schema of the test's own (internal/pgtest)
//
// A package using it calls pgtest.Main from its TestMain (nothing starts
// unless a test asks for PostgreSQL). Under CI a PostgreSQL run without a
// server fails, never skips (pgtest's rule). scripts/test.sh runs these
// packages a second time with OPENPLAYBOOK_TEST_STORE=postgres.
package teststore

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "modernc.org/sqlite" // Exec's driver for the SQLite file

	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/internal/pgtest"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/engine"
)

// Env names the environment variable that selects the engine.
const Env = "OPENPLAYBOOK_TEST_STORE"

// Engine returns "sqlite" or "postgres". Another value of [Env] fails
// the test.
func Engine(t testing.TB) string {
	t.Helper()
	switch v := os.Getenv(Env); v {
	case "", "sqlite":
		return "sqlite"
	case "postgres":
		return "postgres"
	default:
		t.Fatalf("%s=%q: want sqlite or postgres", Env, v)
		return ""
	}
}

// Postgres reports whether the tests run on PostgreSQL.
func Postgres(t testing.TB) bool { return Engine(t) == "postgres" }

// SQLiteOnly skips the test on PostgreSQL: what it checks is the SQLite
// file itself (why says what, for the skip message).
func SQLiteOnly(t testing.TB, why string) {
	t.Helper()
	if Postgres(t) {
		t.Skipf("SQLite only: %s", why)
	}
}

// Section returns the value of a harness's "store" key for the test: on
// SQLite {"sqlite": sqlitePath} (as written: relative to the harness
// file), on PostgreSQL {"postgres": {"url": URL}} with the URL of a
// schema of the test's own (no password: pgtest's server trusts
// loopback). Add "seed" to it as needed.
func Section(t testing.TB, sqlitePath string) map[string]any {
	t.Helper()
	if Postgres(t) {
		return map[string]any{"postgres": map[string]any{"url": pgtest.Schema(t)}}
	}
	return map[string]any{"sqlite": sqlitePath}
}

// YAML returns the harness lines of Section: "store:\n  sqlite: PATH\n"
// or "store:\n  postgres:\n    url: URL\n", plus seed when not "".
func YAML(t testing.TB, sqlitePath, seed string) string {
	t.Helper()
	s := "store:\n"
	if Postgres(t) {
		s += "  postgres:\n    url: " + strconv.Quote(pgtest.Schema(t)) + "\n"
	} else {
		s += "  sqlite: " + strconv.Quote(sqlitePath) + "\n"
	}
	if seed != "" {
		s += "  seed: " + strconv.Quote(seed) + "\n"
	}
	return s
}

// Open opens a fresh store for the test on the selected engine (SQLite
// at path) and closes it when the test ends.
func Open(t testing.TB, path string) store.Store {
	t.Helper()
	var (
		st  store.Store
		err error
	)
	if Postgres(t) {
		st, err = engine.OpenPostgres(context.Background(), pgtest.Schema(t))
	} else {
		if path == "" {
			path = filepath.Join(t.TempDir(), "store.db")
		}
		st, err = engine.OpenSQLite(path)
	}
	if err != nil {
		t.Fatal(fmt.Errorf("teststore: %w", err))
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Exec runs one raw SQL statement on the store the harness h names, as
// another process with direct database access would (a test of tampering
// with the rows): on the SQLite file, or on the PostgreSQL URL (h's
// store.postgres.url, secrets resolved). Write placeholders as "?"; on
// PostgreSQL they become $1, $2, ... It returns the rows changed.
func Exec(t testing.TB, h *harness.Harness, query string, args ...any) int64 {
	t.Helper()
	return raw(t, h, query, args, nil)
}

// Int runs a query returning one integer (count(*)) on the store h names,
// as [Exec] does.
func Int(t testing.TB, h *harness.Harness, query string, args ...any) int64 {
	t.Helper()
	var n int64
	raw(t, h, query, args, &n)
	return n
}

func raw(t testing.TB, h *harness.Harness, query string, args []any, into *int64) int64 {
	t.Helper()
	ctx := context.Background()
	if h.Store.Postgres != nil {
		u, err := h.Store.Postgres.Expand(h.SecretResolver())
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		n := 0
		for _, r := range query {
			if r == '?' {
				n++
				fmt.Fprintf(&b, "$%d", n)
				continue
			}
			b.WriteRune(r)
		}
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var changed int64
		if into != nil {
			err = conn.QueryRow(ctx, b.String(), args...).Scan(into)
		} else {
			var tag pgconn.CommandTag
			tag, err = conn.Exec(ctx, b.String(), args...)
			changed = tag.RowsAffected()
		}
		if err != nil {
			t.Fatalf("teststore: %s: %v", query, err)
		}
		return changed
	}
	db, err := sql.Open("sqlite", "file:"+h.Store.SQLite+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var changed int64
	if into != nil {
		err = db.QueryRowContext(ctx, query, args...).Scan(into)
	} else {
		var res sql.Result
		if res, err = db.ExecContext(ctx, query, args...); err == nil {
			changed, _ = res.RowsAffected()
		}
	}
	if err != nil {
		t.Fatalf("teststore: %s: %v", query, err)
	}
	return changed
}
