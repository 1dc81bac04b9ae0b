package cli

import (
	"encoding/json"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/internal/pgtest"
	"github.com/openplaybook/openplaybook/runtime"
)

// setStore rewrites the env's harness with store section s (the seed
// kept) and returns the harness's path.
func (e *rtEnv) setStore(s map[string]any) string {
	e.t.Helper()
	b, err := os.ReadFile(e.harness)
	if err != nil {
		e.t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(b, &h); err != nil {
		e.t.Fatal(err)
	}
	if seed, ok := h["store"].(map[string]any)["seed"]; ok {
		s["seed"] = seed
	}
	h["store"] = s
	b, _ = json.MarshalIndent(h, "", "  ")
	if err := os.WriteFile(e.harness, b, 0o600); err != nil {
		e.t.Fatal(err)
	}
	return e.harness
}

// TestStoreMigrateToPostgres: runs recorded in SQLite (one completed
// through a gate and an audited note.add call, one waiting at its gate),
// copied with `store migrate --to postgres`; on the PostgreSQL harness
// every run's audit log is the same records with the same hashes and
// verifies, status lists both, the waiting run resumes there to
// completion (accepting the harness change, as for any edit of it); a second copy into the now non-empty target is refused.
// The URL's password is never printed.
func TestStoreMigrateToPostgres(t *testing.T) {
	t.Parallel()
	e, doc := newGatedEnv(t)
	e.setStore(map[string]any{"sqlite": "state/openplaybook.db"})

	done := e.outcome(ExitWaiting, "run", doc)
	e.cli(ExitOK, "approve", done.Run, "confirm")
	if o := e.outcome(ExitOK, "resume", done.Run); o.Status != runtime.Completed {
		t.Fatalf("resume: %+v", o)
	}
	waiting := e.outcome(ExitWaiting, "run", doc)
	runs := []string{done.Run, waiting.Run}
	before := map[string][]map[string]any{}
	for _, r := range runs {
		ok, recs := e.auditJSON(r)
		if !ok || len(recs) == 0 {
			t.Fatalf("SQLite: run %s: verified %v, %d records", r, ok, len(recs))
		}
		before[r] = recs
	}

	// pgtest's server trusts loopback: the password is never checked, so
	// it only shows whether it leaks.
	const pw = "migrate-pw-5d1c7e"
	u, err := url.Parse(pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	dbURL := u.String()

	out, _ := e.cli(ExitOK, "store", "migrate", "--to", "postgres", "--url", dbURL)
	if !strings.Contains(out, "runs 2,") || !strings.Contains(out, "(2 runs)") {
		t.Errorf("store migrate printed %q", out)
	}
	_, stderr := e.cli(ExitProblems, "store", "migrate", "--to", "postgres", "--url", dbURL)
	if !strings.Contains(stderr, "the target store is not empty") || !strings.Contains(stderr, "runs: 2 rows") {
		t.Errorf("second copy: %s", stderr)
	}
	if _, stderr := e.cli(ExitUsage, "store", "migrate", "--to", "mysql", "--url", dbURL); !strings.Contains(stderr, "the one target engine is postgres") {
		t.Errorf("--to mysql: %s", stderr)
	}

	// The same harness, pointed at PostgreSQL by a secret.
	e.write("secrets.env", "STRIPE_API_KEY="+runStripeSecret+"\nMEMORY_TOKEN="+runMemorySecret+"\nOPENPLAYBOOK_DATABASE_URL="+dbURL+"\n")
	e.setStore(map[string]any{"postgres": map[string]any{"url": "${secret:OPENPLAYBOOK_DATABASE_URL}"}})
	for _, r := range runs {
		ok, recs := e.auditJSON(r)
		if !ok {
			t.Errorf("PostgreSQL: run %s does not verify", r)
		}
		if !reflect.DeepEqual(recs, before[r]) {
			t.Errorf("PostgreSQL: run %s's records differ from SQLite's:\n got %v\nwant %v", r, recs, before[r])
		}
	}
	status, _ := e.cli(ExitOK, "status", "--format", "json")
	if !strings.Contains(status, done.Run) || !strings.Contains(status, waiting.Run) {
		t.Errorf("status on PostgreSQL: %s", status)
	}
	e.cli(ExitOK, "approve", waiting.Run, "confirm")
	// The harness file changed (its store section): resuming says so in
	// the audit log, as any change of the harness a run was started with.
	e.cli(ExitProblems, "resume", waiting.Run)
	if o := e.outcome(ExitOK, "resume", "--accept-harness-change", waiting.Run); o.Status != runtime.Completed {
		t.Errorf("resume on PostgreSQL: %+v", o)
	}
	if ok, recs := e.auditJSON(waiting.Run); !ok || len(recs) <= len(before[waiting.Run]) {
		t.Errorf("after resuming on PostgreSQL: verified %v, %d records (had %d)", ok, len(recs), len(before[waiting.Run]))
	}
	e.cli(ExitOK, "check")
	if strings.Contains(e.printed.String(), pw) {
		t.Errorf("the database password was printed:\n%s", e.printed.String())
	}
}

// TestCheckPreflightsPostgres: check of a harness whose PostgreSQL store
// cannot be reached, or names a database the server lacks, reports it at
// store.postgres.url (rule preflight-store) and exits 1; a reachable,
// empty database is a warning only. status on the unreachable one fails
// too. The password never shows.
func TestCheckPreflightsPostgres(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	const pw = "check-pw-0b9a8c7d"
	good, err := url.Parse(pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	good.User = url.UserPassword(good.User.Username(), pw)
	noDB := *good
	noDB.Path = "/no_such_database"
	for _, tc := range []struct {
		name, url string
		code      int
		want      string
	}{
		{"unreachable", "postgres://app:" + pw + "@" + closed + "/openplaybook?sslmode=disable", ExitProblems, "cannot reach the PostgreSQL server at 127.0.0.1"},
		{"no database", noDB.String(), ExitProblems, `has no database "no_such_database"`},
		{"empty", good.String(), ExitOK, "no openplaybook tables yet: the first run creates them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			h := filepath.Join(dir, "h.yaml")
			if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("OPENPLAYBOOK_DATABASE_URL="+tc.url+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(h, []byte("secrets: {env: false, dotenv: [.env]}\nstore:\n  postgres:\n    url: \"${secret:OPENPLAYBOOK_DATABASE_URL}\"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errs := run(t, nil, "check", "--harness", h)
			if code != tc.code || !strings.Contains(out+errs, tc.want) || !strings.Contains(out+errs, "preflight-store") || !strings.Contains(out+errs, h+":4:10") {
				t.Errorf("check: exit %d, want %d with %q at %s:4:10\nstdout:\n%s\nstderr:\n%s", code, tc.code, tc.want, h, out, errs)
			}
			if strings.Contains(out+errs, pw) {
				t.Errorf("check printed the password:\n%s%s", out, errs)
			}
			if tc.name == "unreachable" {
				code, out, errs := run(t, nil, "status", "--harness", h)
				if code == ExitOK || strings.Contains(out+errs, pw) || !strings.Contains(errs, "opening the PostgreSQL store") {
					t.Errorf("status: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
				}
			}
		})
	}
}
