package pin

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/validate"
)

// testDoc is a 1.6 document whose one agent step allows allowed; toolNames
// is the text of requires.mcpServers[0].toolNames (server "s") and tools
// the text of the tools array.
func testDoc(toolNames, tools string, allowed ...string) string {
	q := make([]string, len(allowed))
	for i, a := range allowed {
		q[i] = fmt.Sprintf("%q", a)
	}
	return fmt.Sprintf(`{
  "openplaybook": "1.6",
  "manifest": {"id": "pin-test", "name": "Pin test", "version": "1.0.0", "description": "d", "requiredConnectors": []},
  "requires": {"connections": [], "mcpServers": [{"name": "s", "toolNames": %s}], "secrets": []},
  "tools": %s,
  "steps": [{"id": "work", "kind": "agent", "agent": "lou", "purpose": "p", "allowedTools": [%s]}]
}
`, toolNames, tools, strings.Join(q, ", "))
}

func testRegistry(t *testing.T, defs ...playbook.Definition) *registry.Registry {
	t.Helper()
	reg := registry.New()
	for _, d := range defs {
		if err := reg.Add(d, registry.Origin{Kind: registry.MCP, Name: "s"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func ptr[T any](v T) *T { return &v }

// mcpDef is a registry definition of MCP tool mcp.s.<name> as a server
// lists it: description and schemas, and what its annotations say.
func mcpDef(name, desc, risk string, sideEffecting *bool) playbook.Definition {
	return playbook.Definition{
		Name: "mcp.s." + name, Source: "mcp", Description: desc,
		InputSchema: []byte(`{"type":"object"}`), OutputSchema: []byte(`{"type":"object"}`),
		RiskClass: risk, SideEffecting: sideEffecting,
	}
}

// plan pins src against reg, then reads and validates what pin produced
// with the project's reader and validator, and fails the test on any
// error there (invalid JSON, a name listed twice, anything else).
func plan(t *testing.T, src string, reg *registry.Registry) *Result {
	t.Helper()
	doc, ds := playbook.Read("doc.json", []byte(src), nil)
	if diag.Count(ds, diag.Error) > 0 {
		t.Fatalf("test document does not read: %v", ds)
	}
	res, err := Plan(doc, reg)
	if err != nil {
		t.Fatal(err)
	}
	after, ds := playbook.Read("doc.json", res.Source, nil)
	ds = append(ds, validate.Document(after, &validate.Options{Registry: reg.Has})...)
	for _, d := range ds {
		if d.Severity == diag.Error {
			t.Errorf("pinned document: %s at %s: %s [%s]", d.Severity, d.Pointer, d.Message, d.Rule)
		}
	}
	if t.Failed() {
		t.Logf("pinned document:\n%s", res.Source)
	}
	return res
}

func member(t *testing.T, src []byte, tool, name string) string {
	t.Helper()
	doc, _ := playbook.Read("doc.json", src, nil)
	tl := doc.ToolNamed(tool)
	if tl == nil {
		t.Fatalf("no tool %q in\n%s", tool, src)
	}
	m := tl.Node.Member(name)
	if m == nil {
		return ""
	}
	v := jsontext.Value(slices.Clone(src[m.Offset:m.End]))
	if err := v.Compact(); err != nil {
		t.Fatalf("%s of %s: %v", name, tool, err)
	}
	return strings.ReplaceAll(string(v), ",", ", ")
}

func noteAbout(notes []string, tool, field string) bool {
	for _, n := range notes {
		if strings.Contains(n, fmt.Sprintf("tool %q", tool)) && strings.Contains(n, "kept "+field) {
			return true
		}
	}
	return false
}

// TestPinNeverLowersRisk: a server whose annotations say the tool is a
// read tool does not lower what the document states (riskClass money,
// sideEffecting true, requiresApproval true); pin keeps those, says so
// member by member, and pins the rest. A riskier registry is written.
func TestPinNeverLowersRisk(t *testing.T) {
	tools := `[
    {"name": "mcp.s.refund", "source": "mcp", "description": "old", "permissions": [], "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}, "dataScopeWrites": ["payments"], "requiresApproval": true, "riskClass": "money", "sideEffecting": true},
    {"name": "mcp.s.notify", "source": "mcp", "description": "old", "permissions": [], "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}, "riskClass": "internal", "sideEffecting": false},
    {"name": "mcp.s.quiet", "source": "mcp", "description": "old", "permissions": [], "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}, "dataScopeWrites": ["x"], "riskClass": "customer_comms", "sideEffecting": true}
  ]`
	src := testDoc(`["mcp.s.refund", "mcp.s.notify", "mcp.s.quiet"]`, tools, "mcp.s.refund", "mcp.s.notify", "mcp.s.quiet")
	lower := mcpDef("refund", "Looks things up.", "read", ptr(false))
	lower.RequiresApproval = ptr(false)
	higher := mcpDef("notify", "Emails the customer.", "customer_comms", ptr(true))
	higher.DataScopeWrites = []string{"email"}
	higher.RequiresApproval = ptr(true)
	silent := mcpDef("quiet", "Says nothing of risk.", "", nil) // a server without hints
	res := plan(t, src, testRegistry(t, lower, higher, silent))

	for field, want := range map[string]string{"riskClass": `"money"`, "sideEffecting": "true", "requiresApproval": "true", "description": `"Looks things up."`} {
		if got := member(t, res.Source, "mcp.s.refund", field); got != want {
			t.Errorf("refund: %s is %s, want %s", field, got, want)
		}
	}
	for _, field := range []string{"riskClass", "sideEffecting", "requiresApproval"} {
		if !noteAbout(res.Notes, "mcp.s.refund", field) {
			t.Errorf("no note saying refund's %s was kept: %q", field, res.Notes)
		}
	}
	for field, want := range map[string]string{"riskClass": `"customer_comms"`, "sideEffecting": "true", "requiresApproval": "true", "dataScopeWrites": `["email"]`} {
		if got := member(t, res.Source, "mcp.s.notify", field); got != want {
			t.Errorf("notify: %s is %s, want %s (a riskier registry is pinned)", field, got, want)
		}
	}
	for field, want := range map[string]string{"riskClass": `"customer_comms"`, "sideEffecting": "true", "description": `"Says nothing of risk."`} {
		if got := member(t, res.Source, "mcp.s.quiet", field); got != want {
			t.Errorf("quiet: %s is %s, want %s (unknown never overwrites)", field, got, want)
		}
	}
	if len(res.Notes) != 3 || len(res.Problems) != 0 {
		t.Errorf("notes %q, problems %q; want the 3 notes about refund only", res.Notes, res.Problems)
	}
	if got := Summary(res.Changes); !strings.Contains(got, "mcp.s.refund: description\n") {
		t.Errorf("summary:\n%s", got)
	}

	// Pinning again changes nothing and keeps saying why.
	again := plan(t, string(res.Source), testRegistry(t, lower, higher, silent))
	if len(again.Changes) != 0 || string(again.Source) != string(res.Source) || len(again.Notes) != 3 {
		t.Errorf("second pin: changes %v, notes %q", again.Changes, again.Notes)
	}
}

// TestPinListsAddedNames: tools added to an empty toolNames, however it is
// written, make a valid array; a name already listed is not listed again.
func TestPinListsAddedNames(t *testing.T) {
	reg := func(t *testing.T) *registry.Registry {
		return testRegistry(t, mcpDef("a", "A.", "read", ptr(false)), mcpDef("b", "B.", "read", ptr(false)), mcpDef("c", "C.", "read", ptr(false)))
	}
	cases := []struct {
		name, toolNames, tools string
		want                   string // the toolNames text after pinning
	}{
		{"compact empty", `[]`, `[]`, `["mcp.s.a", "mcp.s.b", "mcp.s.c"]`},
		{"spaced empty", `[ ]`, `[]`, `["mcp.s.a", "mcp.s.b", "mcp.s.c"]`},
		{"one line", `["mcp.s.a"]`, `[{"name": "mcp.s.a", "source": "mcp", "description": "A.", "permissions": [], "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}, "riskClass": "read", "sideEffecting": false}]`, `["mcp.s.a", "mcp.s.b", "mcp.s.c"]`},
		{"several lines", "[\n        \"mcp.s.a\"\n      ]", `[{"name": "mcp.s.a", "source": "mcp", "description": "A.", "permissions": [], "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}, "riskClass": "read", "sideEffecting": false}]`, "[\n        \"mcp.s.a\",\n        \"mcp.s.b\",\n        \"mcp.s.c\"\n      ]"},
		{"listed, not embedded", `["mcp.s.b"]`, `[]`, `["mcp.s.b", "mcp.s.a", "mcp.s.c"]`},
		{"all listed, none embedded", `["mcp.s.c", "mcp.s.b", "mcp.s.a"]`, `[ ]`, `["mcp.s.c", "mcp.s.b", "mcp.s.a"]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := testDoc(tc.toolNames, tc.tools, "mcp.s.a", "mcp.s.b", "mcp.s.c")
			res := plan(t, src, reg(t))
			if !strings.Contains(string(res.Source), `"toolNames": `+tc.want) {
				t.Errorf("toolNames not %s:\n%s", tc.want, res.Source)
			}
			doc, _ := playbook.Read("doc.json", res.Source, nil)
			if len(doc.Tools) != 3 {
				t.Errorf("%d tools embedded, want 3", len(doc.Tools))
			}
			if len(res.Problems) != 0 {
				t.Errorf("problems: %q", res.Problems)
			}
		})
	}
}

// TestPinWritesWhatItCanDecide: one definition needs a person (the server
// marks a tool the document calls read side-effecting, and states no
// class; another the document allows but does not embed is
// side-effecting with no writes stated): pin pins everything else, leaves
// those edits out so that the document stays valid, and names the member
// to fill.
func TestPinWritesWhatItCanDecide(t *testing.T) {
	tools := `[
    {"name": "mcp.s.del", "source": "mcp", "description": "old", "permissions": [], "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}, "riskClass": "read", "sideEffecting": false},
    {"name": "mcp.s.get", "source": "mcp", "description": "old", "permissions": [], "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}, "riskClass": "read", "sideEffecting": false}
  ]`
	src := testDoc(`["mcp.s.del", "mcp.s.get"]`, tools, "mcp.s.del", "mcp.s.get", "mcp.s.wipe")
	reg := testRegistry(t,
		mcpDef("del", "Deletes entities.", "", ptr(true)),
		mcpDef("get", "Reads entities.", "read", ptr(false)),
		mcpDef("wipe", "Wipes the graph.", "", ptr(true)),
	)
	res := plan(t, src, reg)
	if got := member(t, res.Source, "mcp.s.del", "description"); got != `"Deletes entities."` {
		t.Errorf("del's description is %s; the rest of the definition should be pinned", got)
	}
	if got := member(t, res.Source, "mcp.s.get", "description"); got != `"Reads entities."` {
		t.Errorf("get's description is %s", got)
	}
	if got := member(t, res.Source, "mcp.s.del", "sideEffecting"); got != "false" {
		t.Errorf("del's sideEffecting is %s; pinning it alone leaves a read tool with a side effect", got)
	}
	doc, _ := playbook.Read("doc.json", res.Source, nil)
	if doc.ToolNamed("mcp.s.wipe") != nil || strings.Contains(string(res.Source), `"mcp.s.wipe"]`) && !strings.Contains(src, `"mcp.s.wipe"]`) {
		t.Errorf("wipe was added although its definition needs a person:\n%s", res.Source)
	}
	want := []string{
		`tool "mcp.s.del": sideEffecting was not pinned`,
		`fill riskClass (/tools/0/riskClass) by hand`,
		`tool "mcp.s.wipe" was not added`,
		`dataScopeWrites filled`,
	}
	all := strings.Join(res.Problems, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("problems lack %q:\n%s", w, all)
		}
	}
	if got := Summary(res.Changes); got != "  mcp.s.del: description\n  mcp.s.get: description\n" {
		t.Errorf("summary:\n%s", got)
	}
}

// A tool without the required outputSchema whose registry entry states
// none (an MCP server that declares no output schema): pin writes {} and
// says so, and the document then validates.
func TestPinFillsARequiredSchemaTheRegistryLacks(t *testing.T) {
	tools := `[{"name": "mcp.s.echo", "source": "mcp", "description": "Echoes.", "permissions": [], "inputSchema": {"type": "object"}, "riskClass": "read", "sideEffecting": false}]`
	src := testDoc(`["mcp.s.echo"]`, tools, "mcp.s.echo")
	def := mcpDef("echo", "Echoes.", "read", ptr(false))
	def.OutputSchema = nil
	res := plan(t, src, testRegistry(t, def))
	if got := member(t, res.Source, "mcp.s.echo", "outputSchema"); got != "{}" {
		t.Fatalf("outputSchema is %s, want {}", got)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "the registry states no outputSchema") {
		t.Errorf("notes: %v", res.Notes)
	}
}

// The same for a tool pin adds: an MCP tool the document allows, does not
// embed, and whose server states no outputSchema is added with {} (before,
// pin left it out as an invalid definition), and the document validates.
func TestPinAddsAToolWhoseRegistryLacksASchema(t *testing.T) {
	src := testDoc(`[]`, `[]`, "mcp.s.echo")
	def := mcpDef("echo", "Echoes.", "read", ptr(false))
	def.OutputSchema = nil
	res := plan(t, src, testRegistry(t, def))
	if len(res.Problems) != 0 {
		t.Fatalf("problems: %q", res.Problems)
	}
	if got := member(t, res.Source, "mcp.s.echo", "outputSchema"); got != "{}" {
		t.Fatalf("outputSchema is %s, want {}:\n%s", got, res.Source)
	}
	if got := member(t, res.Source, "mcp.s.echo", "inputSchema"); got != `{"type": "object"}` && got != `{"type":"object"}` {
		t.Errorf("inputSchema is %s, want the registry's", got)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), `tool "mcp.s.echo": the registry states no outputSchema`) {
		t.Errorf("notes: %v", res.Notes)
	}
	if _, ds := playbook.Read("doc.json", res.Source, nil); len(ds) != 0 {
		t.Errorf("the pinned document does not read cleanly: %v", ds)
	}
}
