package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/explain"
)

// TestExplainHarness: explain --harness checks the tool definitions of
// support-triage against a harness with the real server-memory: the
// built-ins are confirmed, the memory tools' undeclared-by-MCP values are
// claims. Without the flag nothing is consulted, even when a harness
// would be found for other commands; a harness with errors is exit 2.
func TestExplainHarness(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t, rtConfig{memory: true})
	doc := rtExample(t, "support-triage.json")

	out, _ := e.cli(ExitOK, "explain", "-f", "json", doc)
	var x explain.Explanation
	if err := json.Unmarshal([]byte(out), &x); err != nil {
		t.Fatal(err)
	}
	if !x.Registry.Consulted || !strings.Contains(x.Registry.Source, e.harness) || !strings.Contains(x.Registry.Source, "MCP servers memory") || len(x.Registry.Unavailable) != 0 {
		t.Errorf("registry %+v", x.Registry)
	}
	tools := map[string]explain.Tool{}
	for _, st := range x.Steps {
		for _, tl := range st.AllowedTools {
			tools[tl.Name] = tl
		}
	}
	if tl := tools["note.add"]; tl.InRegistry != "builtin" || tl.Claims == nil || len(tl.Claims) != 0 {
		t.Errorf("note.add: in registry %q, claims %v; want builtin, []", tl.InRegistry, tl.Claims)
	}
	if tl := tools["mcp.memory.search_nodes"]; tl.InRegistry != "mcp server memory" || !slices.Contains(tl.Claims, "permissions") || slices.Contains(tl.Claims, "description") {
		t.Errorf("mcp.memory.search_nodes: in registry %q, claims %v", tl.InRegistry, tl.Claims)
	}
	text, _ := e.cli(ExitOK, "explain", doc)
	if !strings.Contains(text, "Checked against the registry of "+e.harness) || !strings.Contains(text, "* claims the registry (mcp server memory) does not confirm:") {
		t.Errorf("text with --harness:\n%s", text)
	}

	// Without --harness: nothing consulted, though $OPENPLAYBOOK_HARNESS
	// names a harness.
	env := func(k string) string {
		if k == HarnessEnv {
			return e.harness
		}
		return ""
	}
	code, out, stderr := runIn(&CLI{Getenv: env}, "explain", "-f", "json", doc)
	x = explain.Explanation{}
	if err := json.Unmarshal([]byte(out), &x); code != ExitOK || err != nil || x.Registry.Consulted {
		t.Errorf("explain without --harness: exit %d, consulted %v, %v\n%s", code, x.Registry.Consulted, err, stderr)
	}
	for _, st := range x.Steps {
		for _, tl := range st.AllowedTools {
			if tl.Claims != nil {
				t.Errorf("without a registry %s has claims %v", tl.Name, tl.Claims)
			}
		}
	}

	bad := e.write("bad.yaml", "store: {sqlite: x.db}\nmcpServer: {}\n")
	code, out, stderr = runIn(&CLI{Getenv: noEnv}, "explain", "--harness", bad, doc)
	if code != ExitUsage || out != "" || !strings.Contains(stderr, "the harness has errors; its registry was not consulted") || !strings.Contains(stderr, bad+":") {
		t.Errorf("explain with a broken harness: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	code, _, stderr = runIn(&CLI{Getenv: noEnv}, "explain", "--harness", e.dir+"/missing.yaml", doc)
	if code != ExitUsage || !strings.Contains(stderr, "missing.yaml") {
		t.Errorf("explain with a missing harness: exit %d, %s", code, stderr)
	}
}
