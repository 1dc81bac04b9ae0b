package explain

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/openplaybook/openplaybook/internal/textsafe"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// read reads a document the way `openplaybook explain` does before
// validating it.
func read(t testing.TB, path string) (*playbook.Document, []diag.Diagnostic) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return playbook.Read(filepath.Base(path), src, nil)
}

func build(t testing.TB, path string) *Explanation {
	t.Helper()
	return Build(read(t, path))
}

func render(t testing.TB, e *Explanation, format string) string {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, e, format); err != nil {
		t.Fatalf("Render %s: %v", format, err)
	}
	if b.Len() == 0 {
		t.Fatalf("Render %s wrote nothing", format)
	}
	return b.String()
}

func examples(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob("../examples/*.json")
	if len(files) < 7 {
		t.Fatalf("found only %d examples", len(files))
	}
	return files
}

// gateCount counts the gate steps of e.
func gateCount(e *Explanation) int {
	n := 0
	for i := range e.Steps {
		if isGate(&e.Steps[i]) {
			n++
		}
	}
	return n
}

var (
	decisionNode = regexp.MustCompile(`(?m)^  s\d+\{"`)
	// attrURL finds attributes that can load or navigate anywhere.
	attrURL   = regexp.MustCompile(`(?i)\s(src|href|xlink:href|action|formaction|poster|data|srcset|background)\s*=\s*"?([^"\s>]*)`)
	htmlTag   = regexp.MustCompile(`<[a-zA-Z][^>]*>`)
	attrValue = regexp.MustCompile(`(?i)\s([a-z:-]+)="([^"]*)"`)
)

// checkInertHTML fails unless page is one self-contained page that loads
// nothing and runs nothing.
func checkInertHTML(t *testing.T, page string) {
	t.Helper()
	low := strings.ToLower(page)
	for _, bad := range []string{"<script", "<link", "<img", "<iframe", "<object", "<embed", "@import", "javascript:"} {
		if strings.Contains(low, bad) {
			t.Errorf("html contains %q", bad)
		}
	}
	if n := strings.Count(low, "<svg"); n != 1 {
		t.Errorf("html has %d <svg elements, want exactly 1", n)
	}
	if n := strings.Count(low, "<style"); n != 1 {
		t.Errorf("html has %d <style elements, want exactly 1", n)
	}
	style := low[strings.Index(low, "<style"):strings.Index(low, "</style>")]
	if strings.Contains(style, "url(") || strings.Contains(style, "http") {
		t.Errorf("the page's style refers to something outside the page")
	}
	// Document text is escaped, so every "<" followed by a letter starts
	// a real tag: check the attributes of those.
	for _, tag := range htmlTag.FindAllString(page, -1) {
		for _, m := range attrURL.FindAllStringSubmatch(tag, -1) {
			if m[1] != "href" || !strings.HasPrefix(m[2], "#") {
				t.Errorf("html has %s=%q: only in-page links (#...) are allowed", m[1], m[2])
			}
		}
		for _, a := range attrValue.FindAllStringSubmatch(tag, -1) {
			v := strings.ToLower(a[2])
			if strings.Contains(v, "url(") && !strings.HasPrefix(v, "url(#") || strings.Contains(v, "://") {
				t.Errorf("html has %s=%q", a[1], a[2])
			}
			if strings.HasPrefix(strings.ToLower(a[1]), "on") {
				t.Errorf("html has an event handler %s=%q", a[1], a[2])
			}
		}
	}
}

