package postgres_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/internal/pgtest"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/postgres"
)

// crashEnv hands the child process its store's URL; crashModeEnv says
// whether store errors are expected (the server is crashed under it).
const (
	crashEnv     = "OPENPLAYBOOK_PG_CRASH_URL"
	crashModeEnv = "OPENPLAYBOOK_PG_CRASH_MODE"
)

const crashWorkers = 4

func crashRun(w int) string { return fmt.Sprintf("run_crash%07d", w) }

// TestHelperProcess is the child of the crash tests: it opens the store
// at $OPENPLAYBOOK_PG_CRASH_URL, resumes its runs (every call left
// started becomes outcome_unknown, as the runtime's resume does) and
// records audited calls from several goroutines until it is killed,
// printing "ack RUN SEQ HASH" for each acknowledged transaction. With
// the mode "server", a store error ends it quietly (exit 4): the server
// was crashed under it.
func TestHelperProcess(t *testing.T) {
	url := os.Getenv(crashEnv)
	if url == "" {
		t.Skip("the child process of the crash tests")
	}
	serverMode := os.Getenv(crashModeEnv) == "server"
	s, err := postgres.Open(bg, url, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	var mu sync.Mutex
	ack := func(r audit.Record) {
		line := fmt.Sprintf("ack %s %d %s\n", r.Run, r.Seq, r.Hash)
		mu.Lock()
		os.Stdout.WriteString(line)
		mu.Unlock()
	}
	fail := func(err error) {
		if serverMode {
			os.Exit(4)
		}
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	var wg sync.WaitGroup
	for w := range crashWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := crashRun(w)
			attempt, err := resumeCrashRun(s, run, ack)
			if err != nil {
				fail(err)
			}
			deadline := time.Now().Add(60 * time.Second)
			for i := 0; time.Now().Before(deadline); i++ {
				args := fmt.Sprintf(`{"i":%d}`, i)
				var last audit.Record
				if i%2 == 0 {
					err = s.Tx(bg, func(tx store.Tx) error {
						last, err = auditedCall(tx, run, "work", attempt, "note.add", args)
						return err
					})
					if err != nil {
						fail(err)
					}
					ack(last)
					continue
				}
				// Started, acknowledged, then finished: a kill in between
				// leaves a started call for the next resume.
				var c store.Call
				err = s.Tx(bg, func(tx store.Tx) error {
					if c, err = startCall(tx, run, "work", attempt, "stripe.refund", args); err != nil {
						return err
					}
					last, err = tx.Append(audit.Record{Run: run, Kind: "call.executing", Step: "work", Tool: c.Tool, Data: callData(c.CallKey)})
					return err
				})
				if err != nil {
					fail(err)
				}
				ack(last)
				err = s.Tx(bg, func(tx store.Tx) error {
					last, err = finishCall(tx, c)
					return err
				})
				if err != nil {
					fail(err)
				}
				ack(last)
			}
		}()
	}
	wg.Wait()
	s.Close()
	os.Exit(0)
}

func callData(k store.CallKey) jsontext.Value {
	return jsontext.Value(fmt.Sprintf(`{"attempt":%d,"index":%d}`, k.Attempt, k.Index))
}

// resumeCrashRun creates the run on the first start; later it marks every
// call a kill left started as outcome_unknown.
func resumeCrashRun(s store.Store, run string, ack func(audit.Record)) (attempt int, err error) {
	started, err := s.Calls(bg, run, store.CallFilter{States: []store.CallState{store.CallStarted}})
	if err != nil {
		return 0, err
	}
	steps, err := s.Steps(bg, run)
	if err != nil {
		return 0, err
	}
	for _, st := range steps {
		attempt = max(attempt, st.Attempt)
	}
	err = s.Tx(bg, func(tx store.Tx) error {
		_, err := tx.Run(run)
		if errors.Is(err, store.ErrNotFound) {
			if _, err := tx.CreateRun(store.Run{ID: run, PlaybookID: "crash", PlaybookVersion: "1.0.0", Document: []byte(testDoc)}); err != nil {
				return err
			}
			if _, err := tx.Append(audit.Record{Run: run, Kind: "run.started"}); err != nil {
				return err
			}
			attempt, err = tx.StartStep(run, "work")
			return err
		}
		if err != nil {
			return err
		}
		for _, c := range started {
			if _, err := tx.MarkOutcomeUnknown(c.CallKey, "resumed after kill"); err != nil {
				return err
			}
			if _, err := tx.Append(audit.Record{Run: run, Kind: "call.outcome_unknown", Step: c.Step, Tool: c.Tool, Data: callData(c.CallKey)}); err != nil {
				return err
			}
		}
		return nil
	})
	return attempt, err
}

type ackLine struct {
	run  string
	seq  int64
	hash string
}

