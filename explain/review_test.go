package explain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
)

// What a reviewer needs to tie a review to a run: the digest of the exact
// bytes, each tool's description, the approvals on the graph, the run's
// input, and which values a registry confirms.

// TestDocumentDigest: the digest is the SHA-256 of the file's bytes as
// they are (a change of one blank changes it), shown by every format.
func TestDocumentDigest(t *testing.T) {
	for _, f := range examples(t) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(src)
		want := hex.EncodeToString(sum[:])
		e := build(t, f)
		if e.DocumentDigest != want {
			t.Errorf("%s: digest %s, want %s", f, e.DocumentDigest, want)
		}
		for _, format := range Formats {
			if out := render(t, e, format); !strings.Contains(out, want) {
				t.Errorf("%s: the %s format does not show the digest", f, format)
			}
		}
		// The same document with one more trailing newline is other bytes.
		doc, ds := playbook.Read(filepath.Base(f), append(src, '\n'), nil)
		if other := Build(doc, ds); other.DocumentDigest == want || len(other.DocumentDigest) != 64 {
			t.Errorf("%s: a changed file keeps the digest (%s)", f, other.DocumentDigest)
		}
	}
	if e := Build(nil, nil); e.DocumentDigest != "" {
		t.Errorf("no document, digest %q", e.DocumentDigest)
	}
}

// TestToolDescriptions: every format shows each defined tool's
// description.
func TestToolDescriptions(t *testing.T) {
	e := build(t, "../examples/failed-charge-recovery.json")
	for _, format := range []string{"text", "markdown", "html", "json"} {
		out := render(t, e, format)
		flat := strings.Join(strings.Fields(out), " ") // text wraps
		for _, st := range e.Steps {
			for _, tl := range st.AllowedTools {
				d := tl.Description
				if format == "markdown" {
					d = mdText(d)
				}
				if format == "html" {
					d = strings.ReplaceAll(d, "'", "&#39;")
				}
				if d == "" || !strings.Contains(flat, strings.Join(strings.Fields(d), " ")) {
					t.Errorf("%s: tool %s: description %q not shown", format, tl.Name, d)
				}
			}
		}
	}
}

// TestApprovalMarkers: the steps that allow a tool declaring
// requiresApproval, and only those, are marked on the graph: mermaid
// nodes say "needs approval" and have the class approval, SVG boxes carry
// the badge.
func TestApprovalMarkers(t *testing.T) {
	e := build(t, "../examples/failed-charge-recovery.json")
	var marked []string
	for _, st := range e.Steps {
		if len(st.ApprovalTools) > 0 {
			marked = append(marked, st.Ref+":"+strings.Join(st.ApprovalTools, ","))
		}
	}
	if want := []string{"send:gmail.message.send", "refund:charge.refund"}; !slices.Equal(marked, want) {
		t.Fatalf("approval tools %v, want %v", marked, want)
	}
	mm := render(t, e, "mermaid")
	for i, st := range e.Steps {
		node := regexp.MustCompile(`(?m)^  s` + string(rune('0'+i)) + `[\[{]"[^\n]*$`).FindString(mm)
		if has := strings.Contains(node, "needs approval"); has != (len(st.ApprovalTools) > 0) {
			t.Errorf("mermaid node of %s: %q", st.Ref, node)
		}
	}
	if !strings.Contains(mm, "\n  class s2,s5 approval\n") || !strings.Contains(mm, "classDef approval ") {
		t.Errorf("mermaid does not give the approval class to s2 and s5:\n%s", mm)
	}
	page := render(t, e, "html")
	if n := strings.Count(page, `<rect class="approval-badge"`); n != 2 {
		t.Errorf("the svg has %d approval badges, want 2", n)
	}
	if n := strings.Count(page, `class="node risk-customer_comms approval"`) + strings.Count(page, `class="node risk-money approval"`); n != 2 {
		t.Errorf("the svg outlines %d steps as needing approval, want 2", n)
	}
	g := layout(e)
	for _, n := range g.Nodes {
		if n.Approval && (n.AX < n.X || n.AX+approvalW > n.X+n.W || n.AY+approvalH/2 != n.Y+n.H) {
			t.Errorf("badge of step %d at %d,%d is not on its box's bottom edge (%d,%d %dx%d)", n.Index, n.AX, n.AY, n.X, n.Y, n.W, n.H)
		}
	}
	none := build(t, "../examples/meeting-notes.json")
	if strings.Contains(render(t, none, "mermaid"), "approval") {
		t.Errorf("a playbook with no approval is marked")
	}
}

