package migrate

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/internal/pgtest"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/sqlite"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// sqliteStore writes a store with one run, a step and two sealed audit
// records, and returns its path and the run's id.
func sqliteStore(t *testing.T) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var run string
	err = st.Tx(context.Background(), func(tx store.Tx) error {
		r, err := tx.CreateRun(store.Run{PlaybookID: "p", PlaybookVersion: "1.0.0", Document: []byte(`{"x":1}`), HarnessPath: "h.yaml"})
		if err != nil {
			return err
		}
		run = r.ID
		if _, err := tx.StartStep(run, "a"); err != nil {
			return err
		}
		_, err = tx.AppendAll(audit.Record{Run: run, Kind: "run.created"}, audit.Record{Run: run, Kind: "step.started", Step: "a", Tool: "mcp.x.y"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return path, run
}

func count(t *testing.T, u, table string) int64 {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCopyVerbatim: the audit records on PostgreSQL are the SQLite ones,
// hashes included; a second copy into the same database is refused.
func TestCopyVerbatim(t *testing.T) {
	path, run := sqliteStore(t)
	u := pgtest.Schema(t)
	rep, err := SQLiteToPostgres(context.Background(), path, u)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rows["runs"] != 1 || rep.Rows["steps"] != 1 || rep.Rows["audit"] != 2 || rep.Runs != 1 {
		t.Errorf("report %+v", rep)
	}
	src, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	want, _ := src.Audit(context.Background(), run)
	if got := count(t, u, "audit"); got != int64(len(want)) {
		t.Fatalf("%d audit rows on PostgreSQL, want %d", got, len(want))
	}
	conn, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, r := range want {
		var hash, tm string
		if err := conn.QueryRow(context.Background(), `SELECT hash, time FROM audit WHERE run = $1 AND seq = $2`, run, r.Seq).Scan(&hash, &tm); err != nil {
			t.Fatal(err)
		}
		if hash != r.Hash || tm != r.Time {
			t.Errorf("seq %d: hash %s time %s on PostgreSQL, want %s %s", r.Seq, hash, tm, r.Hash, r.Time)
		}
	}
	_, err = SQLiteToPostgres(context.Background(), path, u)
	if !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), "runs: 1 rows") {
		t.Errorf("second copy: %v", err)
	}
	if got := count(t, u, "runs"); got != 1 {
		t.Errorf("%d runs after the refused copy, want 1", got)
	}
}

// TestCopyAllOrNothing: a row the target refuses (a step of a run that
// does not exist, written into SQLite with its foreign keys off) fails
// the copy, and the runs copied before it are not kept.
func TestCopyAllOrNothing(t *testing.T) {
	path, _ := sqliteStore(t)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(0)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO steps (run, step, attempt, status, error, started_at) VALUES ('run_ghost', 'a', 1, 'running', '', '2026-01-01T00:00:00.000000000Z')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	pu, err := url.Parse(pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	pu.User = url.UserPassword(pu.User.Username(), "pw-41f2") // pgtest's server trusts loopback: not checked
	u := pu.String()
	_, err = SQLiteToPostgres(context.Background(), path, u)
	if err == nil || !strings.Contains(err.Error(), "copying table steps") {
		t.Fatalf("copy with a dangling step: %v", err)
	}
	if strings.Contains(err.Error(), "pw-41f2") {
		t.Errorf("the error holds the password: %v", err)
	}
	if got := count(t, u, "runs"); got != 0 {
		t.Errorf("%d runs kept after the failed copy, want 0", got)
	}
}
