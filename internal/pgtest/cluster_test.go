//go:build unix

package pgtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The child tests below run only in a child process (the test binary run
// again by the tests after them), with childEnv saying what to do.
const childEnv = "PGTEST_CHILD"

// TestChild starts the cluster, prints its postmaster's pid and its
// directory, then returns, panics or hangs as childEnv says; "nobin" hides
// the binaries instead; "url" makes a table in its schema (EnvURL set) and
// prints the schema and whether a cluster was started.
func TestChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("run by the tests of Main")
	}
	if mode == "nobin" {
		fixedDirs = nil
		t.Setenv("PATH", t.TempDir())
		Schema(t)
		t.Fatal("Schema returned without binaries")
	}
	url := Schema(t)
	if mode == "url" {
		conn := connect(t, url)
		if _, err := conn.Exec(context.Background(), "CREATE TABLE calls (id text)"); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		started := local != nil
		mu.Unlock()
		fmt.Printf("pgtest-child-url local=%v schema=%s\n", started, queryString(t, conn, "SELECT current_schema()"))
		return
	}
	mu.Lock()
	pid, dir := local.pid, local.dir
	mu.Unlock()
	fmt.Printf("pgtest-child pid=%d dir=%s\n", pid, dir)
	switch mode {
	case "panic":
		panic("pgtest child: panic on purpose")
	case "hang":
		time.Sleep(5 * time.Minute)
	}
}

// needLocal skips (or, under CI, fails) when no local cluster can be made.
func needLocal(t *testing.T) {
	if _, err := binDir(); err != nil {
		if inCI() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if _, err := serverUser(); err != nil {
		if inCI() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// child runs TestChild in a child process with the given mode and
// environment and returns it with the pid and directory it printed.
func child(t *testing.T, mode string, env ...string) (cmd *exec.Cmd, pid int, dir string, done <-chan string) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.count=1", "-test.v", "-test.timeout=10m")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvURL+"=") && !strings.HasPrefix(kv, "CI=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, childEnv+"="+mode)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	line := make(chan string, 1)
	all := make(chan string, 1)
	go func() {
		var b strings.Builder
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "pgtest-child ") {
				line <- sc.Text()
			}
		}
		close(line)
		all <- b.String()
	}()
	if mode == "nobin" || mode == "url" {
		return cmd, 0, "", all
	}
	select {
	case l, ok := <-line:
		if !ok {
			t.Fatalf("the child printed no pid:\n%s", <-all)
		}
		if _, err := fmt.Sscanf(l, "pgtest-child pid=%d dir=%s", &pid, &dir); err != nil {
			t.Fatalf("child line %q: %v", l, err)
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("the child did not start its cluster in 5 minutes")
	}
	if !alive(pid) {
		t.Fatalf("postmaster %d is not running while the child runs", pid)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		t.Fatalf("cluster directory: %v", err)
	}
	return cmd, pid, dir, all
}

// waitGone waits (up to a minute: the watcher works after the child died)
// for the postmaster to exit and the directory to go.
func waitGone(t *testing.T, pid int, dir string, immediate bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		_, statErr := os.Stat(dir)
		gone := !alive(pid) && errors.Is(statErr, os.ErrNotExist)
		if gone {
			return
		}
		if immediate || time.Now().After(deadline) {
			t.Fatalf("after the child: postmaster %d alive=%v, directory %s: %v (want no process, no directory)", pid, alive(pid), dir, statErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestMainStopsCluster(t *testing.T) {
	needLocal(t)
	cmd, pid, dir, all := child(t, "exit")
	out := <-all
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	// Main returned only after the postmaster exited and the directory
	// went: no waiting here.
	waitGone(t, pid, dir, true)
}

func TestPanicStopsCluster(t *testing.T) {
	needLocal(t)
	cmd, pid, dir, all := child(t, "panic")
	out := <-all
	if err := cmd.Wait(); err == nil {
		t.Fatalf("child passed, want its panic:\n%s", out)
	}
	waitGone(t, pid, dir, false)
}

func TestKillStopsCluster(t *testing.T) {
	needLocal(t)
	cmd, pid, dir, all := child(t, "hang")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-all
	_ = cmd.Wait()
	waitGone(t, pid, dir, false)
}

// TestNoServer: with no binaries and no URL a test is skipped, except
// under CI, where it fails.
func TestNoServer(t *testing.T) {
	for _, tc := range []struct {
		ci, want string
	}{
		{"", "--- SKIP: TestChild"},
		{"false", "--- SKIP: TestChild"},
		{"true", "--- FAIL: TestChild"},
		{"1", "--- FAIL: TestChild"},
	} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			cmd, _, _, all := child(t, "nobin", "CI="+tc.ci)
			out := <-all
			err := cmd.Wait()
			if !strings.Contains(out, tc.want) || !strings.Contains(out, "no initdb, pg_ctl and postgres") {
				t.Fatalf("want %q about the missing binaries, got:\n%s", tc.want, out)
			}
			if failed := err != nil; failed != strings.Contains(tc.want, "FAIL") {
				t.Errorf("child exit: %v, want failure=%v", err, !failed)
			}
			if strings.Contains(out, "Schema returned") {
				t.Errorf("Schema returned without a server:\n%s", out)
			}
		})
	}
}

// TestEnvURL: with OPENPLAYBOOK_TEST_POSTGRES set, a test gets a schema on
// that server, no cluster is started, and the schema is dropped after.
func TestEnvURL(t *testing.T) {
	Schema(t) // this package's server (a cluster, or EnvURL) for the child
	base, err := server()
	if err != nil {
		t.Fatal(err)
	}
	cmd, _, _, all := child(t, "url", EnvURL+"="+base)
	out := <-all
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var started bool
	var schema string
	i := strings.Index(out, "pgtest-child-url ")
	if i < 0 {
		t.Fatalf("the child printed no schema:\n%s", out)
	}
	if _, err := fmt.Sscanf(out[i:], "pgtest-child-url local=%t schema=%s", &started, &schema); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if started {
		t.Errorf("the child started a cluster although %s was set", EnvURL)
	}
	if !strings.HasPrefix(schema, "t_testchild_") {
		t.Errorf("child's schema %q, want t_testchild_...", schema)
	}
	conn := connect(t, base)
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the child's schema %q is still on the server", schema)
	}
}

// TestPortTakenRetries: when the port picked is taken before the server
// binds it, the cluster starts on another one.
func TestPortTakenRetries(t *testing.T) {
	needLocal(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	var picks []int
	pickPort = func() (int, error) {
		if len(picks) == 0 {
			picks = append(picks, takenPort)
			return takenPort, nil
		}
		p, err := freePort()
		picks = append(picks, p)
		return p, err
	}
	defer func() { pickPort = freePort }()
	c, err := startCluster()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.stop(); err != nil {
			t.Error(err)
		}
		if alive(c.pid) {
			t.Errorf("postmaster %d alive after stop", c.pid)
		}
	}()
	if len(picks) != 2 || c.port != picks[1] || c.port == takenPort {
		t.Fatalf("picked %v, started on %d; want a second port after the taken %d", picks, c.port, takenPort)
	}
	conn := connect(t, c.url())
	if got := queryString(t, conn, "SELECT setting FROM pg_settings WHERE name = 'port'"); got != strconv.Itoa(c.port) {
		t.Errorf("server port %s, want %d", got, c.port)
	}
	conn.Close(context.Background())
}
