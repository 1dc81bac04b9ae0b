package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/serve"
)

// memoryHarness binds the reference memory server (its graph in
// DIR/memory.jsonl) and agent "outside" to driver mcp; the test adds the
// store of the engine under test (teststore).
const memoryHarness = `mcpServers:
  memory:
    command: node
    args: [ROOT/node_modules/@modelcontextprotocol/server-memory/dist/index.js]
    env: {MEMORY_FILE_PATH: DIR/memory.jsonl}
agents:
  outside: {driver: mcp}
`

// inspector runs the MCP inspector's CLI (npm @modelcontextprotocol/
// inspector) against url with the agent token, one invocation: it opens
// a session (initialize), does what args say, and closes it.
type inspector struct {
	t     *testing.T
	node  string
	entry string
	home  string
	url   string
	token string
}

func newInspector(t *testing.T, url, token string) *inspector {
	return &inspector{t: t, node: node22(t), entry: npmEntry(t, "@modelcontextprotocol/inspector/clients/launcher/build/index.js"),
		home: t.TempDir(), url: url, token: token}
}

// run returns the invocation's JSON output (stdout, or the error
// envelope on stderr) and exit code.
func (in *inspector) run(args ...string) (map[string]any, int) {
	in.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args = append([]string{in.entry, "--cli", in.url, "--transport", "http",
		"--header", "Authorization: Bearer " + in.token, "--stored-auth-only", "--format", "json", "-q"}, args...)
	cmd := exec.CommandContext(ctx, in.node, args...)
	// Its catalog and storage go to a temporary home.
	cmd.Env = append(os.Environ(), "HOME="+in.home, "PATH="+filepath.Dir(in.node)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		in.t.Fatalf("inspector %v: %v", args, err)
	}
	text := out.Bytes()
	if len(bytes.TrimSpace(text)) == 0 {
		text = errb.Bytes()
	}
	var v map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(text), &v); err != nil {
		in.t.Fatalf("inspector %v: exit %d, output not JSON: %v\nstdout: %s\nstderr: %s", args[6:], code, err, out.String(), errb.String())
	}
	return v, code
}

func toolNames(v map[string]any) []string {
	res, _ := v["result"].(map[string]any)
	tools, _ := res["tools"].([]any)
	var names []string
	for _, tl := range tools {
		if m, ok := tl.(map[string]any); ok {
			names = append(names, m["name"].(string))
		}
	}
	slices.Sort(names)
	return names
}

// callResult returns the text of a tools/call result and its isError.
func callResult(v map[string]any) (string, bool) {
	res, _ := v["result"].(map[string]any)
	var text []string
	cs, _ := res["content"].([]any)
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok && m["type"] == "text" {
			text = append(text, m["text"].(string))
		}
	}
	isErr, _ := res["isError"].(bool)
	return strings.Join(text, "\n"), isErr
}

