package postgres_test

import (
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/internal/pgtest"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/postgres"
	"github.com/openplaybook/openplaybook/store/sqlite"
)

// TestSameColumnsAsSQLite: every table of store/sqlite's schema is here
// with the same columns in the same order (a copy goes table by table,
// column by column), and no other table; the one addition is the rowid
// column, SQLite's implicit one made explicit.
func TestSameColumnsAsSQLite(t *testing.T) {
	lite, err := sqlite.OpenWith(filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	db, err := sql.Open("sqlite", "file:"+lite.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := map[string][]string{}
	rows, err := db.Query(`SELECT m.name, p.name FROM sqlite_schema m JOIN pragma_table_info(m.name) p
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, p.cid`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var table, col string
		if err := rows.Scan(&table, &col); err != nil {
			t.Fatal(err)
		}
		want[table] = append(want[table], col)
	}
	rows.Close()

	url := pgtest.Schema(t)
	s := openURL(t, url, nil)
	if v, err := s.SchemaVersion(bg); err != nil || v != postgres.SchemaVersion || v != sqlite.SchemaVersion {
		t.Errorf("SchemaVersion = %d, %v; want %d, store/sqlite's %d", v, err, postgres.SchemaVersion, sqlite.SchemaVersion)
	}
	conn, err := pgx.Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg)
	got := map[string][]string{}
	prows, err := conn.Query(bg, `SELECT c.relname, a.attname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE n.nspname = current_schema() AND c.relkind = 'r' ORDER BY c.relname, a.attnum`)
	if err != nil {
		t.Fatal(err)
	}
	for prows.Next() {
		var table, col string
		if err := prows.Scan(&table, &col); err != nil {
			t.Fatal(err)
		}
		if col == "rowid" {
			continue
		}
		got[table] = append(got[table], col)
	}
	prows.Close()
	if len(want) == 0 {
		t.Fatal("read no tables from store/sqlite")
	}
	for table, cols := range want {
		if !slices.Equal(got[table], cols) {
			t.Errorf("table %s: columns %v, store/sqlite's %v", table, got[table], cols)
		}
	}
	for table := range got {
		if _, ok := want[table]; !ok {
			t.Errorf("table %s is not store/sqlite's", table)
		}
	}
	for _, table := range store.RunStateTables {
		if got[table] == nil {
			t.Errorf("run-state table %s missing", table)
		}
	}
}

// TestConcurrentOpen: stores opening a new schema at once take turns on
// the migration (an advisory transaction lock): all open, the schema is
// made once.
func TestConcurrentOpen(t *testing.T) {
	url := pgtest.Schema(t)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(bg, url, nil)
			if err == nil {
				_, _ = newRunErr(s)
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
		}
	}
	conn, err := pgx.Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg)
	var n, runs int
	if err := conn.QueryRow(bg, `SELECT count(*), (SELECT count(*) FROM runs) FROM schema_version`).Scan(&n, &runs); err != nil {
		t.Fatal(err)
	}
	if n != postgres.SchemaVersion || runs != len(errs) {
		t.Errorf("%d schema_version rows, %d runs; want %d and %d", n, runs, postgres.SchemaVersion, len(errs))
	}
}

func newRunErr(s store.Store) (string, error) {
	var id string
	err := s.Tx(bg, func(tx store.Tx) error {
		r, err := tx.CreateRun(store.Run{PlaybookID: "p"})
		id = r.ID
		return err
	})
	return id, err
}

// TestNewerSchemaRefused: a schema a later build migrated is not opened.
func TestNewerSchemaRefused(t *testing.T) {
	url := pgtest.Schema(t)
	openURL(t, url, nil).Close()
	conn, err := pgx.Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg)
	if _, err := conn.Exec(bg, `INSERT INTO schema_version VALUES (99, 'later')`); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(bg, url, nil)
	if err == nil || !strings.Contains(err.Error(), "schema version 99") {
		t.Fatalf("Open of a newer schema: %v", err)
	}
}

// TestOpenBadInput: bad options and URLs are errors that say what is
// wrong, not panics or hangs.
func TestOpenBadInput(t *testing.T) {
	url := pgtest.Schema(t)
	for name, tc := range map[string]struct {
		url string
		opt *postgres.Options
		err string
	}{
		"synchronous": {url, &postgres.Options{Synchronous: "OFF"}, `synchronous "OFF": want FULL or NORMAL`},
		"max conns":   {url, &postgres.Options{MaxConns: -1}, "MaxConns -1"},
		"url":         {"postgres://%zz", nil, "the PostgreSQL URL"},
	} {
		_, err := postgres.Open(bg, tc.url, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", name, err, tc.err)
		}
	}
	// NORMAL opens, and commits.
	s := openURL(t, url, &postgres.Options{Synchronous: "NORMAL"})
	run, _ := newRun(t, s)
	if _, err := s.GetRun(bg, run); err != nil {
		t.Fatal(err)
	}
}
