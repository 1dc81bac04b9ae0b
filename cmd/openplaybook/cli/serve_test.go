package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
)

func TestServeUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--harness", "x.yaml", "--listen", "0.0.0.0:7420"}, "not a loopback address"},
		{[]string{"serve", "--harness", "x.yaml", "--listen", "192.168.1.10:7420"}, "--insecure-listen"},
		{[]string{"serve", "--harness", "x.yaml", "--tls-cert", "c.pem"}, "go together"},
		{[]string{"serve", "--harness", "x.yaml", "--listen", "7420"}, "host:port"},
		{[]string{"mcp", "--harness", "x.yaml"}, "--run"},
	} {
		code, _, errs := run(t, nil, c.args...)
		if code != ExitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
}

// externalHarness writes a harness binding agent "outside" to driver mcp.
func externalHarness(t *testing.T) string {
	t.Helper()
	root, _ := filepath.Abs("../../..")
	if _, err := os.Stat(filepath.Join(root, "node_modules/@modelcontextprotocol/server-memory/dist/index.js")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("the npm MCP reference servers are not installed (npm ci)")
		}
		t.Skip("the npm MCP reference servers are not installed (npm ci)")
	}
	dir := t.TempDir()
	h := `mcpServers:
  memory:
    command: node
    args: [node_modules/@modelcontextprotocol/server-memory/dist/index.js]
    cwd: ` + root + `
    env: {MEMORY_FILE_PATH: ` + filepath.Join(dir, "memory.jsonl") + `}
agents:
  outside: {driver: mcp}
store:
  seed: ` + filepath.Join(root, "examples/data/customers.json") + `
`
	p := filepath.Join(dir, "harness.yaml")
	if err := os.WriteFile(p, []byte(h), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunWaitsForItsAgent: run of a playbook whose step is bound to driver
// mcp stops with the run waiting for its agent (exit 3); agent-token
// issues a token once, and serve without the operator token refuses to
// start, naming the secret.
func TestRunWaitsForItsAgent(t *testing.T) {
	h := externalHarness(t)
	code, out, errs := run(t, nil, "run", "--harness", h, "-f", "json", "--input", `{"customerId":"cus_ada"}`, "../../../serve/testdata/agent.json")
	if code != ExitWaiting {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	var o struct {
		Run     string `json:"run"`
		Status  string `json:"status"`
		Waiting []struct {
			Kind string `json:"kind"`
		} `json:"waiting"`
	}
	if err := json.Unmarshal([]byte(out), &o); err != nil || o.Status != "waiting" || len(o.Waiting) != 1 || o.Waiting[0].Kind != "agent" {
		t.Fatalf("run printed %s (%v)", out, err)
	}
	// In text, run and status say how to connect the agent, and name no
	// approve command: a person has nothing to decide.
	code, text, errs := run(t, nil, "run", "--harness", h, "--input", `{"customerId":"cus_ada"}`, "../../../serve/testdata/agent.json")
	if code != ExitWaiting || strings.Contains(text, "openplaybook approve") || !strings.Contains(text, "openplaybook mcp --harness "+h+" --run run_") {
		t.Fatalf("run (text): exit %d\n%s\n%s", code, text, errs)
	}
	code, text, errs = run(t, nil, "status", "--harness", h, o.Run)
	if code != 0 && code != ExitWaiting || strings.Contains(text, "openplaybook approve") || !strings.Contains(text, "openplaybook mcp --harness "+h+" --run "+o.Run) {
		t.Fatalf("status (text): exit %d\n%s\n%s", code, text, errs)
	}
	code, tok, errs := run(t, nil, "agent-token", "--harness", h, o.Run)
	if code != 0 || !strings.HasPrefix(tok, "opa_") || !strings.Contains(errs, "openplaybook mcp") {
		t.Fatalf("agent-token: exit %d %q %q", code, tok, errs)
	}
	code, out, _ = run(t, nil, "agent-token", "--harness", h, "--revoke", "-f", "json", o.Run)
	if code != 0 || !strings.Contains(out, `"revoked":1`) {
		t.Fatalf("revoke: exit %d %s", code, out)
	}
	t.Setenv("OPENPLAYBOOK_OPERATOR_TOKEN", "")
	code, _, errs = run(t, nil, "serve", "--harness", h, "--listen", "127.0.0.1:0")
	if code != ExitProblems || !strings.Contains(errs, "OPENPLAYBOOK_OPERATOR_TOKEN") {
		t.Fatalf("serve without the operator token: exit %d %q", code, errs)
	}
}

// A document without a manifest is refused with its diagnostics, never a
// crash (exit 1, not 70).
func TestRunDocumentWithoutManifest(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bare.json")
	if err := os.WriteFile(p, []byte(`{"openplaybook":"1.6","steps":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(t, nil, "run", "--harness", "../../../examples/harness.yaml", p)
	if code != ExitProblems || !strings.Contains(errs, `missing required member "manifest"`) {
		t.Fatalf("exit %d: %s", code, errs)
	}
}
