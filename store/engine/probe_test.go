package engine

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func exec(t *testing.T, u, sql string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatal(err)
	}
}

func one(t *testing.T, fs []Finding) Finding {
	t.Helper()
	if len(fs) != 1 {
		t.Fatalf("findings = %+v, want one", fs)
	}
	return fs[0]
}

// TestProbeSchema: the schema version the database holds, compared with
// the build's: none yet and older are warnings, newer is an error, equal
// is nothing.
func TestProbeSchema(t *testing.T) {
	u := pgtest.Schema(t)
	if f := one(t, probePostgres(context.Background(), u, 3)); f.Kind != SchemaNone || f.Error {
		t.Errorf("empty schema: %+v", f)
	}
	exec(t, u, `CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at text NOT NULL); INSERT INTO schema_version VALUES (1, 'x'), (2, 'y')`)
	if f := one(t, probePostgres(context.Background(), u, 3)); f.Kind != SchemaOlder || f.Error || !strings.Contains(f.Message, "version 2, older than this build's 3") {
		t.Errorf("older: %+v", f)
	}
	if fs := probePostgres(context.Background(), u, 2); len(fs) != 0 {
		t.Errorf("same version: %+v", fs)
	}
	if f := one(t, probePostgres(context.Background(), u, 1)); f.Kind != SchemaNewer || !f.Error || !strings.Contains(f.Message, "version 2, newer than this build knows (1)") {
		t.Errorf("newer: %+v", f)
	}
}

// TestProbeConnection: a closed port, a role the server does not have
// and a database it does not have each get their own finding, none
// quoting the URL's password.
func TestProbeConnection(t *testing.T) {
	base := pgtest.Schema(t)
	p, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(*url.URL)) string {
		c := *p
		f(&c)
		return c.String()
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	const pw = "pw-9f8e7d6c5b4a"
	for _, tc := range []struct {
		name, url, kind, msg string
	}{
		{"closed port", with(func(u *url.URL) { u.Host = closed; u.User = url.UserPassword("app", pw) }), Unreachable, "cannot reach the PostgreSQL server at 127.0.0.1"},
		{"no such role", with(func(u *url.URL) { u.User = url.UserPassword("no_such_role", pw) }), Auth, `refused role "no_such_role"`},
		{"no such database", with(func(u *url.URL) { u.Path = "/no_such_db"; u.User = url.UserPassword("postgres", pw) }), NoDatabase, `has no database "no_such_db"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := harness.Parse("h.yaml", []byte("store: {postgres: {url: \"${secret:DB}\"}}\n"), "/h")
			sec := harness.NewSecrets(h.Secrets, &harness.SecretsOptions{LookupEnv: func(k string) (string, bool) { return tc.url, k == "DB" }})
			f := one(t, Probe(context.Background(), h, sec))
			if f.Kind != tc.kind || !f.Error || !strings.Contains(f.Message, tc.msg) {
				t.Errorf("finding = %+v, want kind %s with %q", f, tc.kind, tc.msg)
			}
			if strings.Contains(f.Message, pw) || strings.Contains(f.Message, tc.url) {
				t.Errorf("the finding quotes the password: %s", f.Message)
			}
			_, err := Open(context.Background(), h, sec)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("Open's error quotes the password: %v", err)
			}
		})
	}
}

// TestProbeSQLite: an SQLite store has nothing to probe; a secret that
// does not resolve is left to the secret's own preflight.
func TestProbeNothing(t *testing.T) {
	h, _ := harness.Parse("h.yaml", []byte("store: {sqlite: x.db}\n"), t.TempDir())
	if fs := Probe(context.Background(), h, nil); len(fs) != 0 {
		t.Errorf("sqlite: %+v", fs)
	}
	h, _ = harness.Parse("h.yaml", []byte("store: {postgres: {url: \"${secret:DB}\"}}\n"), "/h")
	sec := harness.NewSecrets(h.Secrets, &harness.SecretsOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	if fs := Probe(context.Background(), h, sec); len(fs) != 0 {
		t.Errorf("unresolved secret: %+v", fs)
	}
}

func TestScrub(t *testing.T) {
	u := "postgres://app:p%40ss-w0rd-1@db:5432/x?sslmode=disable"
	got := ScrubText("dial "+u+" failed for p@ss-w0rd-1 and p%40ss-w0rd-1", u)
	if strings.Contains(got, "ss-w0rd") {
		t.Errorf("ScrubText = %q", got)
	}
}
