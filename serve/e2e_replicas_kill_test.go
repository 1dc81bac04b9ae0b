//go:build linux

package serve_test

import (
	"context"
	encjson "encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/internal/pgtest"
)

// killSteps are the agent steps of the kill playbook; each replays a
// read and then two appends.
var killSteps = []string{"one", "two", "three"}

// TestReplicasKillMidWork runs five rounds, each on a fresh PostgreSQL
// schema with three `openplaybook serve` replicas: 30 runs are started
// through them in turn, each of a playbook of its own whose three agent
// steps (transcripts) read and then append twice on the crash server,
// every append with an id of its own (appends take 100 ms in odd rounds,
// so that kills land inside them, and 15 ms in even rounds, so that they
// land between calls too). At a random moment (the seed is
// logged; OPENPLAYBOOK_KILL_SEED replays it) one replica, picked at
// random, is stopped (SIGSTOP: from then on it does nothing, as if
// dead), the crash servers are left 100 ms to read what it sent them,
// and it is killed with SIGKILL.
//
// What the dead replica had in flight comes from the crash servers' call
// log (CALL_LOG), not from the store: a run whose last call before the
// stop had not been answered was waiting on exactly that call, so it must
// wait for exactly one outcome-unknown decision if the call is an append
// and for none if it is a read. A run whose last call had been answered
// stood between two calls: the append answered may or may not have had
// its outcome recorded, and the next append may or may not have been
// recorded as started without reaching the server, so it may wait for one
// decision on either of those, or for none. Every other run must complete
// without a person.
//
// The survivors must adopt every run the dead replica was executing
// within 5 s of the kill. Half the outcome-unknown decisions (in random
// order) are approved and half denied: the crash server's count file then
// says each approved append ran once more than before the decision, each
// denied one not again, and every other append exactly once. audit
// --verify passes on every run.
func TestReplicasKillMidWork(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs and kills processes; skipped with -short")
	}
	const runs, rounds = 30, 5
	transcripts := t.TempDir()
	k0, src, count := newCrashServeWith(t, fmt.Sprintf("{driver: transcript, transcript: %q}", filepath.Join(transcripts, "{playbook}.json")), "", "100ms")
	p := k0.p
	calls := filepath.Join(filepath.Dir(count), "calls.log")
	h, err := os.ReadFile(p.harness)
	if err != nil {
		t.Fatal(err)
	}
	hs := strings.Replace(string(h), "APPEND_DELAY: 100ms}", fmt.Sprintf("APPEND_DELAY: 100ms, CALL_LOG: %q}", calls), 1)
	if hs == string(h) {
		t.Fatal("the crash harness has no APPEND_DELAY to add CALL_LOG beside")
	}
	if err := os.WriteFile(p.harness, []byte(hs), 0o600); err != nil {
		t.Fatal(err)
	}
	docs, order := killPlaybooks(t, src, transcripts, runs)

	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("OPENPLAYBOOK_KILL_SEED"); v != "" {
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("OPENPLAYBOOK_KILL_SEED: %v", err)
		}
	}
	t.Logf("seed %d (OPENPLAYBOOK_KILL_SEED=%d replays these victims, kill times and decisions)", seed, seed)
	// Two streams, so that the kill points do not depend on how many
	// decisions earlier rounds shuffled.
	rng, decide := rand.New(rand.NewPCG(seed, 0)), rand.New(rand.NewPCG(seed, 1))

	var approved, denied, adopted int
	var slowest time.Duration
	for round := range rounds {
		url := pgtest.Schema(t)
		usePostgres(t, p.harness, url)
		// Slow appends in odd rounds, so that kills land inside them;
		// quick ones in even rounds, so that they land between calls.
		delay := []time.Duration{100 * time.Millisecond, 15 * time.Millisecond}[round%2]
		setAppendDelay(t, p.harness, delay)
		for _, f := range []string{count, calls} {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
		db, err := pgx.Connect(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		reps := make([]*killable, 3)
		bases, ids := make([]string, 3), make([]string, 3)
		for i := range reps {
			reps[i] = &killable{t: t, p: p, pids: k0.pids}
			bases[i] = reps[i].start()
			if err := db.QueryRow(context.Background(), `SELECT id FROM replicas WHERE address = $1`, bases[i]).Scan(&ids[i]); err != nil {
				t.Fatal(err)
			}
		}
		// The runs are started at once, in turn through each replica.
		run, failed := make([]string, runs), make([]string, runs)
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() {
				var created struct {
					Run string `json:"run"`
				}
				failed[i] = postJSON(context.Background(), http.DefaultClient, bases[i%3]+"/api/v1/runs", []byte(`{"document": `+docs[i]+`}`), 201, &created)
				run[i] = created.Run
			})
		}
		wg.Wait()
		for i, f := range failed {
			if f != "" {
				t.Fatalf("round %d: starting run %d: %s", round+1, i, f)
			}
		}

		victim := rng.IntN(3)
		after := time.Duration(rng.Int64N(int64(6*delay + 200*time.Millisecond)))
		time.Sleep(after)
		v := reps[victim]
		pid := v.cmd.Process.Pid
		if err := v.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		waitStopped(t, pid)
		appendLine(t, calls, "stop")
		time.Sleep(100 * time.Millisecond) // the crash servers read what was sent them
		epochs := map[string]int64{}       // the runs the victim was executing
		rows, err := db.Query(context.Background(), `SELECT id, owner_epoch FROM runs WHERE owner = $1 AND status = 'running'`, ids[victim])
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			var e int64
			if err := rows.Scan(&id, &e); err != nil {
				t.Fatal(err)
			}
			epochs[id] = e
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		children := childrenOf(t, k0.pids, pid)
		_ = v.cmd.Process.Kill()
		killed := time.Now()
		<-v.done
		executing := len(epochs)
		took := waitAdopted(t, db, epochs, ids, victim, killed)
		adopted += len(epochs)
		slowest = max(slowest, took)
		waitGone(t, children)
		before := lines(t, count) // what ran before anyone decided

		// What each run may wait for, from the call log.
		expect := inFlight(t, calls, pid, order)
		var survivors []string
		for i, b := range bases {
			if i != victim {
				survivors = append(survivors, b)
			}
		}
		type decision struct{ run, id, call string }
		var asked []decision
		exact, between := 0, 0
		for i, r := range run {
			_, mine := epochs[r] // the killed replica executed it
			rs := waitSettled(t, db, survivors[i%2], r, fmt.Sprintf("round %d, run %d (the killed replica executed it: %v)", round+1, i, mine))
			var got []string
			for _, w := range rs.Waiting {
				var a struct {
					ID string `json:"id"`
				}
				if w.Kind != "outcome_unknown" || w.Tool != "mcp.crash.append" || encjson.Unmarshal(w.Arguments, &a) != nil {
					t.Fatalf("round %d: run %d (%s) waits for %s %s on %s %s; want only outcome-unknown appends", round+1, i, r, w.Kind, w.ID, w.Tool, w.Arguments)
				}
				got = append(got, a.ID)
				asked = append(asked, decision{r, w.ID, a.ID})
			}
			if rs.Status != "completed" && rs.Status != "waiting" {
				t.Fatalf("round %d: run %d (%s) ended %s: %s", round+1, i, r, rs.Status, rs.Reason)
			}
			e := expect[i]
			switch {
			case !mine:
				// Not executed by the dead replica when it stopped.
				if len(got) > 0 {
					t.Fatalf("round %d: run %d (%s), which the killed replica was not executing, waits for decisions on %v", round+1, i, r, got)
				}
			case e.exact:
				exact++
				if want := e.may; !slices.Equal(got, want) {
					t.Fatalf("round %d: run %d (%s) waits for outcome-unknown decisions on %v; the killed replica had %v in flight", round+1, i, r, got, want)
				}
			default:
				between++
				if len(got) > 1 || len(got) == 1 && !slices.Contains(e.may, got[0]) {
					t.Fatalf("round %d: run %d (%s), stopped between calls, waits for decisions on %v; want none or one of %v", round+1, i, r, got, e.may)
				}
			}
		}

		// Approve half of them, in random order, deny the rest, each on a
		// survivor.
		slices.SortFunc(asked, func(a, b decision) int { return strings.Compare(a.call, b.call) })
		decide.Shuffle(len(asked), func(i, j int) { asked[i], asked[j] = asked[j], asked[i] })
		yes := len(asked) / 2
		if len(asked)%2 == 1 && round%2 == 0 {
			yes++
		}
		again := map[string]bool{}
		for n, d := range asked {
			again[d.call] = n < yes
			api(t, survivors[n%2], "POST", "/api/v1/runs/"+d.run+"/decisions/"+d.id, fmt.Sprintf(`{"approve": %v}`, n < yes), 200, nil)
		}
		approved += yes
		denied += len(asked) - yes
		for i, r := range run {
			waitStatus(t, survivors[i%2], r, "completed")
		}
		for i := range reps {
			if i != victim {
				reps[i].stop()
			}
		}
		_ = db.Close(context.Background())

		want := map[string]int{}
		for i := range runs {
			for _, c := range order[i] {
				if !strings.HasPrefix(c, "read:") {
					want[c] = 1
				}
			}
		}
		for c, yes := range again {
			if before[c] > 1 {
				t.Fatalf("round %d: before anyone decided, the in-flight append %s ran %d times", round+1, c, before[c])
			}
			want[c] = before[c]
			if yes {
				want[c]++
			}
			if want[c] == 0 {
				delete(want, c)
			}
		}
		if got := lines(t, count); !maps.Equal(got, want) {
			for c, n := range got {
				if want[c] != n {
					t.Errorf("round %d: append %s ran %d times, want %d (approved again: %v)", round+1, c, n, want[c], again[c])
				}
			}
			for c, n := range want {
				if got[c] == 0 {
					t.Errorf("round %d: append %s never ran, want %d", round+1, c, n)
				}
			}
			t.FailNow()
		}
		for i, r := range run {
			if out, errs, code := p.cli("audit", "--verify", r); code != 0 || !strings.Contains(out, "chain verifies") {
				t.Fatalf("round %d: audit --verify of run %d (%s): exit %d\n%s%s", round+1, i, r, code, out, errs)
			}
		}
		t.Logf("round %d: appends of %s; replica %d stopped and killed %s after the last start, executing %d runs (%d inside a call, %d between calls), %d adopted within %s of the kill; %d outcome-unknown decisions, %d approved",
			round+1, delay, victim, after.Round(time.Millisecond), executing, exact, between, len(epochs), took.Round(time.Millisecond), len(asked), yes)
	}
	t.Logf("%d runs adopted in %d rounds, the slowest round's within %s; %d outcome-unknown decisions approved, %d denied", adopted, rounds, slowest.Round(time.Millisecond), approved, denied)
	if approved == 0 || denied == 0 {
		t.Errorf("the kills left %d approved and %d denied outcome-unknown decisions: some round must land inside appends", approved, denied)
	}
}

