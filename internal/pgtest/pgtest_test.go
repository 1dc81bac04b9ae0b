package pgtest

import (
	"context"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// connect opens a connection to url, closed when the test ends (before
// the schema is dropped: cleanups run last-registered first).
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func queryString(t *testing.T, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func TestSchemaConnectsWithPgx(t *testing.T) {
	url := Schema(t)
	conn := connect(t, url)
	ctx := context.Background()
	schema := queryString(t, conn, "SELECT current_schema()")
	if !strings.HasPrefix(schema, "t_testschemaconnectswithpgx_") {
		t.Errorf("current_schema() = %q, want t_testschemaconnectswithpgx_...", schema)
	}
	if sp := queryString(t, conn, "SHOW search_path"); sp != schema {
		t.Errorf("search_path = %q, want only %q", sp, schema)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE runs (id text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO runs VALUES ($1), ($2)", "r1", "r2"); err != nil {
		t.Fatal(err)
	}
	// The table is in the test's schema, not in public.
	if got := queryString(t, conn, "SELECT table_schema::text FROM information_schema.tables WHERE table_name = 'runs'"); got != schema {
		t.Errorf("table runs is in schema %q, want %q", got, schema)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM runs").Scan(&n); err != nil || n != 2 {
		t.Errorf("count = %d, %v; want 2", n, err)
	}
	t.Logf("server: %s", queryString(t, conn, "SELECT version()"))
	if os.Getenv(EnvURL) == "" {
		if addr := queryString(t, conn, "SELECT host(inet_server_addr())"); addr != "127.0.0.1" {
			t.Errorf("the throwaway cluster answered on %q, want 127.0.0.1 only", addr)
		}
	}
}

// TestSchemasIsolated: two tests running at the same time each create a
// table of the same name and see only their own.
func TestSchemasIsolated(t *testing.T) {
	var ready sync.WaitGroup
	ready.Add(2)
	allReady := make(chan struct{})
	go func() { ready.Wait(); close(allReady) }()
	schemas := make(chan string, 2)
	for _, v := range []string{"a", "b"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			// Released however the subtest ends, so a failing one does
			// not keep the other waiting.
			var once sync.Once
			defer once.Do(ready.Done)
			conn := connect(t, Schema(t))
			ctx := context.Background()
			schemas <- queryString(t, conn, "SELECT current_schema()")
			if _, err := conn.Exec(ctx, "CREATE TABLE notes (v text)"); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, "INSERT INTO notes VALUES ($1)", v); err != nil {
				t.Fatal(err)
			}
			once.Do(ready.Done)
			select {
			case <-allReady:
			case <-time.After(2 * time.Minute):
				t.Fatal("the other subtest never made its table")
			}
			rows, err := conn.Query(ctx, "SELECT v FROM notes")
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != v {
				t.Errorf("notes = %q, want only [%q]", got, v)
			}
		})
	}
	t.Cleanup(func() {
		close(schemas)
		var names []string
		for s := range schemas {
			names = append(names, s)
		}
		if len(names) == 2 && names[0] == names[1] {
			t.Errorf("both tests got schema %q", names[0])
		}
	})
}

func TestCleanupDropsSchema(t *testing.T) {
	var schema string
	t.Run("inner", func(t *testing.T) {
		conn := connect(t, Schema(t))
		schema = queryString(t, conn, "SELECT current_schema()")
		if _, err := conn.Exec(context.Background(), "CREATE TABLE audit (seq bigint)"); err != nil {
			t.Fatal(err)
		}
	})
	if t.Failed() || schema == "" {
		t.Fatal("inner test failed")
	}
	base, err := server()
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, base)
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("schema %q still there after its test", schema)
	}
}

func TestSearchPathURL(t *testing.T) {
	for _, tc := range []struct{ base, want string }{
		{"postgres://u@127.0.0.1:5432/db?sslmode=disable", "-c search_path=t_x_1"},
		{"postgresql://u@h/db?options=-c%20statement_timeout%3D5s", "-c statement_timeout=5s -c search_path=t_x_1"},
	} {
		u, err := withSearchPath(tc.base, "t_x_1")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pgx.ParseConfig(u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if got := cfg.RuntimeParams["options"]; got != tc.want {
			t.Errorf("%s: options = %q, want %q", u, got, tc.want)
		}
	}
	for _, bad := range []string{"host=localhost dbname=x", "mysql://u@h/db", "http://x"} {
		if err := checkURL(bad); err == nil {
			t.Errorf("checkURL(%q) = nil, want an error", bad)
		}
	}
}

func TestSchemaName(t *testing.T) {
	seen := map[string]bool{}
	valid := regexp.MustCompile(`^t_[a-z0-9_]+$`)
	for _, name := range []string{"TestX", "TestX", strings.Repeat("TestVeryLong/sub test #01/", 10), "Test/ü/\"; DROP"} {
		s := schemaName(name)
		if len(s) > 63 || !valid.MatchString(s) || seen[s] {
			t.Errorf("schemaName(%q) = %q: want a new name of at most 63 bytes of [a-z0-9_]", name, s)
		}
		seen[s] = true
	}
}
