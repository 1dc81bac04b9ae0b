//go:build linux

package serve_test

import (
	"bufio"
	"bytes"
	"context"
	encjson "encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
)

// TestServeKilledMidCall kills `openplaybook serve` (SIGKILL) while a run
// it executes is inside a side-effecting call (the crash server of
// runtime/testdata/crash has appended its line and holds its answer), and
// starts the server again on the same store. The server must take the
// run up itself (no process holds it any more) and ask a person about
// exactly the call that was in flight; approving runs it once more,
// denying never. The crash server's count file, not the store, says what
// ran: at the end every append ran once, and the one a person approved
// twice.
func TestServeKilledMidCall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs and kills processes; skipped with -short")
	}
	k, src, count := newCrashServe(t, "{driver: transcript, transcript: %q}")
	p := k.p

	base := k.start()
	var created struct {
		Run string `json:"run"`
	}
	api(t, base, "POST", "/api/v1/runs", fmt.Sprintf(`{"document": %s}`, src), 201, &created)
	run := created.Run

	// Killed inside append slow1: its line is written, its answer held.
	waitFile(t, count+".slow1.running")
	k.kill()
	if st := p.statusOf(run); st != "running" {
		t.Fatalf("after the kill the run is %s, want running", st)
	}

	// A new server takes the run up and asks about slow1, and only it.
	base = k.start()
	apr := waitOutcomeUnknown(t, base, run)
	if n := lines(t, count); n["slow1"] != 1 {
		t.Fatalf("before anyone decided, slow1 ran %d times", n["slow1"])
	}
	// Approve: it runs once more (this time it answers).
	if err := os.WriteFile(count+".slow1.release", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	api(t, base, "POST", "/api/v1/runs/"+run+"/decisions/"+apr, `{"approve": true, "reason": "it did not happen"}`, 200, nil)
	waitPending(t, base, run, "gate", "check")
	api(t, base, "POST", "/api/v1/runs/"+run+"/decisions/check", `{"approve": true}`, 200, nil)

	// Killed again inside slow2; this time a person denies the re-run.
	waitFile(t, count+".slow2.running")
	k.kill()
	base = k.start()
	apr = waitOutcomeUnknown(t, base, run)
	if err := os.WriteFile(count+".slow2.release", nil, 0o644); err != nil {
		t.Fatal(err) // were it run again, it would answer and show
	}
	api(t, base, "POST", "/api/v1/runs/"+run+"/decisions/"+apr, `{"approve": false, "reason": "it happened"}`, 200, nil)
	waitStatus(t, base, run, "completed")
	k.stop()

	want := map[string]int{"a1": 1, "slow1": 2, "a2": 1, "b1": 1, "slow2": 1, "b2": 1}
	if got := lines(t, count); !maps.Equal(got, want) {
		t.Fatalf("the crash server ran %v, want %v", got, want)
	}
	out, errs, code := p.cli("audit", "--verify", run)
	if code != 0 || !strings.Contains(out, "chain verifies") {
		t.Fatalf("audit --verify: exit %d\n%s%s", code, out, errs)
	}
}

// newCrashServe builds the crash server of runtime/testdata/crash, writes
// a harness that binds it and binds agent crasher as agent says (a %q
// in it is the slow.json transcript's path), and pins a copy of
// crash.json. It returns the
// server to start, the pinned document and the count file.
func newCrashServe(t *testing.T, agent string) (*killable, []byte, string) {
	return newCrashServeWith(t, agent, "slow.json", "2ms")
}