// TestExamples: every example explains in every format; the JSON
// round-trips; the mermaid graph has a decision node per gate; the page is
// self-contained.
func TestExamples(t *testing.T) {
	for _, f := range examples(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			doc, ds := read(t, f)
			if len(ds) > 0 {
				t.Fatalf("example does not read cleanly: %v", ds)
			}
			e := Build(doc, ds)
			if len(e.Steps) != len(doc.Steps) || e.Manifest.ID == "" || e.EntryStep == "" {
				t.Errorf("explanation misses content: %d steps, id %q, entry %q", len(e.Steps), e.Manifest.ID, e.EntryStep)
			}
			if len(e.Summary.UndefinedTools) > 0 || len(e.Summary.UnknownRisk) > 0 {
				t.Errorf("a valid example has undefined or unknown tools: %+v %+v", e.Summary.UndefinedTools, e.Summary.UnknownRisk)
			}
			for _, st := range e.Steps {
				for _, tl := range st.AllowedTools {
					if !tl.Defined || tl.Family == FamilyUnknown {
						t.Errorf("step %s: tool %s: defined %v, family %s", st.Ref, tl.Name, tl.Defined, tl.Family)
					}
				}
			}

			var back Explanation
			if err := json.Unmarshal([]byte(render(t, e, "json")), &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&back, e) {
				t.Errorf("json does not round-trip:\n got %+v\nwant %+v", back, *e)
			}

			mm := render(t, e, "mermaid")
			if !strings.HasPrefix(mm, "flowchart TD\n") {
				t.Errorf("mermaid does not start with flowchart TD:\n%s", mm)
			}
			if got, want := len(decisionNode.FindAllString(mm, -1)), gateCount(e); got != want {
				t.Errorf("mermaid has %d decision nodes, want one per gate (%d):\n%s", got, want, mm)
			}

			page := render(t, e, "html")
			checkInertHTML(t, page)
			if got, want := strings.Count(page, "<polygon"), gateCount(e); got != want {
				t.Errorf("svg has %d diamonds, want %d", got, want)
			}
			md := render(t, e, "markdown")
			if !strings.Contains(md, "```mermaid\nflowchart TD\n") {
				t.Errorf("markdown has no mermaid block")
			}
			txt := render(t, e, "text")
			for _, st := range e.Steps {
				if !strings.Contains(txt, st.Ref) || !strings.Contains(md, st.Ref) && !strings.Contains(md, mdText(st.Ref)) {
					t.Errorf("step %s missing from text or markdown", st.Ref)
				}
			}
			for i, l := range strings.Split(txt, "\n") {
				if n := len([]rune(l)); n > textWidth {
					t.Errorf("text line %d is %d columns wide: %q", i+1, n, l)
				}
			}
		})
	}
}

