//go:build linux

package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/sqlite"
)

var crashSeed = flag.Uint64("crash.seed", 0, "seed of TestCrash's kill delays; 0 takes one from the clock (the test logs it)")

// TestCrash kills the runtime (the openplaybook binary, SIGKILL) while it
// runs a playbook whose agent calls a side-effecting MCP tool (it appends a
// line to a file: testdata/crash/server), and resumes it, as the runtime's
// durability promise says a person would:
//
//   - random-kills: many kills at random moments, resuming after each and
//     deciding what the run waits for the way a person would (an
//     outcome-unknown call whose line is in the file is denied, one whose
//     line is not is approved). At the end every line is in the file
//     exactly once, every acknowledged call outcome and audit record
//     survived every kill, and the audit chain verifies.
//   - outcome-unknown: kills exactly between a side-effecting call's
//     recorded start and its recorded outcome, also while a person's
//     approved re-run of such a call executes.
//   - gate-decided: the state a kill leaves after a decided gate's step
//     finished and before the next step started.
//
// The MCP server runs in its own process group (mcphost) and dies with
// the runtime by its parent-death signal; the test waits until it is gone
// before it looks at the file.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test builds two programs and kills processes; skipped with -short")
	}
	rig := newCrashRig(t)
	t.Run("random-kills", rig.randomKills)
	t.Run("outcome-unknown", rig.outcomeUnknown)
	t.Run("gate-decided", rig.gateDecided)
	t.Run("not-asked-again", rig.notAskedAgain)
}

// transcriptPath is a transcript of testdata/crash by name, or the file
// an absolute path names.
func transcriptPath(root, name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(root, "runtime", "testdata", "crash", name)
}

const (
	crashAppend     = "mcp.crash.append"
	crashRead       = "mcp.crash.read"
	crashNote       = "note.add"
	crashServerName = "crashserver" // the server binary's name, as /proc/PID/stat shows it
)

// crashRig holds the two programs the test builds once.
type crashRig struct {
	root   string // the repository root
	bin    string // openplaybook
	server string // testdata/crash/server
}

func newCrashRig(t *testing.T) *crashRig {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the go command is needed to build the runtime and the test server (CI is set, so this fails): %v", err)
		}
		t.Skipf("the go command is needed to build the runtime and the test server: %v", err)
	}
	r := &crashRig{root: mcptest.RepoRoot(t)}
	dir := t.TempDir()
	r.bin = filepath.Join(dir, "openplaybook")
	r.server = filepath.Join(dir, crashServerName)
	for _, b := range []struct{ out, pkg string }{{r.bin, "./cmd/openplaybook"}, {r.server, "./runtime/testdata/crash/server"}} {
		cmd := exec.Command(goTool, "build", "-o", b.out, b.pkg)
		cmd.Dir = r.root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", b.pkg, err, out)
		}
	}
	return r
}

// crashCase is one run of the playbook in its own directory: harness,
// store, count file.
type crashCase struct {
	t         *testing.T
	rig       *crashRig
	dir       string
	harness   string
	doc       string
	db        string
	countFile string
	pidDir    string
	run       string // "" until the run exists

	// What the processes acknowledged, summed over all of them: each
	// "allowed" line is one call that ran and succeeded; its outcome
	// record may still be queued (docs/store.md, "Pipelined call
	// records"); each "finished" line one agent step whose end was
	// committed.
	acked    map[string]int
	finished map[string]bool
	// The audit log as last seen: a later look must extend it.
	seen []audit.Record
}

