package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
)

// The secret value every check test uses; it must never be printed.
const checkSecret = "sk_test_Zq9WvX2mB7nK4pL8rT3yUc6e"

// checkEnv writes a harness into a temporary directory binding: memory
// (the real server-memory), changing (the go-sdk test server whose tool
// changes, at the given variant; skipped when variant is ""), broken (a
// server that writes to stderr and exits), and stripe on stripe-mock. It
// returns the harness path and the directory.
func checkEnv(t *testing.T, variant string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	mem := mcptest.MemoryServer(t, "memory")
	stripeURL := stripemock.Start(t)
	t.Setenv("STRIPE_API_KEY", checkSecret)
	t.Setenv("BROKEN_TOKEN", checkSecret+"broken")
	var b strings.Builder
	fmt.Fprintf(&b, "mcpServers:\n  memory:\n    command: %q\n    args: [%q]\n    env: {MEMORY_FILE_PATH: %q}\n", mem.Command, mem.Args[0], mem.Env["MEMORY_FILE_PATH"])
	if variant != "" {
		bin := changingBin(t)
		fmt.Fprintf(&b, "  changing:\n    command: %q\n    env: {VARIANT: %q}\n", bin, variant)
	}
	fmt.Fprintf(&b, "  broken:\n    command: %q\n    args: [\"-e\", \"console.error('boom: cannot open the database'); process.exit(3)\"]\n    env: {TOKEN: \"${secret:BROKEN_TOKEN}\"}\n    timeout: 5s\n", mem.Command)
	fmt.Fprintf(&b, "connections:\n  stripe:\n    authKind: api_token\n    secrets: {apiKey: STRIPE_API_KEY}\n    baseURL: %s\n", stripeURL)
	b.WriteString("agents:\n  lou: {driver: transcript, transcript: t.json}\n")
	if err := os.WriteFile(filepath.Join(dir, "t.json"), []byte(`{"steps": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "harness.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

var changingBinPath string

func changingBin(t *testing.T) string {
	if changingBinPath == "" {
		changingBinPath = mcptest.BuildChangingServer(t)
		// BuildChangingServer's directory belongs to the first test; copy
		// the binary somewhere that outlives it.
		dst := filepath.Join(os.TempDir(), fmt.Sprintf("openplaybook-changing-%d", os.Getpid()))
		src, err := os.ReadFile(changingBinPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, src, 0o755); err != nil {
			t.Fatal(err)
		}
		changingBinPath = dst
	}
	return changingBinPath
}

// mcpDoc is a minimal 1.6 document whose one agent step allows the given
// MCP tools of server, each embedded with the given JSON definition body
// (everything but name and source).
func mcpDoc(server string, secrets []string, tools map[string]string) string {
	var defs, names []string
	for name, body := range tools {
		defs = append(defs, fmt.Sprintf(`{"name": %q, "source": "mcp", %s}`, name, body))
		names = append(names, fmt.Sprintf("%q", name))
	}
	var secs []string
	for _, s := range secrets {
		secs = append(secs, fmt.Sprintf(`{"name": %q, "purpose": "needed"}`, s))
	}
	return fmt.Sprintf(`{
  "openplaybook": "1.6",
  "manifest": {"id": "check-test", "name": "Check test", "version": "1.0.0", "description": "d", "requiredConnectors": []},
  "requires": {"connections": [], "mcpServers": [{"name": %q, "toolNames": [%s]}], "secrets": [%s]},
  "tools": [%s],
  "steps": [{"id": "work", "kind": "agent", "agent": "lou", "purpose": "p", "allowedTools": [%s]}]
}
`, server, strings.Join(names, ", "), strings.Join(secs, ", "), strings.Join(defs, ",\n"), strings.Join(names, ", "))
}

func writeDoc(t *testing.T, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkJSON runs check --format json and returns the exit code and the
// diagnostics; it fails the test if any secret value is printed.
func checkJSON(t *testing.T, args ...string) (int, []diag.Diagnostic) {
	t.Helper()
	code, out, errOut := run(t, nil, append([]string{"check", "--format", "json"}, args...)...)
	for _, s := range []string{out, errOut} {
		if strings.Contains(s, checkSecret) {
			t.Fatalf("a secret value was printed:\n%s", s)
		}
	}
	var ds []diag.Diagnostic
	if err := json.Unmarshal([]byte(out), &ds); err != nil {
		t.Fatalf("check output is not the JSON array of diagnostics (exit %d): %v\n%s\n%s", code, err, out, errOut)
	}
	return code, ds
}

func find(ds []diag.Diagnostic, rule, pointerPrefix string, sev diag.Severity, contains ...string) *diag.Diagnostic {
	for i, d := range ds {
		if d.Rule != rule || d.Severity != sev || !strings.HasPrefix(d.Pointer, pointerPrefix) {
			continue
		}
		ok := true
		for _, c := range contains {
			ok = ok && strings.Contains(d.Message, c)
		}
		if ok {
			return &ds[i]
		}
	}
	return nil
}

func dump(ds []diag.Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "  %s %s [%s] %s\n", d.Severity, d.Pointer, d.Rule, d.Message)
	}
	return b.String()
}

const plainOut = `"description": "d", "permissions": [], "outputSchema": {"type": "object"}`

// TestCheckDriftDestructiveToolDocumentedAsRead: server-memory marks
// delete_entities destructive; a document saying riskClass read fails
// check with a drift error naming the tool and the field.
func TestCheckDriftDestructiveToolDocumentedAsRead(t *testing.T) {
	h, dir := checkEnv(t, "")
	doc := writeDoc(t, dir, "doc.json", mcpDoc("memory", nil, map[string]string{
		"mcp.memory.delete_entities": plainOut + `, "riskClass": "read", "sideEffecting": false, "requiresApproval": false,
		  "inputSchema": {"type": "object", "properties": {"entityNames": {"type": "array", "items": {"type": "string"}}}, "required": ["entityNames"]}`,
	}))
	code, ds := checkJSON(t, "--harness", h, doc)
	if code != ExitProblems {
		t.Fatalf("exit %d, want 1:\n%s", code, dump(ds))
	}
	if find(ds, "drift-side-effecting", "/tools/0/sideEffecting", diag.Error, "mcp.memory.delete_entities") == nil ||
		find(ds, "drift-risk-class", "/tools/0/riskClass", diag.Error, "mcp.memory.delete_entities") == nil {
		t.Errorf("want drift errors on riskClass and sideEffecting naming the tool, got:\n%s", dump(ds))
	}
}

// TestCheckDriftInputSchemaLacksRequiredProperty: a document whose input
// schema lacks a property the server requires fails check naming it.
func TestCheckDriftInputSchemaLacksRequiredProperty(t *testing.T) {
	h, dir := checkEnv(t, "")
	doc := writeDoc(t, dir, "doc.json", mcpDoc("memory", nil, map[string]string{
		"mcp.memory.create_entities": plainOut + `, "riskClass": "internal", "sideEffecting": true, "dataScopeWrites": ["memory.graph"],
		  "inputSchema": {"type": "object", "properties": {}}`,
	}))
	code, ds := checkJSON(t, "--harness", h, doc)
	if code != ExitProblems {
		t.Fatalf("exit %d, want 1:\n%s", code, dump(ds))
	}
	if find(ds, "drift-input-schema", "/tools/0/inputSchema", diag.Error, "mcp.memory.create_entities", "entities") == nil {
		t.Errorf("want a drift-input-schema error naming the property \"entities\", got:\n%s", dump(ds))
	}
}

// TestCheckPreflight: a missing secret, a tool the live server does not
// list and a server that cannot start each give their own preflight error;
// no secret value is printed (checkJSON fails otherwise).
func TestCheckPreflight(t *testing.T) {
	h, dir := checkEnv(t, "")
	search := `"riskClass": "read", "sideEffecting": false, "description": "d", "permissions": [], "outputSchema": {"type": "object"}, "inputSchema": {"type": "object"}`
	missing := writeDoc(t, dir, "missing-secret.json", mcpDoc("memory", []string{"NO_SUCH_SECRET_FOR_TEST"}, map[string]string{"mcp.memory.search_nodes": search}))
	undeclared := writeDoc(t, dir, "undeclared.json", mcpDoc("memory", nil, map[string]string{"mcp.memory.search_nodez": search}))
	broken := writeDoc(t, dir, "broken.json", mcpDoc("broken", nil, map[string]string{"mcp.broken.anything": search}))
	code, ds := checkJSON(t, "--harness", h, missing, undeclared, broken)
	if code != ExitProblems {
		t.Fatalf("exit %d, want 1:\n%s", code, dump(ds))
	}
	in := func(file string) []diag.Diagnostic {
		var out []diag.Diagnostic
		for _, d := range ds {
			if filepath.Base(d.File) == file {
				out = append(out, d)
			}
		}
		return out
	}
	if find(in("missing-secret.json"), "preflight-secret", "/requires/secrets/0/name", diag.Error, "NO_SUCH_SECRET_FOR_TEST") == nil {
		t.Errorf("missing secret: no preflight-secret error:\n%s", dump(ds))
	}
	if find(in("undeclared.json"), "preflight-mcp-tool", "/requires/mcpServers/0/toolNames/0", diag.Error, "search_nodez", `did you mean "mcp.memory.search_nodes"`) == nil {
		t.Errorf("undeclared tool: no preflight-mcp-tool error with a suggestion:\n%s", dump(ds))
	}
	if find(in("broken.json"), "preflight-mcp-server", "/requires/mcpServers/0/name", diag.Error, "boom: cannot open the database") == nil {
		t.Errorf("broken server: no preflight-mcp-server error with its stderr:\n%s", dump(ds))
	}
}

// TestCheckChangingServer: a document pinned against variant a of the
// test server, checked against variant b, reports each change at its
// level: a newly required input property and a new side effect are
// errors, the description change a warning.
func TestCheckChangingServer(t *testing.T) {
	ha, dir := checkEnv(t, "a")
	doc := writeDoc(t, dir, "doc.json", mcpDoc("changing", nil, map[string]string{
		"mcp.changing.probe": `"description": "x", "permissions": [], "riskClass": "read", "sideEffecting": false, "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}`,
	}))
	if code, out, errOut := run(t, nil, "pin", "--harness", ha, "--write", doc); code != ExitOK {
		t.Fatalf("pin --write: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, ds := checkJSON(t, "--harness", ha, doc); code != ExitOK {
		t.Fatalf("pinned document does not pass check against variant a:\n%s", dump(ds))
	}
	hb := strings.Replace(mustRead(t, ha), `VARIANT: "a"`, `VARIANT: "b"`, 1)
	hbPath := writeDoc(t, dir, "harness-b.yaml", hb)
	code, ds := checkJSON(t, "--harness", hbPath, doc)
	if code != ExitProblems {
		t.Fatalf("exit %d, want 1:\n%s", code, dump(ds))
	}
	for _, want := range []struct {
		rule, ptr string
		sev       diag.Severity
		text      string
	}{
		{"drift-input-schema", "/tools/0/inputSchema", diag.Error, "force"},
		{"drift-side-effecting", "/tools/0/sideEffecting", diag.Error, "mcp.changing.probe"},
		{"drift-description", "/tools/0/description", diag.Warning, "variant b"},
	} {
		if find(ds, want.rule, want.ptr, want.sev, want.text) == nil {
			t.Errorf("no %s %s at %s mentioning %q:\n%s", want.sev, want.rule, want.ptr, want.text, dump(ds))
		}
	}
}