// TestInspectorIsTheAgent: the MCP inspector's CLI, one session per
// invocation as a scripted client uses it, is the agent of a real
// `openplaybook serve` process's run. It is offered exactly the step's
// allowed tools, an allowed call runs at the real memory server, a call
// outside the list is refused and never reaches it, and finishing the
// step completes the run.
func TestInspectorIsTheAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts processes")
	}
	npmEntry(t, "@modelcontextprotocol/server-memory/dist/index.js")
	node22(t)
	p := newProc(t, memoryHarness+teststore.YAML(t, "store.db", ""))
	doc, err := filepath.Abs(filepath.Join("testdata", "memory.json"))
	if err != nil {
		t.Fatal(err)
	}
	run, tok := p.createRun(doc, `{"customer":"Ada Lovelace"}`)
	url := p.serve() + "/mcp/runs/" + run
	memory := filepath.Join(p.dir, "memory.jsonl")
	in := newInspector(t, url, tok)

	// The first session attaches and resumes the run; its first
	// tools/list already shows the step's tools.
	v, code := in.run("--method", "tools/list")
	want := []string{"mcp__memory__create_entities", "mcp__memory__search_nodes", serve.FinishTool}
	if got := toolNames(v); code != 0 || !slices.Equal(got, want) {
		t.Fatalf("tools/list: exit %d, tools %v, want %v (%v)", code, got, want, v)
	}

	v, code = in.run("--method", "tools/call", "--tool-name", "mcp__memory__create_entities",
		"--tool-args-json", `{"entities":[{"name":"Ada Lovelace","entityType":"customer","observations":["recorded by the inspector"]}]}`)
	if text, isErr := callResult(v); code != 0 || isErr || !strings.Contains(text, "Ada Lovelace") {
		t.Fatalf("create_entities: exit %d, %v", code, v)
	}
	if b, _ := os.ReadFile(memory); !strings.Contains(string(b), `"name":"Ada Lovelace"`) {
		t.Fatalf("the memory graph after create_entities: %q", b)
	}
	v, code = in.run("--method", "tools/call", "--tool-name", "mcp__memory__search_nodes", "--tool-arg", "query=Ada")
	if text, isErr := callResult(v); code != 0 || isErr || !strings.Contains(text, "recorded by the inspector") {
		t.Fatalf("search_nodes: exit %d, %v", code, v)
	}

	// The inspector itself sends no call for a tool it was not offered
	// (exit 5, tool_not_found)...
	v, code = in.run("--method", "tools/call", "--tool-name", "mcp__memory__delete_entities", "--tool-args-json", `{"entityNames":["Ada Lovelace"]}`)
	if e, _ := v["error"].(map[string]any); code != 5 || e["code"] != "tool_not_found" {
		t.Fatalf("the inspector calling an unlisted tool: exit %d, %v", code, v)
	}
	// ... so a client that does send one is a raw JSON-RPC session: the
	// gateway refuses the call with the reason, and it never runs.
	raw := newRawSession(t, url, tok)
	text, isErr := raw.callTool("mcp__memory__delete_entities", `{"entityNames":["Ada Lovelace"]}`)
	if !isErr || !strings.Contains(text, "mcp.memory.delete_entities") || !strings.Contains(text, "not") {
		t.Fatalf("a call outside allowedTools: %q (isError %v)", text, isErr)
	}
	if b, _ := os.ReadFile(memory); !strings.Contains(string(b), `"name":"Ada Lovelace"`) {
		t.Fatalf("the refused delete_entities reached the memory server: graph %q", b)
	}

	v, code = in.run("--method", "tools/call", "--tool-name", serve.FinishTool, "--tool-args-json", `{"output":{"entity":"Ada Lovelace"}}`)
	if text, isErr := callResult(v); code != 0 || isErr {
		t.Fatalf("finish: exit %d, %s", code, text)
	}
	deadline := time.Now().Add(20 * time.Second)
	for st := p.statusOf(run); st != "completed"; st = p.statusOf(run) {
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s, want completed", run, st)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The audit says the same: two calls succeeded, one was refused, and
	// the chain verifies.
	out, errs, code := p.cli("audit", "--format", "json", "--verify", run)
	var au struct {
		Verified bool `json:"verified"`
		Records  []struct {
			Kind string `json:"kind"`
		} `json:"records"`
	}
	if err := json.Unmarshal([]byte(out), &au); err != nil || code != 0 || !au.Verified {
		t.Fatalf("audit --verify: exit %d, %v\n%s%s", code, err, out, errs)
	}
	count := map[string]int{}
	for _, r := range au.Records {
		count[r.Kind]++
	}
	// Each inspector invocation is a session of the one token: they are
	// recorded once per step attempt and once per time between steps
	// (before the first, the gate), so at most 4 times.
	if count["call.succeeded"] != 2 || count["call.refused"] != 1 || count["run.completed"] != 1 || count["agent.attached"] < 1 || count["agent.attached"] > 4 {
		t.Fatalf("audit record kinds: %v", count)
	}
}

// rawSession is a hand-written streamable HTTP MCP client: it sends
// what a well-behaved SDK client would not.
type rawSession struct {
	t       *testing.T
	url     string
	token   string
	session string
	id      int
}

func newRawSession(t *testing.T, url, token string) *rawSession {
	r := &rawSession{t: t, url: url, token: token}
	r.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw-test-client","version":"1"}}}`)
	r.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

// post sends one message and returns the JSON-RPC response to it (nil
// for a notification).
func (r *rawSession) post(msg string) map[string]any {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.url, strings.NewReader(msg))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+r.token)
	if r.session != "" {
		req.Header.Set("Mcp-Session-Id", r.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		r.session = s
	}
	if resp.StatusCode == http.StatusAccepted {
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("POST %s: %s", msg, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if data, ok := strings.CutPrefix(line, "data: "); ok || strings.HasPrefix(line, "{") {
			if !ok {
				data = line
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(data), &v); err == nil && v["id"] != nil {
				return v
			}
		}
	}
	r.t.Fatalf("POST %s: no response in the body", msg)
	return nil
}

func (r *rawSession) callTool(name, args string) (string, bool) {
	r.t.Helper()
	r.id++
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": r.id, "method": "tools/call",
		"params": map[string]any{"name": name, "arguments": json.RawMessage(args)}})
	v := r.post(string(b))
	if v["error"] != nil {
		r.t.Fatalf("tools/call %s: JSON-RPC error %v", name, v["error"])
	}
	return callResult(v)
}
