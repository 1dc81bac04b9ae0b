//go:build linux

package serve_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/internal/pgtest"
	"github.com/openplaybook/openplaybook/serve"
)

// TestReplicasAdoptAfterKill runs three `openplaybook serve` replicas
// on one PostgreSQL schema. The run is started through one of them; the
// replica that owns it (the runs table says which) is killed with
// SIGKILL inside a side-effecting call. A survivor adopts the run by
// itself (no resume is asked for), asks a person about exactly the call
// in flight, and, approved on another replica, runs it once more; killed
// again inside the next side-effecting call, the last replica adopts it,
// and a denial there means it never runs again. The crash server's count
// file, not the store, says what ran; audit --verify passes.
func TestReplicasAdoptAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs and kills processes; skipped with -short")
	}
	k0, src, count := newCrashServe(t, "{driver: transcript, transcript: %q}")
	p := k0.p
	url := pgtest.Schema(t)
	usePostgres(t, p.harness, url)
	db, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())

	reps := map[string]*killable{} // by base URL
	var bases []string
	for range 3 {
		k := &killable{t: t, p: p, pids: k0.pids}
		base := k.start()
		reps[base] = k
		bases = append(bases, base)
	}
	var created struct {
		Run string `json:"run"`
	}
	api(t, bases[1], "POST", "/api/v1/runs", fmt.Sprintf(`{"document": %s}`, src), 201, &created)
	run := created.Run

	// owner returns the base URL of the replica that owns the run and
	// its owner epoch.
	owner := func() (string, int64) {
		var addr string
		var epoch int64
		if err := db.QueryRow(context.Background(), `SELECT coalesce(p.address, ''), r.owner_epoch FROM runs r LEFT JOIN replicas p ON p.id = r.owner WHERE r.id = $1`, run).Scan(&addr, &epoch); err != nil {
			t.Fatal(err)
		}
		return addr, epoch
	}
	// killOwner kills the run's owner with SIGKILL, waits until the crash
	// servers it started are gone, and returns how long the survivors
	// took to adopt the run (the owner epoch moved on) and a survivor.
	killOwner := func() (time.Duration, string) {
		t.Helper()
		addr, epoch := owner()
		k := reps[addr]
		if k == nil {
			t.Fatalf("the run's owner %q is none of the replicas %v", addr, bases)
		}
		children := childrenOf(t, k.pids, k.cmd.Process.Pid)
		_ = k.cmd.Process.Kill()
		killed := time.Now()
		<-k.done
		delete(reps, addr)
		waitGone(t, children)
		deadline := killed.Add(30 * time.Second)
		for {
			a, e := owner()
			if e > epoch && a != addr {
				if reps[a] == nil {
					t.Fatalf("the run was adopted by %q, not a live replica", a)
				}
				return time.Since(killed), a
			}
			if time.Now().After(deadline) {
				t.Fatalf("30 s after the kill the run is still owned by %q at epoch %d", a, e)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	waitFile(t, count+".slow1.running")
	took, adopter := killOwner()
	t.Logf("adopted %s after the kill", took)
	apr := waitOutcomeUnknown(t, adopter, run)
	if n := lines(t, count); n["slow1"] != 1 {
		t.Fatalf("before anyone decided, slow1 ran %d times", n["slow1"])
	}
	// Approved on the other survivor: slow1 runs once more.
	other := adopter
	for b := range reps {
		if b != adopter {
			other = b
		}
	}
	if err := os.WriteFile(count+".slow1.release", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	api(t, other, "POST", "/api/v1/runs/"+run+"/decisions/"+apr, `{"approve": true, "reason": "it did not happen"}`, 200, nil)
	waitPending(t, other, run, "gate", "check")
	api(t, adopter, "POST", "/api/v1/runs/"+run+"/decisions/check", `{"approve": true}`, 200, nil)

	waitFile(t, count+".slow2.running")
	took, last := killOwner()
	t.Logf("adopted again %s after the kill", took)
	apr = waitOutcomeUnknown(t, last, run)
	if err := os.WriteFile(count+".slow2.release", nil, 0o644); err != nil {
		t.Fatal(err) // were it run again, it would answer and show
	}
	api(t, last, "POST", "/api/v1/runs/"+run+"/decisions/"+apr, `{"approve": false, "reason": "it happened"}`, 200, nil)
	waitStatus(t, last, run, "completed")
	reps[last].stop()

	want := map[string]int{"a1": 1, "slow1": 2, "a2": 1, "b1": 1, "slow2": 1, "b2": 1}
	if got := lines(t, count); !maps.Equal(got, want) {
		t.Fatalf("the crash server ran %v, want %v", got, want)
	}
	out, errs, code := p.cli("audit", "--verify", run)
	if code != 0 || !strings.Contains(out, "chain verifies") {
		t.Fatalf("audit --verify: exit %d\n%s%s", code, out, errs)
	}
}

// childrenOf returns the crash servers (their pids, from the pid
// directory) whose parent is pid.
func childrenOf(t *testing.T, pids string, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir(pids)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if f := strings.Fields(s[i+1:]); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

// waitGone waits (up to 10 s) until none of the crash servers runs.
func waitGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			s := string(b)
			if err != nil || !strings.Contains(s, "(crashserver)") || strings.Contains(s, ") Z ") || strings.Contains(s, ") X ") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("crash server %d still runs 10 s after its replica was killed", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// TestReplicasFenceStoppedOwner stops the run's owner (SIGSTOP) inside a
// side-effecting call; with a 1 s liveness the other replica adopts the
// run and asks a person about the call. The call's answer is then let
// through to the stopped owner and it is continued (SIGCONT): its
// writes are fenced, so it records nothing and starts no tool call (the
// crash server's count does not move), it rejoins under a new id, and
// the run goes on at the adopter to completion with every append run
// once; audit --verify passes.
func TestReplicasFenceStoppedOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs and stops processes; skipped with -short")
	}
	k0, src, count := newCrashServe(t, "{driver: transcript, transcript: %q}")
	p := k0.p
	url := pgtest.Schema(t)
	usePostgres(t, p.harness, url)
	p.env = append(p.env, "OPENPLAYBOOK_REPLICA_LIVENESS=1s")
	ctx := context.Background()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	a, b := &killable{t: t, p: p, pids: k0.pids}, &killable{t: t, p: p, pids: k0.pids}
	baseA := a.start()
	baseB := b.start()
	var created struct {
		Run string `json:"run"`
	}
	api(t, baseA, "POST", "/api/v1/runs", fmt.Sprintf(`{"document": %s}`, src), 201, &created)
	run := created.Run
	waitFile(t, count+".slow1.running")
	var ownerA string
	var epochA int64
	if err := db.QueryRow(ctx, `SELECT owner, owner_epoch FROM runs WHERE id = $1`, run).Scan(&ownerA, &epochA); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	apr := waitOutcomeUnknown(t, baseB, run)
	t.Logf("adopted and waiting for a decision %s after SIGSTOP", time.Since(stopped))
	var owner string
	var epoch int64
	if err := db.QueryRow(ctx, `SELECT owner, owner_epoch FROM runs WHERE id = $1`, run).Scan(&owner, &epoch); err != nil {
		t.Fatal(err)
	}
	if owner == ownerA || epoch <= epochA {
		t.Fatalf("after adoption the run is owned by %s at %d; want another owner than %s above %d", owner, epoch, ownerA, epochA)
	}
	seq, head := auditHead(t, db, run)
	// The stopped owner's call answers; the owner goes on.
	if err := os.WriteFile(count+".slow1.release", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the crash server writes its answer to the stopped owner's pipe
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// A rejoins under a new id: a second row whose address is A's.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM replicas WHERE address = $1 AND id <> $2`, baseA, ownerA).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the continued owner did not join again under a new id within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s2, h2 := auditHead(t, db, run); s2 != seq || h2 != head {
		t.Fatalf("the fenced owner moved the audit head from %d to %d", seq, s2)
	}
	if n := lines(t, count); !maps.Equal(n, map[string]int{"a1": 1, "slow1": 1}) {
		t.Fatalf("after the fenced owner went on the crash server ran %v, want a1 and slow1 once", n)
	}
	// The adopter goes on: slow1 is denied (it happened), slow2 runs.
	api(t, baseB, "POST", "/api/v1/runs/"+run+"/decisions/"+apr, `{"approve": false, "reason": "it happened"}`, 200, nil)
	waitPending(t, baseB, run, "gate", "check")
	api(t, baseA, "POST", "/api/v1/runs/"+run+"/decisions/check", `{"approve": true}`, 200, nil)
	waitFile(t, count+".slow2.running")
	if err := os.WriteFile(count+".slow2.release", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, baseB, run, "completed")
	a.stop()
	b.stop()
	want := map[string]int{"a1": 1, "slow1": 1, "a2": 1, "b1": 1, "slow2": 1, "b2": 1}
	if got := lines(t, count); !maps.Equal(got, want) {
		t.Fatalf("the crash server ran %v, want %v", got, want)
	}
	out, errs, code := p.cli("audit", "--verify", run)
	if code != 0 || !strings.Contains(out, "chain verifies") {
		t.Fatalf("audit --verify: exit %d\n%s%s", code, out, errs)
	}
}

// usePostgres points the crash harness's store (SQLite, or PostgreSQL
// under OPENPLAYBOOK_TEST_STORE=postgres) at url.
func usePostgres(t *testing.T, harness, url string) {
	t.Helper()
	h, err := os.ReadFile(harness)
	if err != nil {
		t.Fatal(err)
	}
	hs := storeSection.ReplaceAllLiteralString(string(h), "store:\n  postgres:\n    url: "+strconv.Quote(url)+"\n")
	if hs == string(h) {
		t.Fatal("the crash harness has no store section to replace")
	}
	if err := os.WriteFile(harness, []byte(hs), 0o600); err != nil {
		t.Fatal(err)
	}
}

var storeSection = regexp.MustCompile(`store:\n  (sqlite: .*\n|postgres:\n    url: .*\n)`)

func auditHead(t *testing.T, db *pgx.Conn, run string) (int64, string) {
	t.Helper()
	var seq int64
	var hash string
	if err := db.QueryRow(context.Background(), `SELECT audit_last_seq, audit_last_hash FROM runs WHERE id = $1`, run).Scan(&seq, &hash); err != nil {
		t.Fatal(err)
	}
	return seq, hash
}

// TestReplicasWakeUps: a watcher of a run's events on replica B (an SSE
// stream, which has no polling of its own) learns of a decision made on
// replica A through PostgreSQL's notifications, 20 times over; the
// latency is logged (p50, p99), bounded only generously. Then every
// listener's connection is ended: B reconnects and nudges its watchers
// (a status event with no decision), and a later decision still reaches
// it.
func TestReplicasWakeUps(t *testing.T) {
	_, _, baseA, baseB, src, url := twoReplicas(t)
	atGate := func() string {
		var created struct {
			Run string `json:"run"`
		}
		api(t, baseA, "POST", "/api/v1/runs", fmt.Sprintf(`{"document": %s}`, src), 201, &created)
		waitPending(t, baseA, created.Run, "gate", "check")
		return created.Run
	}
	var lat []time.Duration
	for range 20 {
		run := atGate()
		ev := openEvents(t, baseB, run)
		start := time.Now()
		api(t, baseA, "POST", "/api/v1/runs/"+run+"/decisions/check", `{"approve": true}`, 200, nil)
		ev.waitStatus(t, 10*time.Second)
		lat = append(lat, time.Since(start))
		ev.close()
	}
	slices.Sort(lat)
	t.Logf("decision on A to the status event on B: p50 %s, p99 %s, max %s (20 tries)", lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])

	run := atGate()
	ev := openEvents(t, baseB, run)
	db, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'openplaybook-listen'`).Scan(&n); err != nil || n < 2 {
		t.Fatalf("terminated %d listeners (%v), want both replicas'", n, err)
	}
	ev.waitStatus(t, 10*time.Second) // the nudge after B's listener reconnected
	ev.close()
	ev = openEvents(t, baseB, run)
	api(t, baseA, "POST", "/api/v1/runs/"+run+"/decisions/check", `{"approve": true}`, 200, nil)
	ev.waitStatus(t, 10*time.Second)
	ev.close()
	waitStatus(t, baseB, run, "completed")
}

// eventStream is an open /api/v1/runs/{run}/events stream.
type eventStream struct {
	body  io.ReadCloser
	lines chan string
}

// openEvents opens the run's event stream and reads its opening comment
// (the server has subscribed by then).
func openEvents(t *testing.T, base, run string) *eventStream {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/api/v1/runs/"+run+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		t.Fatalf("events: %d", resp.StatusCode)
	}
	es := &eventStream{body: resp.Body, lines: make(chan string, 64)}
	go func() {
		defer close(es.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			es.lines <- sc.Text()
		}
	}()
	select {
	case l := <-es.lines:
		if !strings.HasPrefix(l, ": openplaybook events") {
			t.Fatalf("the stream opens with %q", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the event stream did not open within 10 s")
	}
	return es
}

// waitStatus waits for a status event, failing after d.
func (es *eventStream) waitStatus(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case l, ok := <-es.lines:
			if !ok {
				t.Fatal("the event stream ended")
			}
			if l == "event: status" {
				return
			}
		case <-deadline:
			t.Fatalf("no status event within %s", d)
		}
	}
}

func (es *eventStream) close() { es.body.Close() }

// TestReplicasForwardToOwner: a run's event stream and its MCP endpoint
// asked of replica B while replica A owns the run are served by A (the
// answer names the replica that served it), streamed through B; once A
// is killed, B serves them itself.
func TestReplicasForwardToOwner(t *testing.T) {
	a, _, baseB, run, db := replicasAtGate(t)
	var idA, idB string
	if err := db.QueryRow(context.Background(), `SELECT owner FROM runs WHERE id = $1`, run).Scan(&idA); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(context.Background(), `SELECT id FROM replicas WHERE address = $1`, baseB).Scan(&idB); err != nil {
		t.Fatal(err)
	}
	servedBy := func(base, path string) (string, int) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get(serve.ReplicaHeader), resp.StatusCode
	}
	if by, code := servedBy(baseB, "/mcp/runs/"+run); by != idA || code != http.StatusUnauthorized {
		t.Errorf("MCP endpoint through B: served by %q with %d, want A (%s) with 401 (no token)", by, code, idA)
	}
	if by, _ := servedBy(baseB, "/api/v1/runs/"+run); by != idB {
		t.Errorf("the run's API through B: served by %q, want B itself (%s)", by, idB)
	}
	req, _ := http.NewRequest("GET", baseB+"/api/v1/runs/"+run+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if by := resp.Header.Get(serve.ReplicaHeader); by != idA || resp.StatusCode != 200 {
		t.Errorf("events through B: served by %q with %d, want A (%s) with 200", by, resp.StatusCode, idA)
	}
	resp.Body.Close()
	ev := openEvents(t, baseB, run)
	api(t, baseB, "POST", "/api/v1/runs/"+run+"/decisions/check", `{"approve": true}`, 200, nil)
	ev.waitStatus(t, 10*time.Second)
	ev.close()
	waitStatus(t, baseB, run, "completed")

	_ = a.cmd.Process.Kill()
	<-a.done
	if by, _ := servedBy(baseB, "/mcp/runs/"+run); by != idB {
		t.Errorf("MCP endpoint through B after A died: served by %q, want B (%s)", by, idB)
	}
}

// twoReplicas starts two replicas, A and B, of the crash harness (its
// slow tools released) on a fresh PostgreSQL schema and returns them,
// their base URLs, the crash playbook and the database URL. It skips
// with -short (it builds two programs).
func twoReplicas(t *testing.T) (a, b *killable, baseA, baseB string, src []byte, url string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds two programs; skipped with -short")
	}
	k0, src, count := newCrashServe(t, "{driver: transcript, transcript: %q}")
	url = pgtest.Schema(t)
	usePostgres(t, k0.p.harness, url)
	for _, f := range []string{".slow1.release", ".slow2.release"} {
		if err := os.WriteFile(count+f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, b = &killable{t: t, p: k0.p, pids: k0.pids}, &killable{t: t, p: k0.p, pids: k0.pids}
	return a, b, a.start(), b.start(), src, url
}

// replicasAtGate starts two replicas, A and B, of the crash harness on a
// fresh PostgreSQL schema and a run at A that waits at its gate check;
// it returns A, both base URLs, the run and a connection to the
// database. It skips with -short (it builds two programs).
func replicasAtGate(t *testing.T) (a *killable, baseA, baseB, run string, db *pgx.Conn) {
	t.Helper()
	a, _, baseA, baseB, src, url := twoReplicas(t)
	var created struct {
		Run string `json:"run"`
	}
	api(t, baseA, "POST", "/api/v1/runs", fmt.Sprintf(`{"document": %s}`, src), 201, &created)
	run = created.Run
	waitPending(t, baseA, run, "gate", "check")
	var err error
	db, err = pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return a, baseA, baseB, run, db
}

// TestReplicasConcurrentResumes: while replica A executes a run (inside
// a side-effecting call), eight concurrent resumes of it, four through A
// and four through B, all answer 409; none claims the run (its owner and
// epoch are unchanged) or starts a call (the crash server's count is
// unchanged), and the run then completes at A.
func TestReplicasConcurrentResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs; skipped with -short")
	}
	k0, src, count := newCrashServe(t, "{driver: transcript, transcript: %q}")
	p := k0.p
	url := pgtest.Schema(t)
	usePostgres(t, p.harness, url)
	a, b := &killable{t: t, p: p, pids: k0.pids}, &killable{t: t, p: p, pids: k0.pids}
	baseA, baseB := a.start(), b.start()
	var created struct {
		Run string `json:"run"`
	}
	api(t, baseA, "POST", "/api/v1/runs", fmt.Sprintf(`{"document": %s}`, src), 201, &created)
	run := created.Run
	waitFile(t, count+".slow1.running")
	db, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	ownerOf := func() (string, int64) {
		var o string
		var e int64
		if err := db.QueryRow(context.Background(), `SELECT owner, owner_epoch FROM runs WHERE id = $1`, run).Scan(&o, &e); err != nil {
			t.Fatal(err)
		}
		return o, e
	}
	owner, epoch := ownerOf()
	codes := make(chan int, 8)
	for i := range 8 {
		base := baseA
		if i%2 == 1 {
			base = baseB
		}
		go func() {
			req, _ := http.NewRequest("POST", base+"/api/v1/runs/"+run+"/resume", strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer "+operatorToken)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	for range 8 {
		if c := <-codes; c != http.StatusConflict {
			t.Errorf("a resume of the executing run answered %d, want 409", c)
		}
	}
	if o, e := ownerOf(); o != owner || e != epoch {
		t.Errorf("after the refused resumes the run is owned by %s at %d, want %s at %d", o, e, owner, epoch)
	}
	if n := lines(t, count); !maps.Equal(n, map[string]int{"a1": 1, "slow1": 1}) {
		t.Errorf("the crash server ran %v, want a1 and slow1 once", n)
	}
	for _, f := range []string{".slow1.release", ".slow2.release"} {
		if err := os.WriteFile(count+f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	waitPending(t, baseA, run, "gate", "check")
	api(t, baseA, "POST", "/api/v1/runs/"+run+"/decisions/check", `{"approve": true}`, 200, nil)
	waitStatus(t, baseA, run, "completed")
	want := map[string]int{"a1": 1, "slow1": 1, "a2": 1, "b1": 1, "slow2": 1, "b2": 1}
	if got := lines(t, count); !maps.Equal(got, want) {
		t.Fatalf("the crash server ran %v, want %v", got, want)
	}
}

// TestReplicasCancelThroughOther: a cancel asked of replica B while
// replica A executes the run (inside a side-effecting call) reaches A,
// which stops the execution and ends the run; no further call runs.
func TestReplicasCancelThroughOther(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs; skipped with -short")
	}
	k0, src, count := newCrashServe(t, "{driver: transcript, transcript: %q}")
	p := k0.p
	usePostgres(t, p.harness, pgtest.Schema(t))
	a, b := &killable{t: t, p: p, pids: k0.pids}, &killable{t: t, p: p, pids: k0.pids}
	baseA, baseB := a.start(), b.start()
	var created struct {
		Run string `json:"run"`
	}
	api(t, baseA, "POST", "/api/v1/runs", fmt.Sprintf(`{"document": %s}`, src), 201, &created)
	run := created.Run
	waitFile(t, count+".slow1.running")
	api(t, baseB, "POST", "/api/v1/runs/"+run+"/cancel", `{"by": "ops", "reason": "wrong customer"}`, 200, nil)
	waitStatus(t, baseB, run, "failed")
	if err := os.WriteFile(count+".slow1.release", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a.stop()
	b.stop()
	if n := lines(t, count); !maps.Equal(n, map[string]int{"a1": 1, "slow1": 1}) {
		t.Errorf("the crash server ran %v, want a1 and slow1 once", n)
	}
	out, errs, code := p.cli("audit", "--verify", run)
	if code != 0 || !strings.Contains(out, "chain verifies") {
		t.Fatalf("audit --verify: exit %d\n%s%s", code, out, errs)
	}
}

// TestReplicasShareConsoleLogins: a console login on replica A is valid
// on replica B (the store keeps it, not A's memory), its CSRF token is
// accepted there, and a logout on B ends it on A too.
func TestReplicasShareConsoleLogins(t *testing.T) {
	_, _, baseA, baseB, _, _ := twoReplicas(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := func(base, path string, cookie *http.Cookie, vals url.Values) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(vals.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := form(baseA, "/login", nil, url.Values{"token": {operatorToken}})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == serve.SessionCookie && c.Value != "" {
			cookie = c
		}
	}
	m := regexp.MustCompile(`data-csrf="([^"]+)"`).FindSubmatch(body)
	if resp.StatusCode != 200 || cookie == nil || m == nil {
		t.Fatalf("login on A: %d, cookie %v\n%s", resp.StatusCode, cookie, body)
	}
	csrf := string(m[1])
	page := func(base string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/", nil)
		req.AddCookie(cookie)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if a, b := page(baseA), page(baseB); a != 200 || b != 200 {
		t.Fatalf("the runs page with A's login: A %d, B %d; want 200 on both", a, b)
	}
	// A state-changing form on B with the login's CSRF token is taken.
	if resp := form(baseB, "/runs/run_0000000000000000/cancel", cookie, url.Values{"csrf": {"wrong"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a form on B with a wrong CSRF token: %d, want 403", resp.StatusCode)
	}
	resp = form(baseB, "/logout", cookie, url.Values{"csrf": {csrf}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout on B: %d, want 303", resp.StatusCode)
	}
	if a, b := page(baseA), page(baseB); a != http.StatusSeeOther || b != http.StatusSeeOther {
		t.Errorf("the runs page after the logout on B: A %d, B %d; want 303 (to the login form) on both", a, b)
	}
}

// mcpReplicas is two replicas, A and B, of the crash harness with its
// agent bound to driver mcp (its first slow call released), on a fresh
// PostgreSQL schema.
type mcpReplicas struct {
	k0           *killable
	a, b         *killable
	baseA, baseB string
	idA, idB     string // their replica ids
	src          []byte // the crash playbook
	count        string // the crash server's count file
	db           *pgx.Conn
}

// replicaAt is the id of the replica at base.
func (m *mcpReplicas) replicaAt(base string) string {
	m.a.t.Helper()
	var id string
	if err := m.db.QueryRow(context.Background(), `SELECT id FROM replicas WHERE address = $1`, base).Scan(&id); err != nil {
		m.a.t.Fatal(err)
	}
	return id
}

// waitRecorded waits until run's audit log, asked of base, has a record
// of kind.
func waitRecorded(t *testing.T, base, run, kind string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		var au struct {
			Records []struct {
				Kind string `json:"kind"`
			} `json:"records"`
		}
		api(t, base, "GET", "/api/v1/runs/"+run+"/audit", "", 200, &au)
		for _, r := range au.Records {
			if r.Kind == kind {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s has no %s record", run, kind)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startRun starts a run of the crash playbook through the replica at
// base, waits until it waits for its agent and returns it with an agent
// token of it.
func (m *mcpReplicas) startRun(base string) (run, token string) {
	t := m.a.t
	t.Helper()
	var created struct {
		Run string `json:"run"`
	}
	api(t, base, "POST", "/api/v1/runs", fmt.Sprintf(`{"document": %s}`, m.src), 201, &created)
	run = created.Run
	waitPending(t, base, run, "agent", run)
	var tok struct {
		Token string `json:"token"`
	}
	api(t, base, "POST", "/api/v1/runs/"+run+"/agent-token", `{}`, 201, &tok)
	return run, tok.Token
}

// newMCPReplicas starts an [mcpReplicas]; the caller skips with -short.
func newMCPReplicas(t *testing.T) *mcpReplicas {
	t.Helper()
	k0, src, count := newCrashServe(t, "{driver: mcp}")
	url := pgtest.Schema(t)
	usePostgres(t, k0.p.harness, url)
	if err := os.WriteFile(count+".slow1.release", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m := &mcpReplicas{k0: k0, src: src, count: count,
		a: &killable{t: t, p: k0.p, pids: k0.pids}, b: &killable{t: t, p: k0.p, pids: k0.pids}}
	m.baseA, m.baseB = m.a.start(), m.b.start()
	db, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	m.db = db
	m.idA, m.idB = m.replicaAt(m.baseA), m.replicaAt(m.baseB)
	return m
}

// TestReplicasStaleMCPSession: an agent's MCP session opened through
// replica B carries B's id; after B is killed and A takes the run, a
// request of that session is answered 404 at once, and the agent that
// initializes again through A goes on there (the call it made at B ran
// once, the next runs once). While A
// executes the run, B answers a session of a replica that is not the
// owner 404 itself, without forwarding it.
func TestReplicasStaleMCPSession(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs; skipped with -short")
	}
	m := newMCPReplicas(t)
	k0, count, db, replicaAt := m.k0, m.count, m.db, m.replicaAt
	b, baseA, baseB, idA, idB := m.b, m.baseA, m.baseB, m.idA, m.idB

	run, tok := m.startRun(baseB)
	cs := connectAgent(t, baseB, run, tok)
	if !strings.HasPrefix(cs.ID(), idB+".") {
		t.Fatalf("the MCP session id %q does not carry replica B's id %s", cs.ID(), idB)
	}
	if text, isErr := callTool(t, cs, "mcp__crash__append", map[string]any{"id": "a1"}); isErr {
		t.Fatalf("append a1: %s", text)
	}
	stale := cs.ID()
	// a1's outcome is recorded (its answer may reach the agent before
	// the commit; killed before it, a1 would wait for a person at A).
	waitRecorded(t, baseB, run, "call.succeeded")
	_ = b.cmd.Process.Kill()
	<-b.done

	post := func(base, sid string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/mcp/runs/"+run, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("a stale session was answered after %v", d)
		}
		return resp.StatusCode, resp.Header.Get(serve.ReplicaHeader)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, _ := post(baseA, stale)
		if code == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B's session at A after B died: %d, want 404", code)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cs = connectAgent(t, baseA, run, tok)
	defer cs.Close()
	if !strings.HasPrefix(cs.ID(), idA+".") {
		t.Errorf("the new session id %q does not carry replica A's id %s", cs.ID(), idA)
	}
	waitOffered(t, cs, "mcp__crash__append")
	// B again (a new process, a new id): A executes the run now, so a
	// session B's old id opened is stale there too, answered by B.
	b2 := &killable{t: t, p: k0.p, pids: k0.pids}
	baseB2 := b2.start()
	var owner string
	if err := db.QueryRow(context.Background(), `SELECT owner FROM runs WHERE id = $1`, run).Scan(&owner); err != nil || owner != idA {
		t.Fatalf("the run's owner is %q (%v), want A (%s)", owner, err, idA)
	}
	if code, by := post(baseB2, stale); code != http.StatusNotFound || by != replicaAt(baseB2) {
		t.Errorf("a stale session through the new B: %d served by %q, want 404 from B itself (%s)", code, by, replicaAt(baseB2))
	}
	if text, isErr := callTool(t, cs, "mcp__crash__append", map[string]any{"id": "a2"}); isErr {
		t.Fatalf("append a2: %s", text)
	}
	if got := lines(t, count); got["a1"] != 1 || got["a2"] != 1 {
		t.Errorf("the crash server ran %v, want a1 and a2 once each", got)
	}
}
