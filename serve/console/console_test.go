package console

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/runtime"
)

// TestGraphIsWhole: explain's step graph, cut from its html rendering,
// holds every step even when a step's text tries to end the <svg> or the
// legend early, and nothing of that text comes out as markup.
func TestGraphIsWhole(t *testing.T) {
	doc := `{"openplaybook": "1.6", "manifest": {"id": "g", "name": "G", "version": "1.0.0", "description": "d", "requiredConnectors": []},
  "requires": {"connections": [], "mcpServers": [], "secrets": []}, "tools": [],
  "steps": [
    {"id": "first", "kind": "gate", "purpose": "</svg></div><script>alert(1)</script>\u202e", "next": "second"},
    {"id": "second", "kind": "gate", "purpose": "the last"}
  ]}`
	g := string(graph(check("g.json", []byte(doc)).Explanation))
	if !strings.HasPrefix(g, "<svg ") || strings.Count(g, "<svg") != 1 || strings.Count(g, "</svg>") != 1 {
		t.Fatalf("not one whole <svg>:\n%s", g)
	}
	if strings.Contains(g, "<script") || strings.Contains(g, "\u202e") {
		t.Fatalf("document text came out as markup or a raw bidi override:\n%s", g)
	}
	for _, want := range []string{">first<", ">second<", `class="legend"`, "&lt;/svg&gt;"} {
		if !strings.Contains(g, want) {
			t.Errorf("the graph lacks %q:\n%s", want, g)
		}
	}
	if !strings.HasSuffix(g, "</div>") || strings.Count(g, "<div") != 1 {
		t.Errorf("the legend is not whole:\n%s", g)
	}
}

// TestGraphCSS: the graph's styles are explain's, and only those.
func TestGraphCSS(t *testing.T) {
	css := string(graphCSS())
	for _, want := range []string{"svg .edge", ".risk-money", ".legend i"} {
		if !strings.Contains(css, want) {
			t.Errorf("graph.css lacks %q:\n%s", want, css)
		}
	}
	for _, not := range []string{"body {", "main {", "h1 {"} {
		if strings.Contains(css, not) {
			t.Errorf("graph.css has the page rule %q", not)
		}
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"/approvals":            "/approvals",
		"/runs/run_1?verify=1":  "/runs/run_1?verify=1",
		"":                      "/",
		"approvals":             "/",
		"//evil.example/":       "/",
		`/\evil.example`:        "/",
		"https://evil.example/": "/",
		"/x\r\nSet-Cookie: a=b": "/",
	} {
		if got := localPath(in, "/"); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

type noSecrets struct{ Backend }

func (noSecrets) Redact(s string) string {
	return strings.ReplaceAll(s, "hunter2hunter2", "[redacted]")
}

// TestArguments: every member of a call's arguments, in order and whole;
// strings as themselves with unsafe characters escaped and secrets
// redacted.
func TestArguments(t *testing.T) {
	c := &Console{b: noSecrets{}}
	long := strings.Repeat("x", 5000)
	args := c.arguments(jsontext.Value(`{"to":"a@example.com","body":"line 1\nline 2 \u202e","n":[1,{"k":true}],"key":"hunter2hunter2","long":"` + long + `"}`))
	if len(args) != 5 {
		t.Fatalf("%d members: %+v", len(args), args)
	}
	want := []argument{
		{Name: "to", Kind: "string", Value: "a@example.com", Bytes: 13, Lines: 1},
		{Name: "body", Kind: "string", Value: "line 1\nline 2 \\u202e", Bytes: 17, Lines: 2},
		{Name: "n", Kind: "array", Value: "[\n  1,\n  {\n    \"k\": true\n  }\n]", Bytes: 14, Lines: 1},
		{Name: "key", Kind: "string", Value: "[redacted]", Bytes: 14, Lines: 1},
		{Name: "long", Kind: "string", Value: long, Bytes: 5000, Lines: 1},
	}
	for i, w := range want {
		if args[i] != w {
			t.Errorf("member %d: %+v, want %+v", i, args[i], w)
		}
	}
	// Not an object: the whole value.
	if a := c.arguments(jsontext.Value(`[1,2]`)); len(a) != 1 || a[0].Name != "" || a[0].Value != "[\n  1,\n  2\n]" {
		t.Errorf("an array: %+v", a)
	}
	if a := c.arguments(jsontext.Value(`{}`)); len(a) != 1 || a[0].Value != "{}" {
		t.Errorf("an empty object: %+v", a)
	}
}

// TestAgentTextOnCard: a call's card shows the agent's words from its
// approval.requested record, after what the call does and labelled as the
// agent's own unchecked text, with markup escaped (never markup), a bidi
// override shown as \u202e, line breaks kept and secret values redacted;
// a card whose record has no text has no such section.
func TestAgentTextOnCard(t *testing.T) {
	c := &Console{b: noSecrets{}}
	c.pages = parsePages(c.funcs())
	card := func(ar *runtime.ApprovalRequested) string {
		t.Helper()
		var buf bytes.Buffer
		v := pendingView{Pending: Pending{Run: "run_1", Pending: runtime.Pending{Kind: "call", ID: "apr_1", Step: "act", Tool: "charge.refund"}}, Requested: ar, Does: "Refund a charge"}
		if err := c.pages["approvals"].ExecuteTemplate(&buf, "pending", v); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	said := "Charged twice for order 1234,\nso I refund ch_2. <script>alert(1)</script> \u202e key hunter2hunter2"
	got := card(&runtime.ApprovalRequested{Approval: "apr_1", AgentText: said})
	for _, want := range []string{
		`<h4 id="said-apr_1">The agent's words before this call</h4>`,
		"(its own text, as the model wrote it; nothing checks it)",
		"Charged twice for order 1234,\nso I refund ch_2. &lt;script&gt;alert(1)&lt;/script&gt; \\u202e key [redacted]</p></blockquote>",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the card lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"<script>", "\u202e", "hunter2hunter2"} {
		if strings.Contains(got, bad) {
			t.Errorf("the card holds %q:\n%s", bad, got)
		}
	}
	if does, words := strings.Index(got, "What this call does"), strings.Index(got, "The agent's words"); does < 0 || words < does || words > strings.Index(got, "Arguments: exactly what runs") {
		t.Errorf("the agent's words are not right after what the call does:\n%s", got)
	}
	for _, ar := range []*runtime.ApprovalRequested{nil, {Approval: "apr_1"}} {
		if got := card(ar); strings.Contains(got, "agent-text") || strings.Contains(got, "words before") {
			t.Errorf("a card with no agent text (%+v) shows the section:\n%s", ar, got)
		}
	}
}