// TestPinAddsAndAligns: pin adds the definition of an allowed tool the
// registry knows and the document does not embed, lists it in toolNames,
// keeps every other byte, and a second pin finds the document in line.
func TestPinAddsAndAligns(t *testing.T) {
	h, dir := checkEnv(t, "")
	src := mcpDoc("memory", nil, map[string]string{
		"mcp.memory.read_graph": `"description": "old text", "permissions": ["memory:read"], "riskClass": "read", "sideEffecting": false, "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}`,
	})
	src = strings.Replace(src, `"allowedTools": ["mcp.memory.read_graph"]`, `"allowedTools": ["mcp.memory.read_graph", "mcp.memory.open_nodes"]`, 1)
	doc := writeDoc(t, dir, "doc.json", src)
	code, out, errOut := run(t, nil, "pin", "--harness", h, doc)
	if code != ExitProblems || !strings.Contains(out, "+++ b/") || !strings.Contains(errOut, "mcp.memory.open_nodes: added from the registry") {
		t.Fatalf("pin without --write: exit %d, want 1 with a diff\n%s\n%s", code, out, errOut)
	}
	if mustRead(t, doc) != src {
		t.Fatal("pin without --write changed the file")
	}
	if code, out, errOut := run(t, nil, "pin", "--harness", h, "--write", doc); code != ExitOK {
		t.Fatalf("pin --write: exit %d\n%s\n%s", code, out, errOut)
	}
	pinned := mustRead(t, doc)
	if !strings.HasPrefix(pinned, src[:strings.Index(src, `"requires"`)]) {
		t.Error("pin changed bytes before the requires block")
	}
	steps := src[strings.Index(src, `"steps"`):]
	if !strings.HasSuffix(pinned, steps) {
		t.Error("pin changed the steps")
	}
	for _, want := range []string{`"toolNames": ["mcp.memory.read_graph", "mcp.memory.open_nodes"]`, `"name": "mcp.memory.open_nodes"`, `"permissions": ["memory:read"]`} {
		if !strings.Contains(pinned, want) {
			t.Errorf("pinned document lacks %s:\n%s", want, pinned)
		}
	}
	if strings.Contains(pinned, "old text") {
		t.Error("the description was not taken from the registry")
	}
	if code, ds := checkJSON(t, "--harness", h, doc); code != ExitOK || find(ds, "drift-description", "", diag.Warning) != nil {
		t.Errorf("pinned document: exit %d\n%s", code, dump(ds))
	}
	if code, _, errOut := run(t, nil, "pin", "--harness", h, doc); code != ExitOK || !strings.Contains(errOut, "in line") {
		t.Errorf("second pin: exit %d\n%s", code, errOut)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPinRefusesABrokenHarness: a harness with errors contacts nothing, so
// pin must not report a document "in line" against it.
func TestPinRefusesABrokenHarness(t *testing.T) {
	dir := t.TempDir()
	h := writeDoc(t, dir, "h.yaml", "bogus: 1\n")
	doc := writeDoc(t, dir, "doc.json", mcpDoc("memory", nil, map[string]string{
		"mcp.memory.read_graph": `"description": "d", "permissions": [], "riskClass": "read", "sideEffecting": false, "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}`,
	}))
	code, _, errOut := run(t, nil, "pin", "--harness", h, "--write", doc)
	if code != ExitUsage || !strings.Contains(errOut, "harness-unknown-key") || strings.Contains(errOut, "in line") {
		t.Fatalf("pin with a broken harness: exit %d\n%s", code, errOut)
	}
}

// TestCheckHarnessAlone: check with --harness and no DOC checks the
// harness alone, every binding positioned in the harness file: a server
// that cannot start is an error with its stderr, the live memory server
// and the Stripe connection on stripe-mock pass; a secret the file uses
// that is not set is reported at its use, once; a harness with an error
// in the file starts nothing.
func TestCheckHarnessAlone(t *testing.T) {
	h, dir := checkEnv(t, "")
	code, ds := checkJSON(t, "--harness", h)
	if code != ExitProblems {
		t.Fatalf("exit %d, want 1 (the broken server):\n%s", code, dump(ds))
	}
	if len(ds) != 1 || find(ds, "preflight-mcp-server", "/mcpServers/broken", diag.Error, `MCP server "broken" cannot be used`, "boom: cannot open the database") == nil ||
		ds[0].File != h || ds[0].Line != 7 {
		t.Errorf("want only the broken server's error, at line 7 of %s:\n%s", h, dump(ds))
	}
	// Text: the server's stderr line on a line of its own.
	_, out, _ := run(t, nil, "check", "--harness", h)
	if !strings.Contains(out, "\n    boom: cannot open the database\n") {
		t.Errorf("text output does not show the stderr line on its own line:\n%s", out)
	}

	// Without the broken server: clean, exit 0. The memory server was
	// started (a command that is not there fails).
	src := mustRead(t, h)
	cut := strings.Index(src, "  broken:")
	end := strings.Index(src, "connections:")
	clean := writeDoc(t, dir, "clean.yaml", src[:cut]+src[end:])
	if code, ds := checkJSON(t, "--harness", clean); code != ExitOK || len(ds) != 0 {
		t.Errorf("clean harness alone: exit %d:\n%s", code, dump(ds))
	}
	gone := writeDoc(t, dir, "gone.yaml", strings.Replace(src[:cut]+src[end:], "command: ", "command: /no/such/dir/", 1))
	if code, ds := checkJSON(t, "--harness", gone); code != ExitProblems || find(ds, "preflight-mcp-server", "/mcpServers/memory", diag.Error, "/no/such/dir/") == nil {
		t.Errorf("a server whose command is not there: exit %d:\n%s", code, dump(ds))
	}

	// An agent whose transcript is not there: an error at the agent.
	noTranscript := writeDoc(t, dir, "no-transcript.yaml", strings.Replace(src[:cut]+src[end:], "transcript: t.json", "transcript: nope.json", 1))
	if code, ds := checkJSON(t, "--harness", noTranscript); code != ExitProblems || len(ds) != 1 || find(ds, "preflight-agent", "/agents/lou", diag.Error, `agent "lou" cannot be used`, "nope.json") == nil {
		t.Errorf("an agent whose transcript is not there: exit %d:\n%s", code, dump(ds))
	}

	// A webhook's signing key, which only serve reads, unset: an error at
	// the endpoint; set, clean again.
	hooked := writeDoc(t, dir, "hooked.yaml", src[:cut]+src[end:]+
		"serve:\n  webhooks:\n    - name: ops\n      url: http://127.0.0.1:9/hook\n      signingKeySecret: CHECK_TEST_HOOK_KEY\n")
	t.Setenv("CHECK_TEST_HOOK_KEY", "")
	if code, ds := checkJSON(t, "--harness", hooked); code != ExitProblems || len(ds) != 1 ||
		find(ds, "harness-secret-missing", "/serve/webhooks/0", diag.Error, `webhook "ops"`, `"CHECK_TEST_HOOK_KEY"`, "serve refuses to start") == nil {
		t.Errorf("webhook key unset: exit %d, want one harness-secret-missing error at the endpoint:\n%s", code, dump(ds))
	}
	t.Setenv("CHECK_TEST_HOOK_KEY", "0123456789abcdef")
	if code, ds := checkJSON(t, "--harness", hooked); code != ExitOK || len(ds) != 0 {
		t.Errorf("webhook key set: exit %d:\n%s", code, dump(ds))
	}

	// The Stripe key unset: one error, at the secret's use.
	t.Setenv("STRIPE_API_KEY", "")
	code, ds = checkJSON(t, "--harness", clean)
	if code != ExitProblems || len(ds) != 1 || find(ds, "harness-secret-missing", "/connections/stripe/secrets/apiKey", diag.Error, `"STRIPE_API_KEY"`) == nil {
		t.Errorf("Stripe key unset: exit %d, want one harness-secret-missing error:\n%s", code, dump(ds))
	}

	// An error in the file: nothing is started, only the file's errors.
	bad := writeDoc(t, dir, "bad.yaml", src+"runtime: {maxToolCalls: 0}\n")
	if code, ds := checkJSON(t, "--harness", bad); code != ExitProblems || len(ds) != 1 || ds[0].Rule != "harness-value" {
		t.Errorf("harness with an error: exit %d:\n%s", code, dump(ds))
	}
}
