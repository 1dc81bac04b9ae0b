// Package pgtest is for tests only: it gives each test of a package its
// own schema on a PostgreSQL server, so the PostgreSQL store engine's tests
// run against the real database.
//
// Where the server comes from:
//   - OPENPLAYBOOK_TEST_POSTGRES (see [EnvURL]) set to a postgres:// URL of
//     a role that may CREATE SCHEMA: that server is used, nothing is started.
//   - Otherwise the first [Schema] call of the package run starts a
//     throwaway PostgreSQL cluster (initdb into a temporary directory, then
//     pg_ctl -w start), listening on 127.0.0.1 only, on a free port, with
//     trust authentication for loopback and its unix socket in that
//     directory. The binaries are looked up with `pg_config --bindir`, then
//     in /usr/lib/postgresql/15/bin, then on PATH. When the tests run as
//     root the cluster runs as the "postgres" OS user (initdb refuses
//     root). [Main] stops it and removes the directory.
//
// When neither can be had (no URL and no binaries), [Schema] skips the
// test, except under CI (CI=true), where it fails it: CI must never
// silently skip the PostgreSQL tests.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestX(t *testing.T) {
//		url := pgtest.Schema(t) // postgres://...?options=-c%20search_path%3Dt_...
//		pool, err := pgxpool.New(ctx, url)
//		...
//	}
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the environment variable that points the tests at an
// existing server instead of a throwaway cluster: a postgres:// (or
// postgresql://) URL, as pgx and libpq accept it. Each test still gets its
// own schema there, created and dropped by [Schema]; the role needs the
// CREATE privilege on the URL's database.
const EnvURL = "OPENPLAYBOOK_TEST_POSTGRES"

// opTimeout bounds each administrative statement (connect, CREATE SCHEMA,
// DROP SCHEMA), so a stuck server fails the test instead of hanging it.
const opTimeout = time.Minute

// errUnavailable marks the errors that mean no server can be had here (no
// binaries, no "postgres" user to run them as root): a skip outside CI.
var errUnavailable = errors.New("no PostgreSQL server available")

var (
	mainCalled atomic.Bool

	mu      sync.Mutex
	started bool
	admin   string   // URL of the superuser (or EnvURL) connection
	local   *cluster // nil when EnvURL is used or nothing started
	srvErr  error

	seq atomic.Int64

	durable        *cluster // see DurableSchema
	durableStarted bool
	durableErr     error
)

// Main runs the package's tests (m.Run), then stops the cluster that
// [Schema] started, if any, removes its directory, and exits with the
// tests' code (1 if they passed but the cluster would not stop). Call it
// from TestMain; [Schema] fails a test when it was not called.
//
// When the test binary dies without returning from m.Run (a panic in a
// test, -timeout, kill -9), a watcher process started with the cluster
// sees its pipe from the test binary close, shuts the postmaster down
// (SIGQUIT: immediate shutdown) and removes the directory. Only when the
// watcher is killed as well is the cluster left: a pgtest-* directory in
// the temporary directory, whose server `pg_ctl -D DIR/data stop` ends.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	mainCalled.Store(true)
	code := m.Run()
	if err := shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// shutdown stops the local cluster, if one was started, and forgets it.
func shutdown() error {
	mu.Lock()
	defer mu.Unlock()
	c, d := local, durable
	local, started, srvErr, admin = nil, false, nil, ""
	durable, durableStarted, durableErr = nil, false, nil
	var errs []error
	if c != nil {
		errs = append(errs, c.stop())
	}
	if d != nil {
		errs = append(errs, d.stop())
	}
	return errors.Join(errs...)
}

// server returns the administrative URL, starting the cluster on the
// first call of the package run (or using [EnvURL]).
func server() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if started {
		return admin, srvErr
	}
	started = true
	if u := os.Getenv(EnvURL); u != "" {
		if err := checkURL(u); err != nil {
			srvErr = fmt.Errorf("%s: %w", EnvURL, err)
			return "", srvErr
		}
		admin = u
		return admin, nil
	}
	c, err := startCluster()
	if err != nil {
		srvErr = err
		return "", err
	}
	local, admin = c, c.url()
	return admin, nil
}