// newCase writes a harness binding the crash server and the transcript
// (a file in testdata/crash) to agent crasher, copies the playbook, and
// checks that it validates, is pinned and passes check.
func (r *crashRig) newCase(t *testing.T, transcript string) *crashCase {
	t.Helper()
	dir := t.TempDir()
	c := &crashCase{
		t: t, rig: r, dir: dir,
		harness:   filepath.Join(dir, "harness.yaml"),
		doc:       filepath.Join(dir, "crash.json"),
		db:        filepath.Join(dir, "state", "openplaybook.db"),
		countFile: filepath.Join(dir, "count.txt"),
		pidDir:    filepath.Join(dir, "pids"),
		acked:     map[string]int{},
		finished:  map[string]bool{},
	}
	if err := os.Mkdir(c.pidDir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(r.root, "runtime", "testdata", "crash", "crash.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.doc, src, 0o644); err != nil {
		t.Fatal(err)
	}
	harness := fmt.Sprintf(`mcpServers:
  crash:
    command: %q
    env:
      COUNT_FILE: %q
      PID_DIR: %q
      APPEND_DELAY: 8ms
agents:
  crasher: {driver: transcript, transcript: %q}
store:
  sqlite: %q
`, r.server, c.countFile, c.pidDir, transcriptPath(r.root, transcript), c.db)
	if err := os.WriteFile(c.harness, []byte(harness), 0o644); err != nil {
		t.Fatal(err)
	}
	c.mustCLI(0, "validate", c.doc)
	if _, stderr, code := c.cli("pin", "--harness", c.harness, c.doc); code != 0 {
		t.Logf("testdata/crash/crash.json is not in line with the crash server; pinning a copy:\n%s", stderr)
		c.mustCLI(0, "pin", "--write", "--harness", c.harness, c.doc)
	}
	c.mustCLI(0, "check", "--harness", c.harness, c.doc)
	c.waitServers()
	return c
}

// cli runs openplaybook to its end.
func (c *crashCase) cli(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.rig.bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ctx.Err() == nil:
		code = ee.ExitCode()
	default:
		c.t.Fatalf("openplaybook %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), errb.String(), code
}

func (c *crashCase) mustCLI(want int, args ...string) string {
	c.t.Helper()
	out, stderr, code := c.cli(args...)
	if code != want {
		c.t.Fatalf("openplaybook %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, stderr)
	}
	return out
}

// crashProc is a running openplaybook run or resume.
type crashProc struct {
	cmd     *exec.Cmd
	stdout  bytes.Buffer
	stderr  crashBuffer
	started time.Time
	done    chan struct{}
	err     error
}

// crashBuffer keeps the progress a process writes and notes when it
// begins to execute the run: its "run RUN started" or "run RUN resumed"
// line, written once the document is imported and the MCP server is
// connected.
type crashBuffer struct {
	mu       sync.Mutex
	b        bytes.Buffer
	running  chan struct{}
	runningT time.Time
}

func (l *crashBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.b.Write(p)
	if l.runningT.IsZero() && (bytes.HasPrefix(l.b.Bytes(), []byte("run ")) || bytes.Contains(l.b.Bytes(), []byte("\nrun "))) {
		l.runningT = time.Now()
		close(l.running)
	}
	return n, err
}

func (l *crashBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start starts `openplaybook run` (no run yet) or `openplaybook resume`.
// It runs in its own process group; the MCP server it starts is in
// another (mcphost's) and has the kernel kill it when the runtime dies.
func (c *crashCase) start() *crashProc {
	c.t.Helper()
	args := []string{"resume", "--harness", c.harness, "--format", "json", c.run}
	if c.run == "" {
		args = []string{"run", "--harness", c.harness, "--format", "json", c.doc}
	}
	p := &crashProc{cmd: exec.Command(c.rig.bin, args...), done: make(chan struct{})}
	p.stderr.running = make(chan struct{})
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p.started = time.Now()
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p
}

// killAfter kills p with SIGKILL d after it started, or, with
// afterRunning, d after it began to execute the run, unless it ended
// before; it waits for p and its MCP server to be gone, and reports
// whether the kill landed.
func (c *crashCase) killAfter(p *crashProc, d time.Duration, afterRunning bool) bool {
	c.t.Helper()
	at := p.started
	if afterRunning {
		select {
		case <-p.done:
		case <-p.stderr.running:
			at = p.stderr.runningT
		}
	}
	timer := time.NewTimer(time.Until(at.Add(d)))
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		// Process.Kill signals through a pidfd, so it cannot hit another
		// process; the runtime is alone in its process group.
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	c.waitServers()
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// wait waits for p to end on its own and returns its exit code.
func (c *crashCase) wait(p *crashProc) int {
	c.t.Helper()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		c.waitServers()
		c.t.Fatalf("openplaybook did not end within 30s\nstderr:\n%s", p.stderr.String())
	}
	c.waitServers()
	return p.cmd.ProcessState.ExitCode()
}

// waitServers waits until every crash server that was started (each left
// its process id in pidDir) is gone, so that none can still append a line
// while the test reads the file.
func (c *crashCase) waitServers() {
	c.t.Helper()
	ents, err := os.ReadDir(c.pidDir)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		deadline := time.Now().Add(10 * time.Second)
		for crashServerAlive(pid) {
			if time.Now().After(deadline) {
				c.t.Fatalf("the crash server (pid %d) is still running 10s after the runtime that started it ended", pid)
			}
			time.Sleep(2 * time.Millisecond)
		}
		if err := os.Remove(filepath.Join(c.pidDir, e.Name())); err != nil {
			c.t.Fatal(err)
		}
	}
}

// alive reports whether pid is a crash server that has not exited (a
// zombie has: it runs no more code).
func crashServerAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || len(s) < end+3 {
		return false
	}
	if s[open+1:end] != crashServerName { // the id was reused
		return false
	}
	state := s[end+2]
	return state != 'Z' && state != 'X'
}

// noteAcks reads what a process acknowledged on standard error.
func (c *crashCase) noteAcks(p *crashProc) {
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "  allowed "):
			tool, err := strconv.Unquote(strings.TrimPrefix(line, "  allowed "))
			if err != nil {
				c.t.Fatalf("progress line %q: %v", line, err)
			}
			c.acked[tool]++
		case strings.HasPrefix(line, "step ") && strings.Contains(line, " finished ("):
			c.finished[strings.Fields(line)[1]] = true
		}
	}
}