// killPlaybooks writes, for each of n runs, a playbook (the pinned crash
// document src with manifest id kill-NN and the agent steps killSteps)
// and its transcript in dir (kill-NN.json): in each step a read tagged
// "kNN.<step>.r" and appends with ids "kNN.<step>.w1" and "kNN.<step>.w2".
// It returns the documents and each run's calls in order, as the crash
// server's call log names them ("read:" and the tag, or the append's id).
func killPlaybooks(t *testing.T, src []byte, dir string, n int) ([]string, [][]string) {
	t.Helper()
	var doc map[string]any
	if err := encjson.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	var steps []any
	for i, s := range killSteps {
		st := map[string]any{"id": s, "kind": "agent", "agent": "crasher", "purpose": "Read the count, then append two lines.",
			"allowedTools": []string{"mcp.crash.read", "mcp.crash.append"}}
		if i+1 < len(killSteps) {
			st["next"] = killSteps[i+1]
		}
		steps = append(steps, st)
	}
	doc["steps"] = steps
	manifest, _ := doc["manifest"].(map[string]any)
	if manifest == nil {
		t.Fatal("the crash document has no manifest")
	}
	docs, order := make([]string, n), make([][]string, n)
	for i := range n {
		id := fmt.Sprintf("kill-%02d", i)
		manifest["id"] = id
		b, err := encjson.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = string(b)
		ts := map[string]any{}
		for _, s := range killSteps {
			key := fmt.Sprintf("k%02d.%s.", i, s)
			ts[s] = []any{
				map[string]any{"tool": "mcp.crash.read", "arguments": map[string]string{"tag": key + "r"}},
				map[string]any{"tool": "mcp.crash.append", "arguments": map[string]string{"id": key + "w1"}},
				map[string]any{"tool": "mcp.crash.append", "arguments": map[string]string{"id": key + "w2"}},
			}
			order[i] = append(order[i], "read:"+key+"r", key+"w1", key+"w2")
		}
		b, err = encjson.Marshal(map[string]any{"steps": ts})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, id+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return docs, order
}

// waitStopped waits (up to 10 s) until every thread of pid is stopped.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatal(err)
		}
		stopped := true
		for _, task := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
			if err != nil {
				continue // the thread ended
			}
			s := string(b)
			if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) == 0 || f[0] != "T" && f[0] != "t" {
				stopped = false
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not stop within 10 s of SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitSettled waits (up to 30 s) until the run, read through base, has
// completed, ended otherwise, or waits for a person. Otherwise it fails,
// naming the run as what says, with its owner and its audit records.
func waitSettled(t *testing.T, db *pgx.Conn, base, run, what string) crashRunStatus {
	t.Helper()
	var rs crashRunStatus
	for deadline := time.Now().Add(30 * time.Second); ; {
		api(t, base, "GET", "/api/v1/runs/"+run, "", 200, &rs)
		if rs.Status != "running" && (rs.Status != "waiting" || len(rs.Waiting) > 0) {
			return rs
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var owner, address string
	var epoch int64
	if err := db.QueryRow(context.Background(), `SELECT coalesce(r.owner, ''), r.owner_epoch, coalesce(p.address, '') FROM runs r LEFT JOIN replicas p ON p.id = r.owner WHERE r.id = $1`, run).Scan(&owner, &epoch, &address); err != nil {
		t.Fatal(err)
	}
	var au struct {
		Records []encjson.RawMessage `json:"records"`
	}
	api(t, base, "GET", "/api/v1/runs/"+run+"/audit", "", 200, &au)
	var recs []string
	for _, r := range au.Records {
		recs = append(recs, string(r))
	}
	t.Fatalf("%s: after 30 s run %s is %s (%s), waiting for %+v; owned by %q (%s) at epoch %d; its audit records:\n%s", what, run, rs.Status, rs.Reason, rs.Waiting, owner, address, epoch, strings.Join(recs, "\n"))
	return rs
}

// setAppendDelay sets the crash server's APPEND_DELAY in the harness
// (half of it before an append's line is written, half after).
func setAppendDelay(t *testing.T, harness string, d time.Duration) {
	t.Helper()
	h, err := os.ReadFile(harness)
	if err != nil {
		t.Fatal(err)
	}
	hs := appendDelay.ReplaceAllLiteralString(string(h), "APPEND_DELAY: "+d.String())
	if hs == string(h) && !strings.Contains(hs, "APPEND_DELAY: "+d.String()) {
		t.Fatal("the crash harness has no APPEND_DELAY")
	}
	if err := os.WriteFile(harness, []byte(hs), 0o600); err != nil {
		t.Fatal(err)
	}
}

var appendDelay = regexp.MustCompile(`APPEND_DELAY: [0-9a-z.]+`)

// appendLine appends line to the file name in one write.
func appendLine(t *testing.T, name, line string) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// waitAdopted waits until every run of epochs (run id to its owner epoch
// when its owner, replica victim, died at killed) is owned by another
// replica of ids at a higher epoch, and returns how long after killed
// that was. It fails when that takes more than 5 s. A run the dead
// replica ended after all (its commit was on its way) is taken out of
// epochs.
func waitAdopted(t *testing.T, db *pgx.Conn, epochs map[string]int64, ids []string, victim int, killed time.Time) time.Duration {
	t.Helper()
	left := maps.Clone(epochs)
	for len(left) > 0 {
		rows, err := db.Query(context.Background(), `SELECT id, coalesce(owner, ''), owner_epoch, status FROM runs WHERE id = ANY($1)`, slices.Collect(maps.Keys(left)))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, owner, status string
			var e int64
			if err := rows.Scan(&id, &owner, &e, &status); err != nil {
				t.Fatal(err)
			}
			if e == left[id] && owner == ids[victim] && status != "running" {
				// The dead replica's last commit, which reached the
				// database after it was stopped, ended the run.
				delete(left, id)
				delete(epochs, id)
				continue
			}
			if e > left[id] && owner != ids[victim] {
				if !slices.Contains(ids, owner) {
					t.Fatalf("run %s was adopted by %q, none of the replicas %v", id, owner, ids)
				}
				delete(left, id)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			break
		}
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("5 s after the kill %d of the killed replica's %d runs are not adopted: %v", len(left), len(epochs), slices.Collect(maps.Keys(left)))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(killed)
}

// callState is what the crash servers' call log says a run's calls were
// when its replica stopped: exact when the run was inside a call (or had
// made none), may then being the append in flight (or nothing); when it
// stood between two calls, may is the appends one of which it may wait
// for a decision on.
type callState struct {
	exact bool
	may   []string
}

// inFlight reads the call log and returns, by run index (order's), the
// call state of each run whose calls the crash servers started by pid
// made; a run they made none for is exact with nothing in flight. The
// log's "stop" line says when pid was stopped: an answer after it never
// reached the replica.
func inFlight(t *testing.T, log string, pid int, order [][]string) map[int]callState {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	where := map[string][2]int{} // call key to run index and position
	for i, cs := range order {
		for j, c := range cs {
			where[c] = [2]int{i, j}
		}
	}
	last := map[int]int{} // run index to the last call started
	answered := map[int]bool{}
	stopped := false
	for _, l := range strings.Split(string(b), "\n") {
		if l == "stop" {
			stopped = true
			continue
		}
		f := strings.Fields(l)
		if len(f) != 3 || f[2] != strconv.Itoa(pid) {
			continue
		}
		w, ok := where[f[1]]
		if !ok {
			t.Fatalf("the call log names a call %q no transcript makes", f[1])
		}
		i, j := w[0], w[1]
		switch f[0] {
		case "start":
			if prev, ok := last[i]; ok && j <= prev {
				t.Fatalf("run %d started %s after %s: the killed replica ran a call twice or out of order", i, f[1], order[i][prev])
			}
			last[i], answered[i] = j, false
		case "answer":
			if last[i] == j && !stopped {
				answered[i] = true
			}
		}
	}
	isAppend := func(c string) bool { return !strings.HasPrefix(c, "read:") }
	out := map[int]callState{}
	for i := range order {
		j, ok := last[i]
		switch {
		case !ok:
			out[i] = callState{exact: true}
		case !answered[i]:
			var may []string
			if isAppend(order[i][j]) {
				may = []string{order[i][j]}
			}
			out[i] = callState{exact: true, may: may}
		default:
			var may []string
			if isAppend(order[i][j]) {
				may = append(may, order[i][j])
			}
			if j+1 < len(order[i]) && isAppend(order[i][j+1]) {
				may = append(may, order[i][j+1])
			}
			out[i] = callState{may: may}
		}
	}
	return out
}