// TestKillDurability kills a process that records audited calls from
// several goroutines at random moments with SIGKILL, and checks after
// each kill that every acknowledged record is there, every chain
// verifies, every call has exactly the audit records its state implies
// (nothing half-written), and the calls a kill left started become
// outcome_unknown with their pending decision on the next start.
func TestKillDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	url := pgtest.Schema(t)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var acks []ackLine
	for round := range 6 {
		var delay time.Duration
		minAcks := 0
		if round%2 == 0 {
			delay = time.Duration(rng.IntN(400)) * time.Millisecond
		} else {
			minAcks = 1 + rng.IntN(400)
			delay = time.Duration(rng.IntN(50)) * time.Millisecond
		}
		got, stderr := killChild(t, url, "", delay, minAcks, func(cmd *exec.Cmd) error { return cmd.Process.Signal(syscall.SIGKILL) })
		acks = append(acks, got...)
		t.Logf("round %d: killed after %d acknowledgements (%v after %d)", round, len(got), delay, minAcks)
		if stderr != "" {
			t.Fatalf("child stderr: %s", stderr)
		}
		checkCrashStore(t, url, acks)
	}
	if len(acks) == 0 {
		t.Fatal("no transaction was ever acknowledged")
	}
	logStates(t, url)
}

// TestServerCrashDurability crashes the database server instead (pg_ctl
// stop -m immediate, on a durable cluster of the test's own) while a child
// records audited calls, restarts it, and checks what TestKillDurability
// checks: nothing acknowledged is lost, nothing half-written remains.
func TestServerCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and crashes servers")
	}
	cl := pgtest.NewCluster(t, pgtest.ClusterOptions{Durable: true})
	url := cl.URL()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	var acks []ackLine
	for round := range 3 {
		minAcks := 1 + rng.IntN(200)
		delay := time.Duration(rng.IntN(100)) * time.Millisecond
		got, _ := killChild(t, url, "server", delay, minAcks, func(cmd *exec.Cmd) error {
			err := cl.Crash()
			cmd.Process.Signal(syscall.SIGKILL)
			return err
		})
		acks = append(acks, got...)
		t.Logf("round %d: server crashed after %d acknowledgements (%v after %d)", round, len(got), delay, minAcks)
		if err := cl.Restart(); err != nil {
			t.Fatal(err)
		}
		checkCrashStore(t, url, acks)
	}
	logStates(t, url)
}

// TestTerminateWriters ends the server sessions of transactions at random
// moments (pg_terminate_backend, as an administrator or a failover would)
// while 8 goroutines record audited calls: a Tx whose session was ended
// returns an error, every Tx that returned nil is there, nothing
// half-written remains, and the store goes on on new connections.
func TestTerminateWriters(t *testing.T) {
	url := pgtest.Schema(t)
	s := openURL(t, url, nil)
	admin, err := pgx.Connect(bg, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	const writers = 8
	runs := make([]string, writers)
	attempts := make([]int, writers)
	for i := range runs {
		runs[i], attempts[i] = newRun(t, s)
	}
	var mu sync.Mutex
	var acks []ackLine
	failures := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var last audit.Record
				err := s.Tx(bg, func(tx store.Tx) error {
					var err error
					last, err = auditedCall(tx, runs[w], "work", attempts[w], "note.add", fmt.Sprintf(`{"i":%d}`, i))
					return err
				})
				mu.Lock()
				if err == nil {
					acks = append(acks, ackLine{last.Run, last.Seq, last.Hash})
				} else {
					failures++
				}
				mu.Unlock()
			}
		}()
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	killed := int64(0)
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
		var n int64
		err := admin.QueryRow(bg, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = 'openplaybook' AND pid <> pg_backend_pid() AND state <> 'idle'
			ORDER BY random() LIMIT 1) k`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		killed += n
	}
	close(stop)
	wg.Wait()
	t.Logf("%d sessions terminated, %d transactions acknowledged, %d failed", killed, len(acks), failures)
	if killed == 0 || len(acks) == 0 {
		t.Fatalf("terminated %d sessions, acknowledged %d transactions: the test did not test", killed, len(acks))
	}
	// Still working, on new connections.
	mustTx(t, s, func(tx store.Tx) error {
		_, err := auditedCall(tx, runs[0], "work", attempts[0], "note.add", `{"after":true}`)
		return err
	})
	checkStoreRuns(t, s, runs, acks)
}

// killChild starts the helper, waits until it acknowledged minAcks
// transactions and then delay more, calls kill and returns the
// acknowledgements it printed and its stderr.
func killChild(t *testing.T, url, mode string, delay time.Duration, minAcks int, kill func(*exec.Cmd) error) ([]ackLine, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+url, crashModeEnv+"="+mode)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	reached := make(chan struct{})
	lines := make(chan []ackLine, 1)
	go func() {
		var got []ackLine
		br := bufio.NewReader(out)
		for {
			line, err := br.ReadString('\n')
			if err != nil { // a line without its newline was not wholly written: ignore it
				if err != io.EOF {
					t.Error(err)
				}
				break
			}
			var a ackLine
			if _, err := fmt.Sscanf(line, "ack %s %d %s\n", &a.run, &a.seq, &a.hash); err != nil {
				continue
			}
			got = append(got, a)
			if len(got) == minAcks {
				close(reached)
			}
		}
		if len(got) < minAcks || minAcks == 0 {
			select {
			case <-reached:
			default:
				close(reached)
			}
		}
		lines <- got
	}()
	if minAcks > 0 {
		select {
		case <-reached:
		case <-time.After(90 * time.Second):
			t.Fatal("the child acknowledged too little")
		}
	}
	time.Sleep(delay)
	if err := kill(cmd); err != nil {
		t.Fatal(err)
	}
	got := <-lines
	cmd.Wait()
	return got, stderr.String()
}

func checkCrashStore(t *testing.T, url string, acks []ackLine) {
	t.Helper()
	waitServerSettled(t, url)
	s, err := postgres.Open(bg, url, nil)
	if err != nil {
		t.Fatalf("reopening after the crash: %v", err)
	}
	defer s.Close()
	var runs []string
	for w := range crashWorkers {
		runs = append(runs, crashRun(w))
	}
	checkStoreRuns(t, s, runs, acks)
}

// waitServerSettled waits (up to 30 s) until no other session of the
// database is busy. A killed client's server sessions go on with what it
// had sent (a pipelined batch ends in COMMIT) until they next write to
// the closed socket, so a transaction can still commit after the kill;
// checking before that would read the log and the calls in two different
// states of the database. The package's tests do not run in parallel.
func waitServerSettled(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connecting to see the server settle: %v", err)
	}
	defer conn.Close(bg)
	for {
		var busy int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()
			AND backend_type = 'client backend' AND state <> 'idle'`).Scan(&busy)
		if err != nil {
			t.Fatalf("waiting for the server to settle: %v", err)
		}
		if busy == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkStoreRuns: the runs' chains verify, every acknowledged record is