// openStore opens the case's store, or returns nil when no process got
// as far as creating it.
func (c *crashCase) openStore() store.Store {
	c.t.Helper()
	if _, err := os.Stat(c.db); err != nil {
		return nil
	}
	st, err := sqlite.Open(c.db, nil)
	if err != nil {
		c.t.Fatalf("opening the store after a kill: %v", err)
	}
	return st
}

// lines returns how many times each id is in the count file.
func (c *crashCase) lines() map[string]int {
	c.t.Helper()
	b, err := os.ReadFile(c.countFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		c.t.Fatal(err)
	}
	n := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			n[l]++
		}
	}
	return n
}

// crashAppendID is the id argument of an append call.
func crashAppendID(t *testing.T, call store.Call) string {
	t.Helper()
	var a struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(call.Args, &a); err != nil {
		t.Fatalf("arguments of %s: %v", call.CallKey, err)
	}
	return a.ID
}

// crashPoint says where a kill left the run.
type crashPoint string

const (
	killNoRun         crashPoint = "before the run was created"
	killNothingNew    crashPoint = "before the process recorded anything (start-up, replaying recorded calls)"
	killBetween       crashPoint = "between calls or steps"
	killAppendBefore  crashPoint = "in an append call, before its line was written"
	killAppendAfter   crashPoint = "in an append call, after its line was written"
	killReadCall      crashPoint = "in a read call"
	killNoteCall      crashPoint = "in a note.add call"
	killAfterDecision crashPoint = "with a call rerun by a person's approval executing"
)

// inspect checks what must hold in the store at any moment, after a
// process ended however it ended: at most one run; its audit chain
// verifies and extends the one seen before (nothing acknowledged is ever
// lost); every success a process acknowledged is recorded, except in the
// crash window of pipelined records: a read's record may be lost (it runs
// again), a side-effecting call's outcome may be lost after its durable
// start (it becomes outcome-unknown, and a person decides); every line in
// the count file is there once and was recorded as a started call before
// it was written. It returns where a kill left the run.
func (c *crashCase) inspect() crashPoint {
	c.t.Helper()
	t := c.t
	st := c.openStore()
	if st == nil {
		return killNoRun
	}
	defer st.Close()
	ctx := context.Background()
	runs, err := st.ListRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case len(runs) == 0:
		return killNoRun
	case len(runs) > 1:
		t.Fatalf("the store holds %d runs; the test started one", len(runs))
	case c.run != "" && runs[0].ID != c.run:
		t.Fatalf("the store holds run %s, the test had run %s", runs[0].ID, c.run)
	}
	c.run = runs[0].ID

	probs, err := st.VerifyAudit(ctx, c.run)
	if err != nil {
		t.Fatal(err)
	}
	if len(probs) > 0 {
		t.Fatalf("the audit chain does not verify after a kill: %v", probs)
	}
	recs, err := st.Audit(ctx, c.run)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < len(c.seen) {
		t.Fatalf("the audit log has %d records; before it had %d: acknowledged records were lost", len(recs), len(c.seen))
	}
	for i, r := range c.seen {
		if recs[i].Seq != r.Seq || recs[i].Hash != r.Hash {
			t.Fatalf("audit record %d changed: was %s %s, is %s %s", r.Seq, r.Kind, r.Hash, recs[i].Kind, recs[i].Hash)
		}
	}
	prev := len(c.seen)
	c.seen = recs

	calls, err := st.Calls(ctx, c.run, store.CallFilter{})
	if err != nil {
		t.Fatal(err)
	}
	succeeded, unsettled := map[string]int{}, map[string]int{}
	for _, call := range calls {
		switch call.State {
		case store.CallSucceeded:
			succeeded[call.Tool]++
		case store.CallStarted, store.CallOutcomeUnknown:
			unsettled[call.Tool]++
		case store.CallFailed:
			// An outcome-unknown call a person decided not to run again
			// (its line was in the file: it had run).
			if strings.Contains(call.Error, "outcome of this call is unknown") {
				unsettled[call.Tool]++
			}
		}
	}
	for tool, n := range c.acked {
		switch {
		case tool == crashRead:
			// A read whose record was lost runs again: nothing to hold.
		case tool == crashNote && succeeded[tool] < n:
			// note.add writes in the transaction that records it.
			t.Fatalf("the processes acknowledged %d successful calls of %s; the store has %d", n, tool, succeeded[tool])
		case succeeded[tool]+unsettled[tool] < n:
			t.Fatalf("the processes acknowledged %d successful calls of %s; the store has %d succeeded and %d whose outcome was unknown", n, tool, succeeded[tool], unsettled[tool])
		}
	}
	steps, err := st.Steps(ctx, c.run)
	if err != nil {
		t.Fatal(err)
	}
	for step := range c.finished {
		if !slices.ContainsFunc(steps, func(s store.Step) bool { return s.Step == step && s.Status == store.StepDone }) {
			t.Fatalf("a process acknowledged that step %s finished; the store does not say so", step)
		}
	}

	lines := c.lines()
	recorded := map[string]store.Call{}
	for _, call := range calls {
		if call.Tool == crashAppend {
			id := crashAppendID(t, call)
			if _, dup := recorded[id]; dup {
				t.Fatalf("append %q was recorded as two calls", id)
			}
			recorded[id] = call
		}
	}
	for id, n := range lines {
		if n > 1 && !strings.HasPrefix(id, "slow") {
			t.Fatalf("append %q ran %d times", id, n)
		}
		if call, ok := recorded[id]; !ok || call.Decision != store.DecisionAllowed {
			t.Fatalf("append %q ran, and no allowed call for it was recorded before (%+v)", id, call)
		}
	}

	// Where the process was: in the call its last record started (or
	// retried, or re-ran for a person), if that call has no outcome yet.
	if len(recs) == prev {
		return killNothingNew
	}
	lastRec := recs[len(recs)-1]
	switch lastRec.Kind {
	case "call.started", "call.retried", "call.rerun":
	default:
		return killBetween
	}
	i := slices.IndexFunc(calls, func(cl store.Call) bool { return cl.Step == lastRec.Step && cl.Index == crashIndex(t, lastRec) })
	if i < 0 {
		t.Fatalf("audit record %d (%s) names a call that is not recorded", lastRec.Seq, lastRec.Kind)
	}
	call := calls[i]
	switch {
	case call.State != store.CallStarted && call.State != store.CallOutcomeUnknown:
		t.Fatalf("%s is %s and its last audit record is %s", call.CallKey, call.State, lastRec.Kind)
	case lastRec.Kind == "call.rerun":
		return killAfterDecision
	case call.Tool == crashRead:
		return killReadCall
	case call.Tool == crashNote:
		return killNoteCall
	case lines[crashAppendID(t, call)] > 0:
		return killAppendAfter
	}
	return killAppendBefore
}

