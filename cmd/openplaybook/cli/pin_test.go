package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/validate"
)

// readBack reads and validates a file pin wrote with the project's reader
// and validator and fails the test on any error but those at the pointers
// in expected (what the test leaves for the author).
func readBack(t *testing.T, path string, expected ...string) *playbook.Document {
	t.Helper()
	src := mustRead(t, path)
	doc, ds := playbook.Read(path, []byte(src), nil)
	ds = append(ds, validate.Document(doc, nil)...)
	for _, d := range ds {
		if d.Severity == diag.Error && !slices.Contains(expected, d.Pointer) {
			t.Errorf("%s as pin wrote it: %s: %s [%s]", path, d.Pointer, d.Message, d.Rule)
		}
	}
	if t.Failed() {
		t.Logf("%s:\n%s", path, src)
	}
	return doc
}

// TestPinKeepsStatedRisk: server-memory marks read_graph read-only; a
// document that says it is customer_comms, side-effecting and needs
// approval keeps all three (the first two with a note naming the member;
// the server says nothing of approval), and the rest of the definition is
// pinned.
func TestPinKeepsStatedRisk(t *testing.T) {
	h, dir := checkEnv(t, "")
	doc := writeDoc(t, dir, "doc.json", mcpDoc("memory", nil, map[string]string{
		"mcp.memory.read_graph": `"description": "old text", "permissions": ["memory:read"], "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}, "dataScopeWrites": ["memory.graph"], "requiresApproval": true, "riskClass": "customer_comms", "sideEffecting": true`,
	}))
	code, out, errOut := run(t, nil, "pin", "--harness", h, "--write", doc)
	if code != ExitOK {
		t.Fatalf("pin --write: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, field := range []string{"riskClass", "sideEffecting"} {
		if !strings.Contains(errOut, `note: tool "mcp.memory.read_graph": kept `+field) {
			t.Errorf("no note about %s:\n%s", field, errOut)
		}
	}
	d := readBack(t, doc)
	tl := d.ToolNamed("mcp.memory.read_graph")
	if tl == nil || playbook.Str(tl.RiskClass) != "customer_comms" || tl.SideEffecting == nil || !tl.SideEffecting.Value || tl.RequiresApproval == nil || !tl.RequiresApproval.Value {
		t.Errorf("pin lowered a stated risk:\n%s", mustRead(t, doc))
	}
	if strings.Contains(mustRead(t, doc), "old text") {
		t.Error("the description was not pinned")
	}
}

// TestPinWritesValidJSONAndNamesTheMember: a compact empty toolNames gets
// two added names as a valid array; a third allowed tool
// (create_entities, side-effecting, no writes stated by the server) needs
// the author: pin writes the rest, exits 1 and names dataScopeWrites.
func TestPinWritesValidJSONAndNamesTheMember(t *testing.T) {
	h, dir := checkEnv(t, "")
	src := mcpDoc("memory", nil, map[string]string{})
	src = strings.Replace(src, `"allowedTools": []`, `"allowedTools": ["mcp.memory.open_nodes", "mcp.memory.search_nodes", "mcp.memory.create_entities"]`, 1)
	if !strings.Contains(src, `"toolNames": []`) || !strings.Contains(src, `"mcp.memory.create_entities"]`) {
		t.Fatalf("test document is not as expected:\n%s", src)
	}
	doc := writeDoc(t, dir, "doc.json", src)
	code, out, errOut := run(t, nil, "pin", "--harness", h, "--write", doc)
	if code != ExitProblems {
		t.Fatalf("pin --write: exit %d, want 1 (something is left to fill)\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"wrote ", `tool "mcp.memory.create_entities" was not added`, "with dataScopeWrites filled"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	pinned := mustRead(t, doc)
	if !strings.Contains(pinned, `"toolNames": ["mcp.memory.open_nodes", "mcp.memory.search_nodes"]`) {
		t.Errorf("toolNames:\n%s", pinned)
	}
	// The one error left is the author's: create_entities is not embedded.
	d := readBack(t, doc, "/steps/0/allowedTools/2")
	if len(d.Tools) != 2 || d.ToolNamed("mcp.memory.create_entities") != nil {
		t.Errorf("embedded %d tools, want open_nodes and search_nodes:\n%s", len(d.Tools), pinned)
	}
	// Again: nothing more to pin, the same problem.
	code, _, errOut = run(t, nil, "pin", "--harness", h, "--write", doc)
	if code != ExitProblems || !strings.Contains(errOut, "dataScopeWrites") || mustRead(t, doc) != pinned {
		t.Errorf("second pin: exit %d\n%s", code, errOut)
	}
}