// Schema creates a schema of its own for the test, on the package's
// server, and returns a URL that connects to it: the server's URL with
// `options=-c search_path=NAME` added, so unqualified names resolve in that
// schema only (not in public). The schema is dropped (CASCADE) when the
// test and its subtests finish; close the test's connections in cleanups
// registered after Schema (they run first), so the drop is not blocked by
// an open transaction.
//
// It skips the test when no server can be had, or fails it under CI; it
// fails the test when the server cannot be started or reached, or when
// [Main] is not the package's TestMain.
func Schema(t testing.TB) string {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("pgtest: Schema needs pgtest.Main(m) in the package's TestMain (it stops the cluster after the tests)")
	}
	base, err := server()
	if err != nil {
		if errors.Is(err, errUnavailable) {
			if inCI() {
				t.Fatalf("pgtest: %v (CI is set, so this is a failure, not a skip; .ci/run installs postgresql)", err)
			}
			t.Skipf("pgtest: %v; set %s=postgres://... or install PostgreSQL 15", err, EnvURL)
		}
		t.Fatalf("pgtest: %v", err)
	}
	return schemaOn(t, base)
}

// DurableSchema is [Schema] on a second cluster of the package's, started
// on its first call, whose fsync and full_page_writes are on (see
// [ClusterOptions.Durable]): for benchmarks of commits. With [EnvURL] set
// it is Schema on that server. [Main] stops the cluster.
func DurableSchema(t testing.TB) string {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("pgtest: DurableSchema needs pgtest.Main(m) in the package's TestMain (it stops the cluster after the tests)")
	}
	if os.Getenv(EnvURL) != "" {
		return Schema(t)
	}
	mu.Lock()
	if !durableStarted {
		durableStarted = true
		durable, durableErr = newCluster(true)
	}
	d, err := durable, durableErr
	mu.Unlock()
	if err != nil {
		if errors.Is(err, errUnavailable) {
			if inCI() {
				t.Fatalf("pgtest: %v (CI is set, so this is a failure, not a skip)", err)
			}
			t.Skipf("pgtest: %v", err)
		}
		t.Fatalf("pgtest: %v", err)
	}
	return schemaOn(t, d.url())
}

// schemaOn creates the test's schema on the server at base and returns
// its URL.
func schemaOn(t testing.TB, base string) string {
	t.Helper()
	name := schemaName(t.Name())
	if err := execSQL(base, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := execSQL(base, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", name, err)
		}
	})
	u, err := withSearchPath(base, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// execSQL runs one statement on a fresh connection to url.
func execSQL(url, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// schemaName is "t_", the test's name (lower case, runs of anything but
// [a-z0-9] as "_", at most 32 bytes), a random part and a sequence number:
// unique across tests, packages and runs sharing one server, and within
// PostgreSQL's 63-byte limit on names.
func schemaName(test string) string {
	var b strings.Builder
	under := false
	for _, r := range strings.ToLower(test) {
		if b.Len() >= 32 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			under = false
		} else if !under {
			b.WriteByte('_')
			under = true
		}
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return "t_" + b.String() + "_" + hex.EncodeToString(rnd[:]) + "_" + strconv.FormatInt(seq.Add(1), 10)
}

// checkURL accepts a postgres:// or postgresql:// URL.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("want a postgres:// or postgresql:// URL, got scheme %q", u.Scheme)
	}
	return nil
}

// withSearchPath adds "-c search_path=NAME" to the URL's options
// parameter (the server's command-line options, which pgx and libpq both
// send at connection start), after any options already there. name is
// made by [schemaName], so it needs no quoting.
func withSearchPath(base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("server URL: %v", err)
	}
	q := u.Query()
	opt := "-c search_path=" + name
	if old := q.Get("options"); old != "" {
		opt = old + " " + opt
	}
	q.Set("options", opt)
	// Spaces as %20: pgx and libpq do not read "+" as a space in a
	// connection URL (Encode writes a literal "+" as %2B).
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String(), nil
}

// inCI reports whether the CI environment variable is set to anything but
// "", "0" or "false" (GitHub Actions and GitLab set CI=true).
func inCI() bool {
	v := os.Getenv("CI")
	if v == "" {
		return false
	}
	if b, err := strconv.ParseBool(v); err == nil {
		return b
	}
	return true
}

// isUnavailable reports whether err means no server can be had here.
func isUnavailable(err error) bool { return errors.Is(err, errUnavailable) }