func TestFailedChargeRecovery(t *testing.T) {
	e := build(t, "../examples/failed-charge-recovery.json")
	s := &e.Summary
	if s.RiskClass != "money" {
		t.Errorf("summary risk %q, want money", s.RiskClass)
	}
	if want := []StepTools{{Step: "refund", Tools: []string{"charge.refund"}}}; !reflect.DeepEqual(s.Money, want) {
		t.Errorf("money = %+v, want %+v", s.Money, want)
	}
	if want := []StepTools{{Step: "send", Tools: []string{"gmail.message.send"}}}; !reflect.DeepEqual(s.CustomerComms, want) {
		t.Errorf("customerComms = %+v, want %+v", s.CustomerComms, want)
	}
	if want := []ToolSteps{
		{Tool: "gmail.message.send", RiskClass: "customer_comms", Steps: []string{"send"}},
		{Tool: "charge.refund", RiskClass: "money", Steps: []string{"refund"}},
	}; !reflect.DeepEqual(s.RequiresApproval, want) {
		t.Errorf("requiresApproval = %+v, want %+v", s.RequiresApproval, want)
	}
	if want := []StepServers{{Step: "recover", Servers: []string{"acme"}, Tools: []string{"mcp.acme.search_orders"}}}; !reflect.DeepEqual(s.MCPServers, want) {
		t.Errorf("mcpServers = %+v, want %+v", s.MCPServers, want)
	}
	if want := []StepScopes{
		{Step: "send", DataScopeWrites: []string{"gmail.messages", "notes"}},
		{Step: "refund", DataScopeWrites: []string{"notes", "stripe.refunds"}},
		{Step: "handoff", DataScopeWrites: []string{"notes", "today"}},
	}; !reflect.DeepEqual(s.DataScopeWrites, want) {
		t.Errorf("dataScopeWrites = %+v, want %+v", s.DataScopeWrites, want)
	}
	if len(s.Gates) != 2 || s.Gates[0].Step != "gate" || s.Gates[0].OnReject != "handoff" || s.Gates[0].Next != "send" ||
		s.Gates[1].Step != "refund_gate" || s.Gates[1].OnReject != "" || !strings.Contains(s.Gates[0].Purpose, "approves") {
		t.Errorf("gates = %+v", s.Gates)
	}

	gate := e.Steps[1]
	if gate.ID != "gate" || gate.Kind != "gate" || gate.OnReject != "handoff" || gate.RiskClass != RiskNone {
		t.Errorf("step gate = %+v", gate)
	}
	refund := e.Steps[5]
	if refund.ID != "refund" || refund.RiskClass != "money" || refund.Next != "" {
		t.Errorf("step refund = %+v", refund)
	}
	cr := refund.AllowedTools[0]
	yes := true
	if cr.Name != "charge.refund" || cr.Family != FamilyConnector || cr.ConnectorType != "stripe" ||
		!reflect.DeepEqual(cr.RequiresApproval, &yes) || !reflect.DeepEqual(cr.SideEffecting, &yes) ||
		!reflect.DeepEqual(cr.DataScopeWrites, []string{"stripe.refunds"}) || !reflect.DeepEqual(cr.Permissions, []string{"refunds:write"}) {
		t.Errorf("charge.refund = %+v", cr)
	}
	fams := map[string]string{}
	for _, tl := range e.Steps[0].AllowedTools {
		fams[tl.Name] = tl.Family + "/" + tl.Server
	}
	if want := map[string]string{"customer.get": "built-in/", "charge.history": "connector/", "mcp.acme.search_orders": "mcp/acme"}; !reflect.DeepEqual(fams, want) {
		t.Errorf("families of recover = %v, want %v", fams, want)
	}
	if want := []MCPServer{{Name: "acme", ToolNames: []string{"mcp.acme.search_orders"}}}; !reflect.DeepEqual(e.Requires.MCPServers, want) {
		t.Errorf("requires.mcpServers = %+v", e.Requires.MCPServers)
	}
	if len(e.Requires.Secrets) != 2 || e.Requires.Secrets[1].Name != "ACME_MCP_TOKEN" || len(e.Requires.Connections) != 2 {
		t.Errorf("requires = %+v", e.Requires)
	}

	txt := render(t, e, "text")
	for _, want := range []string{
		"Move money         refund: charge.refund",
		"Need approval      gmail.message.send (customer_comms) in send",
		"charge.refund (money) in refund",
		"Call MCP servers   recover: acme (mcp.acme.search_orders)",
		"gate: approve -> send, reject -> handoff",
		"refund_gate: approve -> refund, reject -> run ends rejected",
		"on reject: handoff",
		"acme  mcp.acme.search_orders",
		"ACME_MCP_TOKEN",
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("text lacks %q", want)
		}
	}
	mm := render(t, e, "mermaid")
	for _, want := range []string{`s1{"gate<br/>`, `s1 -->|approve| s2`, `s1 -->|reject| s6`, `s4 -->|reject| run_rejected`, `s5 --> run_end`, `s5["refund<br/>risk: money<br/>needs approval"]`, `class s5 money`} {
		if !strings.Contains(mm, want) {
			t.Errorf("mermaid lacks %q:\n%s", want, mm)
		}
	}
	page := render(t, e, "html")
	for _, want := range []string{"<svg", "<code>charge.refund</code>", "<code>mcp.acme.search_orders</code>", "run ends rejected", `href="#step-5"`} {
		if !strings.Contains(page, want) {
			t.Errorf("html lacks %q", want)
		}
	}
}