// crashOutcome is what `run --format json` and `resume --format json` print.
type crashOutcome struct {
	Run     string `json:"run"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Waiting []struct {
		Kind    string `json:"kind"`
		ID      string `json:"id"`
		Step    string `json:"step"`
		Tool    string `json:"tool"`
		Summary string `json:"summary"`
	} `json:"waiting"`
}

func (c *crashCase) outcome(p *crashProc) crashOutcome {
	c.t.Helper()
	var o crashOutcome
	if err := json.Unmarshal(p.stdout.Bytes(), &o); err != nil {
		c.t.Fatalf("reading the outcome %q: %v\nstderr:\n%s", p.stdout.String(), err, p.stderr.String())
	}
	return o
}

// crashDecisions counts what the person decided.
type crashDecisions struct {
	gates, reruns, denials int
}

// decide decides what a waiting run waits for, as a person would: a gate
// is approved; an outcome-unknown call is run again when its effect is not
// there (its line is not in the file, its note was not written) and denied
// when it is.
func (c *crashCase) decide(o crashOutcome, d *crashDecisions) {
	c.t.Helper()
	t := c.t
	if o.Status != "waiting" {
		t.Fatalf("exit 3 with status %q", o.Status)
	}
	if len(o.Waiting) == 0 {
		t.Fatalf("run %s waits and lists nothing to decide: it can never go on (reason %q)", o.Run, o.Reason)
	}
	st := c.openStore()
	for _, w := range o.Waiting {
		switch w.Kind {
		case "gate":
			d.gates++
			c.mustCLI(0, "approve", "--harness", c.harness, "--by", "crash-test", c.run, w.ID)
		case "outcome_unknown":
			a, err := st.GetApproval(context.Background(), w.ID)
			if err != nil {
				t.Fatal(err)
			}
			calls, err := st.Calls(context.Background(), c.run, store.CallFilter{Step: a.Call.Step, Attempt: a.Call.Attempt, Index: &a.Call.Index})
			if err != nil || len(calls) != 1 {
				t.Fatalf("the call of %s: %v (%d calls)", w.ID, err, len(calls))
			}
			call := calls[0]
			if call.State != store.CallOutcomeUnknown {
				t.Fatalf("%s waits for a decision on %s, which is %s", w.ID, call.CallKey, call.State)
			}
			var happened bool
			switch call.Tool {
			case crashAppend:
				happened = c.lines()[crashAppendID(t, call)] > 0
			case crashNote:
				var a struct {
					Body string `json:"body"`
				}
				if err := json.Unmarshal(call.Args, &a); err != nil {
					t.Fatal(err)
				}
				notes, err := st.(builtin.Data).ListNotes(context.Background(), "", "", 1000)
				if err != nil {
					t.Fatal(err)
				}
				happened = slices.ContainsFunc(notes, func(n store.Note) bool { return n.Body == a.Body })
			default:
				t.Fatalf("a call of %s waits for a person: a read call is retried, never held", call.Tool)
			}
			if happened {
				d.denials++
				c.mustCLI(0, "deny", "--harness", c.harness, "--reason", "it happened", c.run, w.ID)
			} else {
				d.reruns++
				c.mustCLI(0, "approve", "--harness", c.harness, "--reason", "it did not happen", c.run, w.ID)
			}
		default:
			t.Fatalf("run %s waits for %s %s; this playbook asks for no approval", c.run, w.Kind, w.ID)
		}
	}
	if st != nil {
		st.Close()
	}
}

// checkDone checks a completed run: each append id in want ran exactly
// as often as want says, each note body once, the chain verifies (also
// through the CLI), and every call has exactly the audit records its
// state implies.
func (c *crashCase) checkDone(want map[string]int, notes []string) {
	c.t.Helper()
	t := c.t
	c.inspect()
	st := c.openStore()
	defer st.Close()
	ctx := context.Background()
	run, err := st.GetRun(ctx, c.run)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != store.RunCompleted {
		t.Fatalf("run %s is %s, want completed (%s)", c.run, run.Status, run.Reason)
	}
	if got := c.lines(); !maps.Equal(got, want) {
		t.Errorf("the count file has %v, want %v", got, want)
	}
	ns, err := st.(builtin.Data).ListNotes(ctx, "", "crash", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, n := range ns {
		bodies = append(bodies, n.Body)
	}
	slices.Sort(bodies)
	notes = slices.Sorted(slices.Values(notes))
	if !slices.Equal(bodies, notes) {
		t.Errorf("notes %q, want %q", bodies, notes)
	}
	out := c.mustCLI(0, "audit", "--harness", c.harness, "--verify", c.run)
	if !strings.Contains(out, "chain verifies") {
		t.Errorf("audit --verify says:\n%s", out)
	}

	calls, err := st.Calls(ctx, c.run, store.CallFilter{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := st.Audit(ctx, c.run)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		step string
		idx  int
	}
	kinds := map[key][]string{}
	for _, r := range recs {
		if strings.HasPrefix(r.Kind, "call.") {
			k := key{r.Step, crashIndex(t, r)}
			kinds[k] = append(kinds[k], r.Kind)
		}
	}
	for _, call := range calls {
		k := key{call.Step, call.Index}
		ks := kinds[k]
		delete(kinds, k)
		count := func(kind string) int {
			n := 0
			for _, x := range ks {
				if x == kind {
					n++
				}
			}
			return n
		}
		what := fmt.Sprintf("%s (%s, %s): audit records %v", call.CallKey, call.Tool, call.State, ks)
		if len(ks) == 0 || ks[0] != "call.started" {
			t.Errorf("%s: the first is not call.started", what)
		}
		switch call.State {
		case store.CallSucceeded:
			if count("call.succeeded") != 1 || ks[len(ks)-1] != "call.succeeded" || count("call.failed") != 0 {
				t.Errorf("%s: want one call.succeeded, last", what)
			}
			if n := count("call.outcome-unknown"); n != count("call.rerun") {
				t.Errorf("%s: %d outcome-unknown records, %d reruns", what, n, count("call.rerun"))
			}
		case store.CallFailed:
			if count("call.failed") != 1 || ks[len(ks)-1] != "call.failed" || count("call.outcome-unknown") == 0 {
				t.Errorf("%s: want outcome-unknown and one call.failed, last (only a denied call fails here)", what)
			}
		default:
			t.Errorf("%s: a completed run has no call in state %s", what, call.State)
		}
		// A built-in's effect commits with its outcome: one still
		// started had none, and runs again when asked (the notes above
		// are each written once). Any other side effect never does.
		builtinWrite := call.Tool == "note.add" || call.Tool == "today.surface"
		if count("call.retried") > 0 && call.SideEffecting && !builtinWrite {
			t.Errorf("%s: a side-effecting call was retried on its own", what)
		}
		if builtinWrite && count("call.outcome-unknown") > 0 {
			t.Errorf("%s: a built-in write, whose effect commits with its outcome, was outcome-unknown", what)
		}
	}
	for k, ks := range kinds {
		t.Errorf("audit records %v name call %d of step %s, which is not recorded", ks, k.idx, k.step)
	}
}

func crashIndex(t *testing.T, r audit.Record) int {
	t.Helper()
	var d struct {
		Index *int `json:"index"`
	}
	if err := json.Unmarshal(r.Data, &d); err != nil || d.Index == nil {
		t.Fatalf("audit record %d (%s) has no index: %s", r.Seq, r.Kind, r.Data)
	}
	return *d.Index
}

var (
	crashAppends = []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "b1", "b2", "b3", "b4", "b5", "b6"}
	crashNotes   = []string{"first: a1 and a2 appended", "first: a5 appended", "first: done", "second: b1 and b2 appended", "second: done"}
)

// randomKills runs the playbook to completion again and again, killing
// most processes at a random moment (0 to 150 ms after the process
// started, or, for half of them, after it began to execute the run, past
// its start-up), until enough kills landed or the time is up. Every
// process is checked after it ended (inspect), and every completed run
// (checkDone).
func (r *crashRig) randomKills(t *testing.T) {
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (go test ./runtime -run 'TestCrash/random' -crash.seed=%d repeats these kill delays)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	const (
		wantKills = 40
		budget    = 20 * time.Second
		maxDelay  = 150 * time.Millisecond
	)
	stop := time.Now().Add(budget)
	points := map[crashPoint]int{}
	var d crashDecisions
	kills, startup, procs, rounds := 0, 0, 0, 0
	for ; kills < wantKills && time.Now().Before(stop); rounds++ {
		c := r.newCase(t, "random.json")
		for n := 0; ; n++ {
			if n > 400 {
				t.Fatalf("round %d: the run did not complete in %d processes", rounds, n)
			}
			p := c.start()
			procs++
			killed := false
			if kills < wantKills && time.Now().Before(stop) && rng.Float64() < 0.8 {
				delay := time.Duration(rng.Int64N(int64(maxDelay)))
				afterRunning := rng.IntN(2) == 0
				killed = c.killAfter(p, delay, afterRunning)
				if killed && !strings.Contains("\n"+p.stderr.String(), "\nrun ") {
					startup++
				}
			}
			if !killed {
				c.wait(p)
			}
			c.noteAcks(p)
			point := c.inspect()
			if killed {
				kills++
				points[point]++
				continue
			}
			switch code := p.cmd.ProcessState.ExitCode(); code {
			case 0:
				if o := c.outcome(p); o.Status != "completed" {
					t.Fatalf("exit 0 with status %q", o.Status)
				}
			case 3:
				c.decide(c.outcome(p), &d)
				continue
			default:
				t.Fatalf("round %d: openplaybook exited %d\nstdout:\n%s\nstderr:\n%s", rounds, code, p.stdout.String(), p.stderr.String())
			}
			break
		}
		want := map[string]int{}
		for _, id := range crashAppends {
			want[id] = 1
		}
		c.checkDone(want, crashNotes)
	}
	t.Logf("%d rounds, %d processes, %d kills landed; person's decisions: %d gates, %d reruns approved, %d denied", rounds, procs, kills, d.gates, d.reruns, d.denials)
	t.Logf("  (%d of them during start-up, before the run began to execute)", startup)
	mid := 0
	for _, p := range []crashPoint{killNoRun, killNothingNew, killBetween, killReadCall, killNoteCall, killAppendBefore, killAppendAfter, killAfterDecision} {
		t.Logf("  %3d kills %s", points[p], p)
		if p != killNoRun && p != killNothingNew && p != killBetween {
			mid += points[p]
		}
	}
	t.Logf("  %3d kills landed inside a call", mid)
	if kills < 10 {
		t.Errorf("only %d kills landed in %v; the test proves little", kills, budget)
	}
}

// killWhenHeld kills p once the crash server holds append id (its line
// is written, its answer not sent), and waits for both to be gone.
func (c *crashCase) killWhenHeld(p *crashProc, id string) {
	c.t.Helper()
	marker := c.countFile + "." + id + ".running"
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		select {
		case <-p.done:
			c.waitServers()
			c.t.Fatalf("openplaybook ended (%v) before append %q ran\nstdout:\n%s\nstderr:\n%s", p.err, id, p.stdout.String(), p.stderr.String())
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("append %q did not run within 20s", id)
		}
	}
	if !c.killAfter(p, 0, false) {
		c.t.Fatalf("openplaybook ended before it was killed\nstderr:\n%s", p.stderr.String())
	}
	c.noteAcks(p)
	if err := os.Remove(marker); err != nil {
		c.t.Fatal(err)
	}
}

// resume runs `openplaybook resume` to its end, checks its exit code and
// returns its outcome.
func (c *crashCase) resume(want int) crashOutcome {
	c.t.Helper()
	p := c.start()
	code := c.wait(p)
	c.noteAcks(p)
	c.inspect()
	if code != want {
		c.t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, want, p.stdout.String(), p.stderr.String())
	}
	return c.outcome(p)
}

// waitsFor checks that o waits for exactly one decision of kind, and
// returns its id.
func (c *crashCase) waitsFor(o crashOutcome, kind, tool string) string {
	c.t.Helper()
	if o.Status != "waiting" || len(o.Waiting) != 1 || o.Waiting[0].Kind != kind || o.Waiting[0].Tool != tool {
		c.t.Fatalf("the run waits for %+v (%s); want one %s decision on %q", o.Waiting, o.Reason, kind, tool)
	}
	return o.Waiting[0].ID
}

// appendCall returns the recorded call of append id.
func (c *crashCase) appendCall(id string) store.Call {
	c.t.Helper()
	st := c.openStore()
	defer st.Close()
	calls, err := st.Calls(context.Background(), c.run, store.CallFilter{})
	if err != nil {
		c.t.Fatal(err)
	}
	for _, call := range calls {
		if call.Tool == crashAppend && crashAppendID(c.t, call) == id {
			return call
		}
	}
	c.t.Fatalf("no call of append %q is recorded", id)
	return store.Call{}
}

// lastCallRecord returns the kind of the last audit record about call.
func (c *crashCase) lastCallRecord(call store.Call) string {
	c.t.Helper()
	kind := ""
	for _, r := range c.seen {
		if strings.HasPrefix(r.Kind, "call.") && r.Step == call.Step && crashIndex(c.t, r) == call.Index {
			kind = r.Kind
		}
	}
	return kind
}

// outcomeUnknown kills the runtime exactly while a side-effecting call
// has happened and its outcome is not recorded: first in a call the agent
// made (a person then denies running it again), then in a call a person
// had run again.
func (r *crashRig) outcomeUnknown(t *testing.T) {
	c := r.newCase(t, "slow.json")

	// The run is killed inside append slow1: started, line written, no
	// outcome.
	c.killWhenHeld(c.start(), "slow1")
	if p := c.inspect(); p != killAppendAfter {
		t.Fatalf("the kill left the run %s, want %s", p, killAppendAfter)
	}
	if call := c.appendCall("slow1"); call.State != store.CallStarted || c.lastCallRecord(call) != "call.started" {
		t.Fatalf("slow1 is %s after the kill (last record %q), want started", call.State, c.lastCallRecord(call))
	}

	// Resume: the call is not run again on its own; it waits for a person.
	apr := c.waitsFor(c.resume(3), "outcome_unknown", crashAppend)
	if call := c.appendCall("slow1"); call.State != store.CallOutcomeUnknown || c.lastCallRecord(call) != "call.outcome-unknown" {
		t.Fatalf("slow1 is %s (last record %q), want outcome_unknown", call.State, c.lastCallRecord(call))
	}
	// Resuming again without a decision changes nothing.
	if again := c.waitsFor(c.resume(3), "outcome_unknown", crashAppend); again != apr {
		t.Fatalf("the second resume waits for %s, the first for %s", again, apr)
	}
	if n := c.lines()["slow1"]; n != 1 {
		t.Fatalf("slow1 ran %d times before anyone decided", n)
	}

	// The line is there: deny. The agent gets an error and the step goes
	// on to its end; the run stops at the gate.
	c.mustCLI(0, "deny", "--harness", c.harness, "--reason", "it happened", c.run, apr)
	if gate := c.waitsFor(c.resume(3), "gate", ""); gate != "check" {
		t.Fatalf("the run waits for gate %s, want check", gate)
	}
	call := c.appendCall("slow1")
	if call.State != store.CallFailed || !strings.Contains(call.Error, "decided not to run it again") {
		t.Fatalf("slow1 is %s (%q) after the denial, want failed", call.State, call.Error)
	}
	st := c.openStore()
	steps, err := st.Steps(context.Background(), c.run)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(steps, func(s store.Step) bool { return s.Step == "first" }); i < 0 || steps[i].Status != store.StepDone ||
		!strings.Contains(string(steps[i].Output), "decided not to run it again") {
		t.Fatalf("step first after the denial: %+v", steps)
	}

	// The next step is killed inside append slow2; a person has it run
	// again, and the kill hits the re-run too.
	c.mustCLI(0, "approve", "--harness", c.harness, c.run, "check")
	c.killWhenHeld(c.start(), "slow2")
	apr = c.waitsFor(c.resume(3), "outcome_unknown", crashAppend)
	c.mustCLI(0, "approve", "--harness", c.harness, "--reason", "run it again", c.run, apr)
	c.killWhenHeld(c.start(), "slow2")
	if p := c.inspect(); p != killAfterDecision {
		t.Fatalf("the kill left the run %s, want %s", p, killAfterDecision)
	}
	if n := c.lines()["slow2"]; n != 2 {
		t.Fatalf("slow2 ran %d times, want 2 (once, and once more as approved)", n)
	}

	// The re-run's outcome is unknown as well: the run waits for a new
	// decision (the approval was used by the re-run).
	again := c.waitsFor(c.resume(3), "outcome_unknown", crashAppend)
	if again == apr {
		t.Fatalf("the run waits for %s again, which was used by the re-run", apr)
	}
	// Were slow2 run once more, it would answer (not hang) and show as a
	// third line.
	if err := os.WriteFile(c.countFile+".slow2.release", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.mustCLI(0, "deny", "--harness", c.harness, "--reason", "it happened", c.run, again)
	if o := c.resume(0); o.Status != "completed" {
		t.Fatalf("the run is %s, want completed", o.Status)
	}
	c.checkDone(map[string]int{"a1": 1, "slow1": 1, "a2": 1, "b1": 1, "slow2": 2, "b2": 1}, []string{"first: done", "second: done"})
}

// gateDecided resumes a run from the state a kill leaves between the
// gate's step finishing (after a person approved it) and the next step
// starting: two transactions of the runtime.
func (r *crashRig) gateDecided(t *testing.T) {
	c := r.newCase(t, "random.json")
	if gate := c.waitsFor(c.resume0(), "gate", ""); gate != "check" {
		t.Fatalf("the run waits for gate %s, want check", gate)
	}
	c.mustCLI(0, "approve", "--harness", c.harness, "--by", "crash-test", c.run, "check")

	// Commit what `resume` commits before it starts the next step, as the
	// runtime does: the run running again, then the gate's step finished
	// with the decision.
	st := c.openStore()
	ctx := context.Background()
	gates, err := st.Gates(ctx, c.run)
	if err != nil || len(gates) != 1 {
		t.Fatalf("gates: %v %+v", err, gates)
	}
	err = st.Tx(ctx, func(tx store.Tx) error {
		if err := tx.SetRunStatus(c.run, store.RunRunning, ""); err != nil {
			return err
		}
		_, err := tx.Append(audit.Record{Run: c.run, Kind: "run.resumed"})
		return err
	})
	if err == nil {
		err = st.Tx(ctx, func(tx store.Tx) error {
			return tx.FinishStep(c.run, "check", gates[0].Attempt, store.StepDone, []byte(`{"by":"crash-test","decision":"approved","reason":""}`), "")
		})
	}
	st.Close()
	if err != nil {
		t.Fatal(err)
	}

	if o := c.resume(0); o.Status != "completed" {
		t.Fatalf("the run is %s, want completed", o.Status)
	}
	want := map[string]int{}
	for _, id := range crashAppends {
		want[id] = 1
	}
	c.checkDone(want, crashNotes)
}

// resume0 starts the run and runs it until it first waits.
func (c *crashCase) resume0() crashOutcome {
	c.t.Helper()
	if c.run != "" {
		c.t.Fatal("the run exists")
	}
	return c.resume(3)
}

// notAskedAgain kills the runtime inside a side-effecting call, then
// resumes the run with an agent that does not ask that call again (the
// transcript is rewritten without it, as a model may go on without
// it): the step must not end with the call unresolved. It waits for a
// person; approved, the call runs once more; denied, never. The count
// file says what ran.
func (r *crashRig) notAskedAgain(t *testing.T) {
	transcript := filepath.Join(t.TempDir(), "transcript.json")
	full, err := os.ReadFile(filepath.Join(r.root, "runtime", "testdata", "crash", "slow.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeRigFile(t, transcript, full)
	without := func(id string) {
		t.Helper()
		var tr struct {
			Steps map[string][]map[string]any `json:"steps"`
		}
		if err := json.Unmarshal(full, &tr); err != nil {
			t.Fatal(err)
		}
		for step, calls := range tr.Steps {
			tr.Steps[step] = slices.DeleteFunc(calls, func(c map[string]any) bool {
				a, _ := c["arguments"].(map[string]any)
				return a["id"] == id
			})
		}
		b, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		writeRigFile(t, transcript, b)
	}
	c := r.newCase(t, transcript)

	// Killed inside slow1; the agent resumed never asks it again.
	c.killWhenHeld(c.start(), "slow1")
	if p := c.inspect(); p != killAppendAfter {
		t.Fatalf("the kill left the run %s, want %s", p, killAppendAfter)
	}
	without("slow1")
	apr := c.waitsFor(c.resume(3), "outcome_unknown", crashAppend)
	if call := c.appendCall("slow1"); call.State != store.CallOutcomeUnknown {
		t.Fatalf("slow1 is %s, want outcome_unknown", call.State)
	}
	// Approved: it runs once more (and answers this time), and the step
	// ends.
	if err := os.WriteFile(c.countFile+".slow1.release", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.mustCLI(0, "approve", "--harness", c.harness, "--reason", "it did not happen", c.run, apr)
	if gate := c.waitsFor(c.resume(3), "gate", ""); gate != "check" {
		t.Fatalf("the run waits for gate %s, want check", gate)
	}
	if n := c.lines()["slow1"]; n != 2 {
		t.Fatalf("slow1 ran %d times, want 2 (once, and once more as approved)", n)
	}

	// Killed inside slow2; not asked again; denied: never run again.
	writeRigFile(t, transcript, full)
	c.mustCLI(0, "approve", "--harness", c.harness, c.run, "check")
	c.killWhenHeld(c.start(), "slow2")
	if p := c.inspect(); p != killAppendAfter {
		t.Fatalf("the kill left the run %s, want %s", p, killAppendAfter)
	}
	without("slow2")
	apr = c.waitsFor(c.resume(3), "outcome_unknown", crashAppend)
	if err := os.WriteFile(c.countFile+".slow2.release", nil, 0o644); err != nil {
		t.Fatal(err) // were it run again, it would answer and show
	}
	c.mustCLI(0, "deny", "--harness", c.harness, "--reason", "it happened", c.run, apr)
	if o := c.resume(0); o.Status != "completed" {
		t.Fatalf("the run is %s, want completed", o.Status)
	}
	c.checkDone(map[string]int{"a1": 1, "slow1": 2, "a2": 1, "b1": 1, "slow2": 1, "b2": 1}, []string{"first: done", "second: done"})
}