// TestRunInput: the inputSchema's properties, and the schema as written;
// without one, a plain statement; a schema without properties is shown
// whole.
func TestRunInput(t *testing.T) {
	e := build(t, "../examples/support-triage.json")
	want := []InputField{
		{Name: "fromEmail", Type: "string (email)", Required: true, Description: "Sender of the support message."},
		{Name: "subject", Type: "string", Required: true, Description: "Subject line."},
		{Name: "body", Type: "string", Required: true, Description: "Message text."},
		{Name: "receivedAt", Type: "string (date-time)", Description: "When the message arrived."},
	}
	if !slices.Equal(e.Input, want) {
		t.Errorf("input %+v, want %+v", e.Input, want)
	}
	var schema map[string]any
	if err := json.Unmarshal(e.InputSchema, &schema); err != nil || schema["type"] != "object" {
		t.Errorf("inputSchema %s: %v", e.InputSchema, err)
	}
	txt := render(t, e, "text")
	if !strings.Contains(txt, "RUN INPUT (inputSchema)\n  NAME        TYPE                REQUIRED  DESCRIPTION\n  fromEmail   string (email)      yes       Sender of the support message.\n") {
		t.Errorf("text run input:\n%s", txt)
	}
	md := render(t, e, "markdown")
	if !strings.Contains(md, "| `fromEmail` | string (email) | yes | Sender of the support message. |") || !strings.Contains(md, "```json\n{\n  \"$schema\": \"https://json-schema.org/draft/2020-12/schema\",\n  \"type\": \"object\",") {
		t.Errorf("markdown run input:\n%s", md)
	}
	if page := render(t, e, "html"); !strings.Contains(page, `<pre class="schema">{`) || !strings.Contains(page, "<td><code>receivedAt</code></td><td>string (date-time)</td><td>no</td>") {
		t.Errorf("html run input missing")
	}

	src := func(inputSchema string) *Explanation {
		doc, ds := playbook.Read("x.json", []byte(`{"openplaybook": "1.6", "manifest": {"id": "x", "name": "X", "version": "1.0.0", "description": "d", "requiredConnectors": []},`+
			inputSchema+`"requires": {"connections": [], "mcpServers": [], "secrets": []}, "tools": [], "steps": [{"id": "a", "kind": "gate", "purpose": "p"}]}`), nil)
		return Build(doc, ds)
	}
	none := src("")
	if none.InputSchema != nil || len(none.Input) != 0 {
		t.Errorf("no inputSchema: %s %+v", none.InputSchema, none.Input)
	}
	for _, f := range Formats {
		out := render(t, none, f)
		if f == "json" {
			if !strings.Contains(out, `"inputSchema": null`) || !strings.Contains(out, `"input": []`) {
				t.Errorf("json without inputSchema:\n%s", out)
			}
		} else if f != "mermaid" && !strings.Contains(strings.Join(strings.Fields(out), " "), "a run takes any JSON object as input") {
			t.Errorf("%s does not say a run takes any input", f)
		}
	}
	bare := src(`"inputSchema": {"oneOf": [{"required": ["a<b"]}, {"required": ["c"]}]},`)
	if txt := render(t, bare, "text"); !strings.Contains(txt, `no top-level properties declared; the schema: {"oneOf":[{"required":["a<b"]},{"required":["c"]}]}`) {
		t.Errorf("text of a schema without properties:\n%s", txt)
	}
}