// newCrashServeWith is newCrashServe with a transcript of
// runtime/testdata/crash and the crash server's APPEND_DELAY.
func newCrashServeWith(t *testing.T, agent, transcript, delay string) (*killable, []byte, string) {
	t.Helper()
	root := mcptest.RepoRoot(t)
	dir := t.TempDir()
	server := buildProgram(t, dir, "crashserver", "./runtime/testdata/crash/server")
	count, pids := filepath.Join(dir, "count.txt"), filepath.Join(dir, "pids")
	if err := os.Mkdir(pids, 0o755); err != nil {
		t.Fatal(err)
	}
	// Written after newProc, which would replace the "DIR" of PID_DIR.
	p := newProc(t, "")
	if strings.Contains(agent, "%q") {
		agent = fmt.Sprintf(agent, filepath.Join(root, "runtime", "testdata", "crash", transcript))
	}
	harness := fmt.Sprintf(`mcpServers:
  crash:
    command: %q
    env: {COUNT_FILE: %q, PID_DIR: %q, APPEND_DELAY: %s}
agents:
  crasher: `+agent+`
`+strings.ReplaceAll(teststore.YAML(t, "store.db", ""), "%", "%%")+`serve:
  approvalWait: 1s
`, server, count, pids, delay)
	if err := os.WriteFile(p.harness, []byte(harness), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, "runtime", "testdata", "crash", "crash.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(p.dir, "crash.json")
	if err := os.WriteFile(doc, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := p.cli("pin", "--write", doc); code != 0 {
		t.Fatalf("pin: exit %d\n%s%s", code, out, errs)
	}
	if src, err = os.ReadFile(doc); err != nil {
		t.Fatal(err)
	}
	return &killable{t: t, p: p, pids: pids}, src, count
}

// killable is `openplaybook serve` started and killed again and again on
// one harness and store.
type killable struct {
	t    *testing.T
	p    *proc
	pids string
	cmd  *exec.Cmd
	done chan struct{}
}

// start starts the server and returns its base URL.
func (k *killable) start() string {
	k.t.Helper()
	cmd := exec.Command(k.p.bin, "serve", "--harness", k.p.harness, "--listen", "127.0.0.1:0")
	cmd.Dir, cmd.Env = k.p.dir, k.p.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		k.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	k.cmd, k.done = cmd, make(chan struct{})
	done := k.done
	k.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	found := make(chan string, 1)
	var log bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
			log.WriteString(sc.Text() + "\n")
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case base := <-found:
		return base
	case <-done:
		k.t.Fatalf("openplaybook serve exited: %s", log.String())
	case <-time.After(30 * time.Second):
		k.t.Fatal("openplaybook serve did not say where it listens within 30 s")
	}
	return ""
}

// kill kills the server with SIGKILL and waits until it and every crash
// server it started are gone.
func (k *killable) kill() {
	k.t.Helper()
	_ = k.cmd.Process.Kill()
	<-k.done
	k.waitServers()
}

// stop stops the server as a person would (SIGINT).
func (k *killable) stop() {
	k.t.Helper()
	_ = k.cmd.Process.Signal(os.Interrupt)
	select {
	case <-k.done:
	case <-time.After(10 * time.Second):
		_ = k.cmd.Process.Kill()
		<-k.done
	}
	k.waitServers()
}

// waitServers waits until no crash server that left its pid is running.
func (k *killable) waitServers() {
	k.t.Helper()
	ents, err := os.ReadDir(k.pids)
	if err != nil {
		k.t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			s := string(b)
			if err != nil || !strings.Contains(s, "(crashserver)") || strings.Contains(s, ") Z ") || strings.Contains(s, ") X ") {
				break
			}
			if time.Now().After(deadline) {
				k.t.Fatalf("crash server %d still runs 10 s after its server was killed", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
		_ = os.Remove(filepath.Join(k.pids, e.Name()))
	}
}

// api sends an operator's request and decodes the answer into out.
func api(t *testing.T, base, method, path, body string, want int, out any) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	if out != nil {
		if err := encjson.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

type crashRunStatus struct {
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Waiting []struct {
		Kind      string             `json:"kind"`
		ID        string             `json:"id"`
		Tool      string             `json:"tool"`
		Arguments encjson.RawMessage `json:"arguments"`
	} `json:"waiting"`
}

// poll reads the run until ok says it is as wanted (within 30 s).
func poll(t *testing.T, base, run, what string, ok func(crashRunStatus) bool) crashRunStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var rs crashRunStatus
	for {
		api(t, base, "GET", "/api/v1/runs/"+run, "", 200, &rs)
		if ok(rs) {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the run is %s (%s), waiting for %+v; want %s", rs.Status, rs.Reason, rs.Waiting, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitOutcomeUnknown waits until the run waits for exactly one decision,
// on an outcome-unknown append, and returns its id.
func waitOutcomeUnknown(t *testing.T, base, run string) string {
	t.Helper()
	rs := poll(t, base, run, "waiting for one outcome-unknown decision on the append", func(rs crashRunStatus) bool {
		return rs.Status == "waiting" && len(rs.Waiting) > 0
	})
	if len(rs.Waiting) != 1 || rs.Waiting[0].Kind != "outcome_unknown" || rs.Waiting[0].Tool != "mcp.crash.append" {
		t.Fatalf("the run waits for %+v, want one outcome-unknown decision on mcp.crash.append", rs.Waiting)
	}
	return rs.Waiting[0].ID
}

func waitPending(t *testing.T, base, run, kind, id string) {
	t.Helper()
	poll(t, base, run, kind+" "+id, func(rs crashRunStatus) bool {
		return rs.Status == "waiting" && len(rs.Waiting) == 1 && rs.Waiting[0].Kind == kind && rs.Waiting[0].ID == id
	})
}

func waitStatus(t *testing.T, base, run, status string) {
	t.Helper()
	poll(t, base, run, status, func(rs crashRunStatus) bool { return rs.Status == status })
}

// waitFile waits (up to 30 s) until name exists.
func waitFile(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(name); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 30 s", name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lines counts each id's lines in the crash server's count file.
func lines(t *testing.T, name string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			n[l]++
		}
	}
	return n
}

// TestServeKilledExternalAgent kills `openplaybook serve` while its
// external agent (an MCP client) has a side-effecting call in flight, and
// starts it again. The run is taken up and asks a person about exactly
// that call. The agent, reconnected, asks it again (as a client does
// whose request was cut): approved, it runs once more, and asked once
// more after that it is answered from the record. A write to the same
// tool before that waits for a person (it could be the interrupted call
// reworded); one after it runs without asking: only the interrupted call
// holds writes back. The crash server's count file says what ran.
func TestServeKilledExternalAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs and kills processes; skipped with -short")
	}
	k, src, count := newCrashServe(t, "{driver: mcp}")
	base := k.start()
	var created struct {
		Run string `json:"run"`
	}
	api(t, base, "POST", "/api/v1/runs", fmt.Sprintf(`{"document": %s}`, src), 201, &created)
	run := created.Run
	waitPending(t, base, run, "agent", run)
	var tok struct {
		Token string `json:"token"`
	}
	api(t, base, "POST", "/api/v1/runs/"+run+"/agent-token", `{}`, 201, &tok)

	cs := connectAgent(t, base, run, tok.Token)
	if text, isErr := callTool(t, cs, "mcp__crash__append", map[string]any{"id": "a1"}); isErr {
		t.Fatalf("append a1: %s", text)
	}
	go func() {
		_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcp__crash__append", Arguments: map[string]any{"id": "slow1"}})
	}()
	waitFile(t, count+".slow1.running")
	k.kill()
	_ = cs.Close()

	// The new server takes the run up: it waits for a person's decision
	// on slow1, and on nothing else.
	base = k.start()
	apr := waitOutcomeUnknown(t, base, run)
	if n := lines(t, count)["slow1"]; n != 1 {
		t.Fatalf("before anyone decided, slow1 ran %d times", n)
	}
	if err := os.WriteFile(count+".slow1.release", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	api(t, base, "POST", "/api/v1/runs/"+run+"/decisions/"+apr, `{"approve": true, "reason": "it did not happen"}`, 200, nil)

	// The agent reconnects; the step is offered again.
	cs = connectAgent(t, base, run, tok.Token)
	defer cs.Close()
	waitOffered(t, cs, "mcp__crash__append")
	// Before it asks slow1 again, a write to the same tool could be
	// slow1 reworded: it waits for a person and does not run.
	if text, isErr := callTool(t, cs, "mcp__crash__append", map[string]any{"id": "slow1b"}); !isErr || !strings.Contains(text, "pending") {
		t.Fatalf("a write to the interrupted call's tool before it was asked again: %q (isError %v), want it held for a person", text, isErr)
	}
	// Asked again, slow1 runs once more, as approved; asked once more
	// after that (the agent lost the answer), it is answered from the
	// record.
	for i := range 2 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcp__crash__append", Arguments: map[string]any{"id": "slow1"}})
		var rs crashRunStatus
		api(t, base, "GET", "/api/v1/runs/"+run, "", 200, &rs)
		if err != nil {
			t.Fatalf("slow1 asked again (%d): %v (the run is %s: %s)", i+1, err, rs.Status, rs.Reason)
		}
		if res.IsError {
			var text []string
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					text = append(text, tc.Text)
				}
			}
			t.Fatalf("slow1 asked again (%d): %q (the run is %s: %s, waiting for %+v)", i+1, text, rs.Status, rs.Reason, rs.Waiting)
		}
	}
	// A later write runs without a person: only the interrupted call
	// held writes back.
	if text, isErr := callTool(t, cs, "mcp__crash__append", map[string]any{"id": "a2"}); isErr {
		t.Fatalf("append a2 after the interrupted call was settled: %s", text)
	}
	k.stop()
	want := map[string]int{"a1": 1, "slow1": 2, "a2": 1}
	if got := lines(t, count); !maps.Equal(got, want) {
		t.Fatalf("the crash server ran %v, want %v", got, want)
	}
}

// connectAgent connects an MCP client to the run's gateway with the
// agent token, at revision 2025-11-25 (with a session).
func connectAgent(t *testing.T, base, run, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "crash-agent", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp/runs/" + run,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, sessionRevision)
	if err != nil {
		t.Fatalf("connecting the agent: %v", err)
	}
	return cs
}

// callTool calls a tool and returns its text and whether it is an error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return strings.Join(text, "\n"), res.IsError
}

