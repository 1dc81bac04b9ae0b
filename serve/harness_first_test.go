package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/serve"
)

// TestServeRefusesRewrittenHarnessFirst: a run started under one harness
// file, served by a server started with a rewritten one (the Stripe
// connection's baseURL on a loopback listener that counts requests, the
// memory server's command a script that writes a marker file, an unset
// secret named): the API's resume, the console's
// (ResumeRun) and an agent attaching to the run's MCP endpoint are each
// refused as "another harness", and nothing of the rewritten file was used:
// the listener saw no request, the script never ran, no secret is reported
// missing, and the run's audit log did not grow.
func TestServeRefusesRewrittenHarnessFirst(t *testing.T) {
	t.Parallel()
	root := mcptest.RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "node_modules/@modelcontextprotocol/server-memory/dist/index.js")); err != nil {
		t.Skip("the npm MCP reference servers are not installed (npm ci)")
	}
	rec := stripemock.Proxy(t, stripemock.Start(t))
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("secrets.env", []byte("STRIPE_API_KEY=sk_test_4eC39HqLyjWDarjtT1zdp7dcSERVE\nOPENPLAYBOOK_OPERATOR_TOKEN="+operatorToken+"\n"))
	orig := map[string]any{
		"mcpServers": map[string]any{"memory": map[string]any{"command": "node", "args": []string{"node_modules/@modelcontextprotocol/server-memory/dist/index.js"},
			"cwd": root, "env": map[string]any{"MEMORY_FILE_PATH": filepath.Join(dir, "memory.jsonl")}}},
		"connections": map[string]any{"stripe": map[string]any{"authKind": "api_token", "secrets": map[string]any{"apiKey": "STRIPE_API_KEY"}, "baseURL": rec.URL}},
		"secrets":     map[string]any{"env": false, "dotenv": []string{"secrets.env"}},
		"agents":      map[string]any{"rita": map[string]any{"driver": "mcp"}},
		"store":       teststore.Section(t, "store.db"),
	}
	orig["store"].(map[string]any)["seed"] = filepath.Join(root, "examples/data/customers.json")
	hb, _ := json.Marshal(orig)
	hp := write("harness.json", hb)
	doc, err := os.ReadFile(filepath.Join(root, "examples/refund-review.json"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Started under the original harness: it waits for its agent.
	lh, err := launch.Load(hp)
	if err != nil {
		t.Fatal(err)
	}
	st, err := host.OpenStore(ctx, lh.H)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	first, err := serve.New(serve.Options{Harness: lh, Store: st, BaseURL: "http://127.0.0.1:1", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	run, ds, err := first.CreateRun(ctx, "refund-review.json", doc, []byte(`{"customerId":"cus_ada","chargeId":"ch_duplicate","message":"I was charged twice."}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	deadline := time.Now().Add(30 * time.Second)
	for first.Runner().Executing(run) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	first.Close()
	if rs, err := first.Run(ctx, run); err != nil || rs.Status != "waiting" {
		t.Fatalf("the run under the original harness: %+v %v, want waiting for its agent", rs, err)
	}
	before, err := st.Audit(ctx, run)
	if err != nil {
		t.Fatal(err)
	}

	// The harness rewritten, and a server started with it.
	var hits atomic.Int64
	listener := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "not Stripe", http.StatusTeapot)
	}))
	defer listener.Close()
	marker := filepath.Join(dir, "server-started")
	script := write("server.sh", []byte("#!/bin/sh\necho started >> '"+marker+"'\nexit 1\n"))
	orig["connections"].(map[string]any)["stripe"].(map[string]any)["baseURL"] = listener.URL
	orig["mcpServers"] = map[string]any{"memory": map[string]any{"command": script}}
	// An unset secret, named where only the harness names it (the
	// document requires no linear connection).
	orig["connections"].(map[string]any)["linear"] = map[string]any{"authKind": "api_token", "secrets": map[string]any{"apiKey": "HOSTILE_UNSET_SECRET_Q7"}}
	orig["secrets"] = map[string]any{"env": true, "dotenv": []string{"secrets.env"}}
	hb, _ = json.Marshal(orig)
	write("harness.json", hb)
	lh2, err := launch.Load(hp)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	ts.Start()
	defer ts.Close()
	srv, err := serve.New(serve.Options{Harness: lh2, Store: st, BaseURL: ts.URL, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts.Config.Handler = srv

	refused := func(how, msg string) {
		t.Helper()
		if !strings.Contains(msg, "run "+run+" was last run with another harness") {
			t.Errorf("%s under the rewritten harness: want the another-harness refusal, got %q", how, msg)
		}
		for _, leak := range []string{"HOSTILE_UNSET_SECRET_Q7", "preflight"} {
			if strings.Contains(msg, leak) {
				t.Errorf("%s used the rewritten harness before refusing: it says %q: %s", how, leak, msg)
			}
		}
	}

	// The console's resume.
	_, err = srv.ResumeRun(ctx, run)
	if !errors.Is(err, runtime.ErrHarnessChanged) {
		t.Errorf("ResumeRun: %v, want runtime.ErrHarnessChanged", err)
	}
	refused("ResumeRun", errString(err))

	// The API's: 409.
	req, _ := http.NewRequest("POST", ts.URL+"/api/v1/runs/"+run+"/resume", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("POST resume: %d %s, want 409", resp.StatusCode, body)
	}
	refused("POST /api/v1/runs/{run}/resume", string(body))

	// An agent attaching to the run's endpoint resumes it (Kick): refused,
	// said as the run's progress.
	events, stop := srv.Events().Subscribe(run)
	defer stop()
	tok, err := srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, dir: dir, srv: srv, ts: ts, st: st}
	ag := r.connect(tok.MCPURL, tok.Token)
	said := ""
	for wait := time.After(30 * time.Second); said == ""; {
		select {
		case ev := <-events:
			if ev.Type == "progress" && strings.Contains(ev.Text, "harness") {
				said = ev.Text
			}
		case <-wait:
			t.Fatal("an agent attached, and the server said nothing about the run's harness in 30 s")
		}
	}
	refused("an agent attaching", said)
	// The agent itself is told why nothing waits for it.
	res, err := ag.cs.CallTool(ctx, &mcp.CallToolParams{Name: "openplaybook_finish_step", Arguments: map[string]any{"output": map[string]any{}}})
	if err != nil || !res.IsError {
		t.Fatalf("finish_step on the refused run: %+v %v, want a tool error", res, err)
	}
	refused("the agent's finish_step", resultText(res))

	if n := hits.Load(); n != 0 {
		t.Errorf("the rewritten harness's Stripe baseURL got %d requests", n)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the rewritten harness's MCP server command was started")
	}
	after, err := st.Audit(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range after[len(before):] {
		if a.Kind != string(runtime.KindAgentTokenIssued) && a.Kind != string(runtime.KindAgentAttached) {
			t.Errorf("the refusals recorded %s", a.Kind)
		}
	}
	if rs, err := srv.Run(ctx, run); err != nil || rs.Status != "waiting" {
		t.Errorf("the run after the refusals: %+v %v, want still waiting", rs, err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
