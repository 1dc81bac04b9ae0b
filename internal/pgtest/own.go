//go:build unix

package pgtest

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Cluster is a throwaway PostgreSQL cluster of one test's own, for tests
// that do to the server what the package's shared one must not suffer
// (stop it, crash it, restart it) and for benchmarks that need real
// commits. Unlike the package's cluster, which [Schema] starts, it
// ignores [EnvURL]: a test that crashes the server needs a server it may
// crash.
type Cluster struct {
	mu sync.Mutex
	c  *cluster
}

// ClusterOptions configure [NewCluster].
type ClusterOptions struct {
	// Durable turns fsync and full_page_writes on (the package's cluster
	// has them off): a commit is on disk when the server acknowledges it,
	// as on a production server, so that commit rates are real ones and
	// an immediate stop loses only what was not acknowledged.
	Durable bool
}

// NewCluster starts a cluster for t (initdb and pg_ctl start, about a
// second) and stops it and removes its directory when t ends. It skips t
// when no PostgreSQL binaries are found, or fails it under CI, as
// [Schema] does.
func NewCluster(t testing.TB, opt ClusterOptions) *Cluster {
	t.Helper()
	c, err := newCluster(opt.Durable)
	if err != nil {
		if isUnavailable(err) {
			if inCI() {
				t.Fatalf("pgtest: %v (CI is set, so this is a failure, not a skip)", err)
			}
			t.Skipf("pgtest: %v", err)
		}
		t.Fatalf("pgtest: %v", err)
	}
	cl := &Cluster{c: c}
	t.Cleanup(func() {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		if err := cl.c.stop(); err != nil {
			t.Errorf("pgtest: stopping the cluster: %v", err)
		}
	})
	return cl
}

// URL is the superuser's postgres:// URL (database postgres, on
// 127.0.0.1 and the cluster's port, which stays the same across
// [Cluster.Restart]).
func (cl *Cluster) URL() string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.c.url()
}

// Crash stops the server at once, as a crash would (pg_ctl stop -m
// immediate: every server process quits without a checkpoint; the next
// start recovers from the WAL).
func (cl *Cluster) Crash() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	out, err := cl.c.run("pg_ctl", "-D", cl.c.data, "-m", "immediate", "-w", "-t", strconv.Itoa(int(stopTimeout/time.Second)), "stop")
	if err != nil {
		return fmt.Errorf("pg_ctl stop -m immediate: %v\n%s", err, out)
	}
	deadline := time.Now().Add(stopTimeout)
	for alive(cl.c.pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("postmaster %d still running %v after the stop", cl.c.pid, stopTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cl.c.pid = 0
	return nil
}

// Restart starts the server again on the same port, after [Cluster.Crash]
// (crash recovery runs first; pg_ctl -w waits for it).
func (cl *Cluster) Restart() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	_, err := cl.c.startOn(cl.c.port)
	return err
}