// there, every call has exactly its audit records, and each
// outcome_unknown call has its pending decision.
func checkStoreRuns(t *testing.T, s store.Store, runs []string, acks []ackLine) {
	t.Helper()
	records := map[string][]audit.Record{}
	for _, run := range runs {
		if _, err := s.GetRun(bg, run); errors.Is(err, store.ErrNotFound) {
			continue
		}
		recs, err := s.Audit(bg, run)
		if err != nil {
			t.Fatal(err)
		}
		records[run] = recs
		if probs, err := s.VerifyAudit(bg, run); err != nil || len(probs) != 0 {
			t.Fatalf("%s: VerifyAudit = %v, %v", run, probs, err)
		}
		checkPairs(t, s, run, recs)
	}
	for _, a := range acks {
		recs := records[a.run]
		if a.seq > int64(len(recs)) || recs[a.seq-1].Hash != a.hash {
			t.Fatalf("acknowledged record %d of %s (%s) is lost; the log has %d records", a.seq, a.run, a.hash, len(recs))
		}
	}
}

func checkPairs(t *testing.T, s store.Store, run string, recs []audit.Record) {
	t.Helper()
	type key struct{ attempt, index int }
	kinds := map[key][]string{}
	for _, r := range recs {
		if !strings.HasPrefix(r.Kind, "call.") {
			continue
		}
		var d struct {
			Attempt int `json:"attempt"`
			Index   int `json:"index"`
		}
		if err := json.Unmarshal(r.Data, &d); err != nil {
			t.Fatalf("record %d: %v", r.Seq, err)
		}
		k := key{d.Attempt, d.Index}
		kinds[k] = append(kinds[k], strings.TrimPrefix(r.Kind, "call."))
	}
	calls, err := s.Calls(bg, run, store.CallFilter{})
	if err != nil {
		t.Fatal(err)
	}
	unknown := 0
	for _, c := range calls {
		k := key{c.Attempt, c.Index}
		got := strings.Join(kinds[k], ",")
		delete(kinds, k)
		want := ""
		switch {
		case c.Tool == "note.add" && c.State == store.CallSucceeded:
			want = "started,succeeded"
		case c.State == store.CallStarted:
			want = "started,executing"
		case c.State == store.CallSucceeded:
			want = "started,executing,succeeded"
		case c.State == store.CallOutcomeUnknown:
			want = "started,executing,outcome_unknown"
			unknown++
		}
		if want == "" || got != want {
			t.Fatalf("%s %s is %s with audit records %q, want %q", run, c.CallKey, c.State, got, want)
		}
	}
	for k, ks := range kinds {
		t.Fatalf("%s: audit records %v for call attempt %d index %d, which does not exist", run, ks, k.attempt, k.index)
	}
	as, err := s.Approvals(bg, run)
	if err != nil {
		t.Fatal(err)
	}
	decisions := 0
	for _, a := range as {
		if a.Kind == store.KindOutcomeUnknown && a.Status == store.ApprovalPending && a.Call != nil {
			decisions++
		}
	}
	if decisions != unknown {
		t.Fatalf("%s: %d outcome_unknown calls but %d pending decisions", run, unknown, decisions)
	}
}

func logStates(t *testing.T, url string) {
	s, err := postgres.Open(bg, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	states := map[store.CallState]int{}
	for w := range crashWorkers {
		calls, _ := s.Calls(bg, crashRun(w), store.CallFilter{})
		for _, c := range calls {
			states[c.State]++
		}
	}
	t.Logf("calls by state: %v", states)
}