// waitOffered waits (up to 30 s) until the agent is offered tool.
func waitOffered(t *testing.T, cs *mcp.ClientSession, tool string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			if tl.Name == tool {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent is not offered %s within 30 s", tool)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeRandomKills kills `openplaybook serve` (SIGKILL) again and
// again at random moments while it executes a run of many appends,
// starts it again each time, and decides what the run waits for as a
// person would: an outcome-unknown append whose line is in the crash
// server's count file is denied, one whose line is not is approved; a
// gate is approved. However the kills land, the run completes and every
// append ran exactly once (the count file, kept by the server, says so).
func TestServeRandomKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs and kills processes; skipped with -short")
	}
	// Appends take 80 ms, so that the run lasts through several kills.
	k, src, count := newCrashServeWith(t, "{driver: transcript, transcript: %q}", "random.json", "80ms")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	base := k.start()
	var created struct {
		Run string `json:"run"`
	}
	api(t, base, "POST", "/api/v1/runs", fmt.Sprintf(`{"document": %s}`, src), 201, &created)
	run := created.Run

	// decide decides what the run waits for now; it reports whether the
	// run completed.
	decide := func() bool {
		var rs struct {
			Status  string `json:"status"`
			Reason  string `json:"reason"`
			Waiting []struct {
				Kind      string             `json:"kind"`
				ID        string             `json:"id"`
				Tool      string             `json:"tool"`
				Arguments encjson.RawMessage `json:"arguments"`
			} `json:"waiting"`
		}
		api(t, base, "GET", "/api/v1/runs/"+run, "", 200, &rs)
		switch rs.Status {
		case "completed":
			return true
		case "failed", "rejected":
			t.Fatalf("the run ended %s: %s", rs.Status, rs.Reason)
		}
		for _, w := range rs.Waiting {
			switch w.Kind {
			case "gate":
				api(t, base, "POST", "/api/v1/runs/"+run+"/decisions/"+w.ID, `{"approve": true}`, 200, nil)
			case "outcome_unknown":
				var a struct {
					ID string `json:"id"`
				}
				if err := encjson.Unmarshal(w.Arguments, &a); err != nil || w.Tool != "mcp.crash.append" {
					t.Fatalf("an outcome-unknown decision on %s %s (%v): only appends are side-effecting here", w.Tool, w.Arguments, err)
				}
				approve := lines(t, count)[a.ID] == 0
				api(t, base, "POST", "/api/v1/runs/"+run+"/decisions/"+w.ID, fmt.Sprintf(`{"approve": %v}`, approve), 200, nil)
			case "resume":
				api(t, base, "POST", "/api/v1/runs/"+run+"/resume", `{}`, 202, nil)
			default:
				t.Fatalf("the run waits for %s %s; this playbook asks for nothing else", w.Kind, w.ID)
			}
		}
		return false
	}

	const wantKills = 12
	kills := 0
	for budget := time.Now().Add(30 * time.Second); kills < wantKills && time.Now().Before(budget); kills++ {
		time.Sleep(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
		k.kill()
		for id, n := range lines(t, count) {
			if n > 1 {
				t.Fatalf("after kill %d, append %s ran %d times", kills+1, id, n)
			}
		}
		base = k.start()
		if decide() {
			break
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for !decide() {
		if time.Now().After(deadline) {
			t.Fatal("the run did not complete within 60 s of the last kill")
		}
		time.Sleep(20 * time.Millisecond)
	}
	k.stop()
	t.Logf("%d kills", kills)
	if kills < 3 {
		t.Errorf("only %d kills landed before the run completed; the test proves little", kills)
	}
	want := map[string]int{}
	for _, id := range []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "b1", "b2", "b3", "b4", "b5", "b6"} {
		want[id] = 1
	}
	if got := lines(t, count); !maps.Equal(got, want) {
		t.Fatalf("the crash server ran %v, want each append once", got)
	}
	if out, errs, code := k.p.cli("audit", "--verify", run); code != 0 || !strings.Contains(out, "chain verifies") {
		t.Fatalf("audit --verify: exit %d\n%s%s", code, out, errs)
	}
}