// claimsDoc has four tools the test registry knows differently: one it
// confirms entirely, one it calls riskier, one it does not have, and an
// MCP tool it knows only the description and side effect of; and allows
// two tools it does not define, one of them in the registry.
const claimsDoc = `{
  "openplaybook": "1.6",
  "manifest": {"id": "claims", "name": "Claims", "version": "1.0.0", "description": "What a registry confirms.", "requiredConnectors": []},
  "requires": {"connections": [], "mcpServers": [{"name": "acme", "toolNames": ["mcp.acme.lookup"]}], "secrets": []},
  "tools": [
    {"name": "note.add", "source": "primitive", "description": "Add a note.", "permissions": ["notes:write"],
     "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
     "riskClass": "internal", "sideEffecting": true, "requiresApproval": false, "dataScopeWrites": ["notes"]},
    {"name": "refund.issue", "source": "primitive", "description": "Refund a charge.", "permissions": ["refunds:write"],
     "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
     "riskClass": "read", "sideEffecting": false, "requiresApproval": false},
    {"name": "ghost.tool", "source": "primitive", "description": "Nobody has it.", "permissions": [],
     "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
     "riskClass": "read", "sideEffecting": false},
    {"name": "mcp.acme.lookup", "source": "mcp", "description": "Look an order up.", "permissions": ["orders:read"],
     "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
     "riskClass": "read", "sideEffecting": false, "requiresApproval": false}
  ],
  "steps": [
    {"id": "work", "kind": "agent", "agent": "lou", "purpose": "Do it.",
     "allowedTools": ["note.add", "refund.issue", "ghost.tool", "mcp.acme.lookup"], "next": "more"},
    {"id": "more", "kind": "agent", "agent": "lou", "purpose": "Do more.", "allowedTools": ["nowhere.tool", "today.surface"]}
  ]
}
`

