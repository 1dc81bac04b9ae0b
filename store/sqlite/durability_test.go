package sqlite

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/store"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
)

const crashEnv = "OPENPLAYBOOK_STORE_CRASH_DB"

const crashWorkers = 4

func crashRun(w int) string { return fmt.Sprintf("run_crash%07d", w) }

// TestHelperProcess is the child of TestKillDurability: it opens the store
// named by $OPENPLAYBOOK_STORE_CRASH_DB, resumes its runs (every call left
// started becomes outcome_unknown) and then records audited calls from
// several goroutines until it is killed, printing "ack RUN SEQ HASH" for
// each acknowledged transaction.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("the child process of TestKillDurability")
	}
	s, err := OpenWith(path, nil)
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
					// The whole call in one transaction.
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
					last, err = tx.Append(audit.Record{Run: run, Kind: "call.executing", Step: "work", Tool: c.Tool,
						Data: callData(c.CallKey)})
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
// call a kill left started as outcome_unknown, as the runtime's resume does.
func resumeCrashRun(s *Store, run string, ack func(audit.Record)) (attempt int, err error) {
	started, err := s.Calls(bg, run, store.CallFilter{States: []store.CallState{store.CallStarted}})
	if err != nil {
		return 0, err
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
		return tx.(*Tx).row(`SELECT max(attempt) FROM steps WHERE run = ? AND step = 'work'`, run).Scan(&attempt)
	})
	return attempt, err
}

type ackLine struct {
	run  string
	seq  int64
	hash string
}

// TestKillDurability kills a process that records audited calls at random
// moments with SIGKILL, and checks after each kill that every acknowledged
// record is there, every chain verifies, and no call is without its audit
// records or an audit record without its call.
func TestKillDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var acks []ackLine
	rounds := 8
	for round := range rounds {
		// Early rounds may kill before the first acknowledgement (while the
		// schema is created or the runs resumed); the others after some.
		var delay time.Duration
		minAcks := 0
		if round%2 == 0 {
			delay = time.Duration(rng.IntN(300)) * time.Millisecond
		} else {
			minAcks = 1 + rng.IntN(2000)
			delay = time.Duration(rng.IntN(50)) * time.Millisecond
		}
		got, stderr := killChild(t, path, delay, minAcks)
		acks = append(acks, got...)
		t.Logf("round %d: killed after %d acknowledgements (%v after %d)", round, len(got), delay, minAcks)
		if stderr != "" {
			t.Fatalf("child stderr: %s", stderr)
		}
		checkCrashStore(t, path, acks)
	}
	if len(acks) == 0 {
		t.Fatal("no transaction was ever acknowledged")
	}
	s := openAt(t, path, nil)
	states := map[store.CallState]int{}
	for w := range crashWorkers {
		calls, _ := s.Calls(bg, crashRun(w), store.CallFilter{})
		for _, c := range calls {
			states[c.State]++
		}
	}
	t.Logf("calls by state: %v", states)
}

// killChild starts the helper, waits until it acknowledged minAcks
// transactions and then delay more, kills it with SIGKILL and returns the
// acknowledgements it printed.
func killChild(t *testing.T, path string, delay time.Duration, minAcks int) ([]ackLine, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
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
			if err != nil { // io.EOF: a line without its newline was not wholly written; ignore it
				if err != io.EOF {
					t.Error(err)
				}
				break
			}
			var a ackLine
			if _, err := fmt.Sscanf(line, "ack %s %d %s\n", &a.run, &a.seq, &a.hash); err != nil {
				continue // the test framework's own output
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
		case <-time.After(60 * time.Second):
			t.Fatal("the child acknowledged too little")
		}
	}
	time.Sleep(delay)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := <-lines
	cmd.Wait()
	return got, stderr.String()
}

func checkCrashStore(t *testing.T, path string, acks []ackLine) {
	t.Helper()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if len(acks) > 0 {
			t.Fatal("the database is gone")
		}
		return
	}
	s, err := OpenWith(path, nil)
	if err != nil {
		t.Fatalf("reopening after kill: %v", err)
	}
	defer s.Close()
	records := map[string][]audit.Record{}
	for w := range crashWorkers {
		run := crashRun(w)
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

// checkPairs: every call has exactly the audit records its state implies
// and every call record names a call that exists.
func checkPairs(t *testing.T, s *Store, run string, recs []audit.Record) {
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
	for _, c := range calls {
		k := key{c.Attempt, c.Index}
		got := strings.Join(kinds[k], ",")
		delete(kinds, k)
		var want []string
		switch {
		case c.Tool == "note.add" && c.State == store.CallSucceeded:
			want = []string{"started,succeeded"}
		case c.State == store.CallStarted:
			want = []string{"started,executing"}
		case c.State == store.CallSucceeded:
			want = []string{"started,executing,succeeded"}
		case c.State == store.CallOutcomeUnknown:
			want = []string{"started,executing,outcome_unknown"}
		}
		if len(want) == 0 || got != want[0] {
			t.Fatalf("%s %s is %s with audit records %q, want %q", run, c.CallKey, c.State, got, want)
		}
	}
	for k, ks := range kinds {
		t.Fatalf("%s: audit records %v for call attempt %d index %d, which does not exist", run, ks, k.attempt, k.index)
	}
}