// TestTextGolden compares the text format of one example with
// testdata/failed-charge-recovery.txt (go test -update rewrites it).
func TestTextGolden(t *testing.T) {
	for _, name := range []string{"failed-charge-recovery", "release-notes"} {
		got := render(t, build(t, "../examples/"+name+".json"), "text")
		golden := filepath.Join("testdata", name+".txt")
		if *update {
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if got != string(want) {
			t.Errorf("%s: text differs from %s (go test -update rewrites it):\n%s", name, golden, got)
		}
	}
}

func TestEmptyDocument(t *testing.T) {
	doc, ds := playbook.Read("empty.json", []byte(`{}`), nil)
	ds = append(ds,
		diag.Diagnostic{File: "empty.json", Line: 1, Column: 1, Severity: diag.Error, Rule: "required", Message: `missing member "manifest"`},
		diag.Diagnostic{File: "empty.json", Line: 1, Column: 2, Severity: diag.Warning, Rule: "long", Message: strings.Repeat("a long message ", 20)},
	)
	e := Build(doc, ds)
	if e.Manifest.Name != "" || len(e.Steps) != 0 || e.Summary.RiskClass != RiskNone || e.EntryStep != "" {
		t.Errorf("explanation of {} = %+v", e)
	}
	if e.ProblemCounts != (ProblemCounts{Errors: 1, Warnings: 1}) || len(e.Problems) != 2 {
		t.Errorf("problems = %+v %+v", e.ProblemCounts, e.Problems)
	}
	for _, f := range Formats {
		out := render(t, e, f)
		if f == "text" && !strings.HasPrefix(out, "PROBLEMS: 1 error, 1 warning, 0 infos") {
			t.Errorf("text does not open with the problems:\n%s", out)
		}
		if f == "text" && !strings.Contains(out, `1:1  error    missing member "manifest" [required]`) {
			t.Errorf("text lacks the problem line:\n%s", out)
		}
		if f == "text" {
			for _, l := range strings.Split(out, "\n") {
				if len(l) > textWidth {
					t.Errorf("text line wider than %d: %q", textWidth, l)
				}
			}
		}
		if f == "html" {
			checkInertHTML(t, out)
		}
	}
	var back Explanation
	if err := json.Unmarshal([]byte(render(t, e, "json")), &back); err != nil || !reflect.DeepEqual(&back, e) {
		t.Errorf("json does not round-trip (%v)", err)
	}
}

// TestPartialModel: Build never panics, whatever is nil.
func TestPartialModel(t *testing.T) {
	docs := []*playbook.Document{
		nil,
		{},
		{Manifest: &playbook.Manifest{}, Requires: &playbook.Requires{}},
		{
			Tools: []*playbook.Tool{nil, {}, {Name: &playbook.String{Value: "x.y"}}},
			Steps: []*playbook.Step{nil, {}, {Kind: &playbook.String{Value: "gate"}}, {
				Kind:         &playbook.String{Value: "agent"},
				AllowedTools: &playbook.StringList{Items: []*playbook.String{{Value: "x.y"}, {Value: "mcp.s.t"}, {Value: "mcp."}}},
				Next:         &playbook.String{Value: ""},
				OnReject:     &playbook.String{Value: "nowhere"},
			}},
			Requires: &playbook.Requires{
				Connections: []*playbook.Connection{nil, {}},
				MCPServers:  []*playbook.MCPServer{nil, {}},
				Secrets:     []*playbook.Secret{nil, {}},
			},
		},
	}
	for i, doc := range docs {
		e := Build(doc, nil)
		for _, f := range Formats {
			render(t, e, f)
		}
		if i == 3 {
			if len(e.Steps) != 3 || e.Steps[0].Ref != "#1" || e.Steps[2].RiskClass != RiskUnknown {
				t.Errorf("steps = %+v", e.Steps)
			}
			x := e.Steps[2].AllowedTools[0]
			if !x.Defined || x.Family != FamilyUnknown || x.RiskClass != RiskUnknown || x.SideEffecting != nil || x.Permissions != nil {
				t.Errorf("tool without members = %+v", x)
			}
			if m := e.Steps[2].AllowedTools[1]; m.Defined || m.Family != FamilyMCP || m.Server != "s" {
				t.Errorf("undefined mcp tool = %+v", m)
			}
			if m := e.Steps[2].AllowedTools[2]; m.Family != FamilyUnknown || m.Server != "" {
				t.Errorf("malformed mcp name = %+v", m)
			}
			if !e.Steps[2].NextMissing || !e.Steps[2].OnRejectMissing {
				t.Errorf("dangling references not marked: %+v", e.Steps[2])
			}
		}
	}
}

func TestUndefinedAndUnknown(t *testing.T) {
	e := build(t, "testdata/hostile.json")
	if want := []ToolSteps{{Tool: "nope.tool", RiskClass: RiskUnknown, Steps: []string{"one"}}}; !reflect.DeepEqual(e.Summary.UndefinedTools, want) {
		t.Errorf("undefinedTools = %+v", e.Summary.UndefinedTools)
	}
	if want := []ToolSteps{{Tool: "c.odd", RiskClass: RiskUnknown, Steps: []string{"three"}}}; !reflect.DeepEqual(e.Summary.UnknownRisk, want) {
		t.Errorf("unknownRisk = %+v", e.Summary.UnknownRisk)
	}
	one := e.Steps[0]
	if one.RiskClass != RiskUnknown {
		t.Errorf("a read step with an undefined tool has risk %q, want unknown (never guessed as read)", one.RiskClass)
	}
	if nope := one.AllowedTools[1]; nope.Defined || nope.RiskClass != RiskUnknown || nope.RequiresApproval != nil {
		t.Errorf("undefined tool = %+v", nope)
	}
	if odd := e.Steps[2].AllowedTools[1]; odd.RiskClass != RiskUnknown || odd.DeclaredRiskClass != "extreme" {
		t.Errorf("tool with an invalid riskClass = %+v", odd)
	}
	if e.Steps[2].RiskClass != "money" {
		t.Errorf("money beats unknown: got %q", e.Steps[2].RiskClass)
	}
	for _, f := range []string{"text", "markdown", "html"} {
		if out := render(t, e, f); !strings.Contains(out, UndefinedNote) {
			t.Errorf("%s does not mark nope.tool %q", f, UndefinedNote)
		}
	}
	if txt := render(t, e, "text"); !strings.Contains(txt, `unknown ("extreme")`) || !strings.Contains(txt, "highest risk: unknown") {
		t.Errorf("text hides unknown risk:\n%s", txt)
	}
}

// TestHostileText: document text cannot inject markup, script, diagram
// syntax or terminal control sequences in any format.
func TestHostileText(t *testing.T) {
	e := build(t, "testdata/hostile.json")

	page := render(t, e, "html")
	checkInertHTML(t, page)
	for _, bad := range []string{"</script><script>", `"><svg onload`, "<svg onload", "</title><script", "onerror=alert(3)>", "<style>body"} {
		if strings.Contains(page, bad) {
			t.Errorf("html contains hostile text unescaped: %q", bad)
		}
	}
	for _, want := range []string{"&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;", "&#34;&gt;&lt;svg onload=alert(2)&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("html lacks the escaped text %q", want)
		}
	}

	mm := render(t, e, "mermaid")
	for _, l := range strings.Split(strings.TrimSpace(mm), "\n")[1:] {
		if i := strings.IndexByte(l, '"'); i >= 0 {
			label := l[i+1 : strings.LastIndexByte(l, '"')]
			label = regexp.MustCompile(`#[0-9]+;`).ReplaceAllString(strings.ReplaceAll(label, "<br/>", ""), "")
			if strings.ContainsAny(label, "\"<>[]{}()|`;#") {
				t.Errorf("mermaid label not escaped: %s", l)
			}
		}
	}
	if !strings.Contains(mm, `#34;#62;#60;svg onload#61;alert#40;1#41;#62;`) {
		t.Errorf("mermaid does not entity-escape the hostile id:\n%s", mm)
	}

	md := render(t, e, "markdown")
	for _, bad := range []string{"<script", "<svg", "<img", "<style", "\n# heading"} {
		if strings.Contains(md, bad) {
			t.Errorf("markdown contains %q", bad)
		}
	}

	for _, f := range []string{"text", "markdown", "mermaid", "html"} {
		out := render(t, e, f)
		for _, r := range out {
			if textsafe.Unsafe(r) {
				t.Errorf("%s passes %U through", f, r)
			}
		}
	}
	const shown = `desc \u001b[31mred\u001b[0m \u202eevil \u0085c1 \u2066iso\u2069 zw\u200bsp soft\u00adhy \ufeffbom \u061calm \u0007bel`
	for _, f := range []string{"text", "markdown", "html"} {
		out := strings.Join(strings.Fields(render(t, e, f)), " ") // text wraps lines
		if f == "markdown" {
			out = strings.NewReplacer(`\\`, `\`, `\[`, `[`).Replace(out) // Markdown escapes
		}
		if !strings.Contains(out, shown) {
			t.Errorf("%s does not show control, bidi and invisible characters as \\u escapes:\n%s", f, out)
		}
	}
}

func TestRenderUnknownFormat(t *testing.T) {
	var b bytes.Buffer
	err := Render(&b, Build(nil, nil), "pdf")
	if err == nil || b.Len() > 0 {
		t.Fatalf("Render pdf: err %v, wrote %q", err, b.String())
	}
	for _, f := range Formats {
		if !strings.Contains(err.Error(), `"`+f+`"`) {
			t.Errorf("error %q does not list %q", err, f)
		}
	}
	if !slices.Equal(Formats, []string{"text", "markdown", "html", "mermaid", "json"}) {
		t.Errorf("Formats = %v", Formats)
	}
	if err := Render(&b, nil, "text"); err == nil {
		t.Errorf("Render of a nil explanation: no error")
	}
}

func TestHighest(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, RiskNone},
		{[]string{"read"}, "read"},
		{[]string{"read", "internal"}, "internal"},
		{[]string{"read", RiskUnknown}, RiskUnknown},
		{[]string{"customer_comms", RiskUnknown}, RiskUnknown},
		{[]string{RiskUnknown, "money"}, "money"},
		{[]string{RiskNone, "read"}, "read"},
		{[]string{RiskNone, RiskNone}, RiskNone},
	} {
		if got := highest(c.in); got != c.want {
			t.Errorf("highest(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestDocs: docs/explain.md shows the real text output and documents every
// member of the JSON contract.
func TestDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/explain.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	golden, err := os.ReadFile("testdata/failed-charge-recovery.txt")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "```\n"+string(golden)+"```") {
		t.Errorf("docs/explain.md does not show the current text output of failed-charge-recovery.json (testdata/failed-charge-recovery.txt)")
	}
	if !strings.Contains(text, "```mermaid\n"+render(t, build(t, "../examples/release-notes.json"), "mermaid")+"```") {
		t.Errorf("docs/explain.md does not show the current mermaid output of release-notes.json")
	}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] {
			return
		}
		seen[ty] = true
		for f := range ty.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !strings.Contains(text, `"`+name+`"`) && !strings.Contains(text, "`"+name+"`") {
				t.Errorf("docs/explain.md does not document member %q of %s", name, ty.Name())
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeFor[Explanation]())
	for _, f := range Formats {
		if !strings.Contains(text, "| `"+f+"`") {
			t.Errorf("docs/explain.md does not describe format %q", f)
		}
	}
}

// TestLayoutBounds: however the steps link, the graph stays inside its
// SVG canvas and draws one node per step.
func TestLayoutBounds(t *testing.T) {
	e := &Explanation{}
	for i := range 12 {
		st := Step{Index: i, ID: fmt.Sprintf("s%d", i), Kind: "agent", RiskClass: "read", Next: "s0"}
		if i%3 == 1 {
			st.Kind, st.OnReject, st.RiskClass = "gate", "s0", RiskNone
		}
		st.Ref = st.ID
		e.Steps = append(e.Steps, st)
	}
	g := layout(e)
	if len(g.Nodes) != len(e.Steps) {
		t.Fatalf("%d nodes for %d steps", len(g.Nodes), len(e.Steps))
	}
	num := regexp.MustCompile(`-?[0-9]+`)
	for _, ed := range g.Edges {
		for j, n := range num.FindAllString(ed.D, -1) {
			v, _ := strconv.Atoi(n)
			if v < 0 || j%2 == 0 && v > g.Width || v > max(g.Width, g.Height) {
				t.Errorf("edge %q leaves the %dx%d canvas", ed.D, g.Width, g.Height)
				break
			}
		}
	}
	for _, n := range g.Nodes {
		if n.X < 0 || n.Y < 0 || n.X+n.W > g.Width || n.Y+n.H > g.Height {
			t.Errorf("node %+v outside the canvas", n)
		}
	}
}