func claimsRegistry(t *testing.T) *registry.Registry {
	t.Helper()
	yes, no := true, false
	reg := registry.New()
	for _, x := range []struct {
		def    playbook.Definition
		origin registry.Origin
	}{
		{playbook.Definition{Name: "note.add", Source: "primitive", Description: "Add a note.", Permissions: []string{"notes:write"},
			RiskClass: "internal", SideEffecting: &yes, RequiresApproval: &no, DataScopeWrites: []string{"notes"}}, registry.Origin{Kind: registry.Builtin}},
		{playbook.Definition{Name: "refund.issue", Source: "primitive", Description: "Refund a charge.", Permissions: []string{"refunds:write"},
			RiskClass: "money", SideEffecting: &yes, RequiresApproval: &yes, DataScopeWrites: []string{"refunds"}}, registry.Origin{Kind: registry.Builtin}},
		{playbook.Definition{Name: "mcp.acme.lookup", Source: "mcp", Description: "Look an order up.", SideEffecting: &no},
			registry.Origin{Kind: registry.MCP, Name: "acme"}},
		{playbook.Definition{Name: "today.surface", Source: "primitive", Description: "Surface it.", RiskClass: "internal"}, registry.Origin{Kind: registry.Builtin}},
	} {
		if err := reg.Add(x.def, x.origin, nil); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// TestClaims: with a registry, each declared value it does not state the
// same is a claim, marked in every format; without one, nothing is marked
// and the explanation says everything is as the document claims.
func TestClaims(t *testing.T) {
	doc, ds := playbook.Read("claims.json", []byte(claimsDoc), nil)
	plain := Build(doc, ds)
	if plain.Registry.Consulted || plain.Steps[0].RiskClaimed {
		t.Errorf("without a registry: %+v", plain.Registry)
	}
	for _, tl := range plain.Steps[0].AllowedTools {
		if tl.Claims != nil || tl.InRegistry != "" {
			t.Errorf("without a registry, %s has claims %v, in registry %q", tl.Name, tl.Claims, tl.InRegistry)
		}
	}
	for _, f := range []string{"text", "markdown", "html"} {
		out := strings.Join(strings.Fields(render(t, plain, f)), " ")
		if !strings.Contains(out, "As the document claims: no registry was consulted") || strings.Contains(out, "(claim)") || strings.Contains(out, `class="claim"`) {
			t.Errorf("%s without a registry:\n%s", f, out)
		}
	}

	e := BuildWith(doc, ds, &Options{Registry: claimsRegistry(t), Source: "the test registry", Unavailable: []string{`MCP server "beta": did not answer`}})
	if !e.Registry.Consulted || e.Registry.Source != "the test registry" || len(e.Registry.Unavailable) != 1 {
		t.Errorf("registry %+v", e.Registry)
	}
	want := map[string]struct {
		in     string
		claims []string
	}{
		"note.add":        {"builtin", []string{}},
		"refund.issue":    {"builtin", []string{"riskClass", "sideEffecting", "requiresApproval"}},
		"ghost.tool":      {"", []string{"source", "description", "riskClass", "sideEffecting", "permissions"}},
		"mcp.acme.lookup": {"mcp server acme", []string{"riskClass", "requiresApproval", "permissions"}},
		"nowhere.tool":    {"", []string{}},
		"today.surface":   {"builtin", []string{}},
	}
	for _, tl := range append(e.Steps[0].AllowedTools, e.Steps[1].AllowedTools...) {
		w := want[tl.Name]
		if tl.InRegistry != w.in || !slices.Equal(tl.Claims, w.claims) {
			t.Errorf("%s: in registry %q, claims %v; want %q, %v", tl.Name, tl.InRegistry, tl.Claims, w.in, w.claims)
		}
	}
	if !e.Steps[0].RiskClaimed || e.Steps[1].RiskClaimed {
		t.Errorf("risk claimed: %v %v; want the first step's only (the second's is unknown)", e.Steps[0].RiskClaimed, e.Steps[1].RiskClaimed)
	}

	txt := render(t, e, "text")
	for _, s := range []string{
		"Checked against the test registry; a value marked * (claim) is the document's claim",
		`not consulted: MCP server "beta": did not answer`,
		"refund.issue     built-in   read*     no*       none*",
		"* claims the registry (builtin) does not confirm: riskClass, sideEffecting,\n                     requiresApproval",
		"* not in the registry: every value shown is the document's claim",
		"* the registry does not have it either",
		"* the registry has it (builtin), but the document does not define it, so a run",
	} {
		if !strings.Contains(txt, s) {
			t.Errorf("text lacks %q:\n%s", s, txt)
		}
	}
	if !strings.Contains(txt, "note.add         built-in   internal  no        notes\n") {
		t.Errorf("text marks a confirmed value:\n%s", txt)
	}
	md := render(t, e, "markdown")
	if !strings.Contains(md, "| `refund.issue` | built-in | primitive |  | read *(claim)* | no *(claim)* | no *(claim)* |") ||
		!strings.Contains(md, "| `note.add` | built-in | primitive |  | internal | yes | no |") {
		t.Errorf("markdown claims:\n%s", md)
	}
	page := render(t, e, "html")
	checkInertHTML(t, page)
	// refund.issue 3, ghost.tool 5, mcp.acme.lookup 3; the legend 1.
	if n := strings.Count(page, `<span class="claim"`); n != 12 {
		t.Errorf("html marks %d claims, want 12", n)
	}
	if mm := render(t, e, "mermaid"); !strings.Contains(mm, `s0["work<br/>risk: internal (claim)"]`) {
		t.Errorf("mermaid does not mark the claimed risk:\n%s", mm)
	}
	var back Explanation
	if err := json.Unmarshal([]byte(render(t, e, "json")), &back); err != nil || back.Steps[0].AllowedTools[1].Claims[0] != "riskClass" {
		t.Errorf("json claims: %v", err)
	}
}

// TestReviewGoldens compares the markdown of one example and the text and
// markdown of claimsDoc against the test registry with testdata/ (go test
// -update rewrites them; read the diff).
func TestReviewGoldens(t *testing.T) {
	doc, ds := playbook.Read("claims.json", []byte(claimsDoc), nil)
	claims := BuildWith(doc, ds, &Options{Registry: claimsRegistry(t), Source: "the test registry", Unavailable: []string{`MCP server "beta": did not answer`}})
	for golden, got := range map[string]string{
		"failed-charge-recovery.md": render(t, build(t, "../examples/failed-charge-recovery.json"), "markdown"),
		"claims.txt":                render(t, claims, "text"),
		"claims.md":                 render(t, claims, "markdown"),
	} {
		path := filepath.Join("testdata", golden)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if got != string(want) {
			t.Errorf("output differs from %s (go test -update rewrites it):\n%s", path, got)
		}
	}
}
