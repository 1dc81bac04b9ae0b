package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/validate"
)

const doc = "{\n\t\"openplaybook\": \"1.6\",\n  \"x\": \"caf\u00e9\", \"y\": 1\n}\n"

var sample = []diag.Diagnostic{
	{File: "a.json", Line: 2, Column: 2, Pointer: "/openplaybook", Severity: diag.Error, Rule: "version", Message: "bad version"},
	{File: "a.json", Line: 3, Column: 17, Pointer: "/y", Severity: diag.Warning, Rule: "unknown-member", Message: `unknown member "y"`},
	{File: "b.json", Line: 0, Column: 0, Pointer: "", Severity: diag.Info, Rule: "limit", Message: "no place"},
}

var sampleFiles = []File{{Name: "a.json", Src: []byte(doc)}}

func render(t *testing.T, format string, files []File, ds []diag.Diagnostic) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, format, files, ds, &Options{ToolVersion: "v0.0.0-test"}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestText(t *testing.T) {
	got := render(t, "text", sampleFiles, sample)
	want := "a.json:2:2: error: bad version [version]\n" +
		" 2 | \t\"openplaybook\": \"1.6\",\n" +
		" 2 | \t^\n" +
		"a.json:3:17: warning: unknown member \"y\" [unknown-member]\n" +
		" 3 |   \"x\": \"caf\u00e9\", \"y\": 1\n" +
		"   |                ^\n" +
		"b.json: info: no place [limit]\n" +
		"1 error, 1 warning, 1 info\n"
	want = strings.Replace(want, " 2 | \t^", "   | \t^", 1)
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := render(t, "text", nil, nil); got != "" {
		t.Errorf("clean text output = %q, want nothing", got)
	}
}

func TestSnippet(t *testing.T) {
	tests := []struct {
		line      string
		col       int
		text, pad string
	}{
		{"abc", 1, "abc", ""},
		{"abc", 3, "abc", "  "},
		{"abc", 4, "abc", "   "}, // just past the end
		{"abc", 99, "abc", "   "},
		{"\t\tx", 3, "\t\tx", "\t\t"},
		{"\u00e9x", 3, "\u00e9x", " "}, // é is two bytes, one character
		{"a\x1b[31mb", 7, "a\uFFFD[31mb", "      "},
		{"a\xffb", 3, "a\uFFFDb", "  "},
		{"a\u202eb", 5, "a\uFFFDb", "  "},
	}
	for _, tt := range tests {
		text, pad := snippet([]byte(tt.line), tt.col, nil, 0)
		if text != tt.text || pad != tt.pad {
			t.Errorf("snippet(%q, %d) = %q, %q; want %q, %q", tt.line, tt.col, text, pad, tt.text, tt.pad)
		}
	}
}

func TestSnippetLongLine(t *testing.T) {
	line := strings.Repeat("a", 300) + "X" + strings.Repeat("b", 300)
	text, pad := snippet([]byte(line), 301, nil, 0)
	if !strings.HasPrefix(text, "...") || !strings.HasSuffix(text, "...") {
		t.Errorf("a long line is not cut on both sides: %q", text)
	}
	if len(text) > snippetWidth+6 {
		t.Errorf("cut line is %d bytes long", len(text))
	}
	if text[len(pad)] != 'X' {
		t.Errorf("caret is under %q, want under X", text[len(pad)])
	}
	text, pad = snippet([]byte(line), 1, nil, 0)
	if strings.HasPrefix(text, "...") || pad != "" {
		t.Errorf("column 1 of a long line: text %q pad %q", text[:10], pad)
	}
	text, pad = snippet([]byte(line), len(line)+1, nil, 0)
	if strings.HasSuffix(text, "...") || len(pad) != len(text) {
		t.Errorf("end of a long line: text ...%q pad %d bytes", text[len(text)-10:], len(pad))
	}
}

func TestTextCRLF(t *testing.T) {
	files := []File{{Name: "c.json", Src: []byte("{\r\n  \"a\": 1\r\n}\r\n")}}
	got := render(t, "text", files, []diag.Diagnostic{{File: "c.json", Line: 2, Column: 3, Severity: diag.Error, Rule: "r", Message: "m"}})
	if !strings.Contains(got, " 2 |   \"a\": 1\n   |   ^\n") {
		t.Errorf("CRLF line not shown without its \\r:\n%q", got)
	}
}

// TestJSONContract: the json format is an array of objects with exactly the
// seven documented members, of the documented types; [] when clean.
func TestJSONContract(t *testing.T) {
	if got := render(t, "json", nil, nil); got != "[]\n" {
		t.Errorf("clean json output = %q, want \"[]\\n\"", got)
	}
	out := render(t, "json", sampleFiles, sample)
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(sample) {
		t.Fatalf("got %d objects, want %d", len(got), len(sample))
	}
	members := []string{"column", "file", "line", "message", "pointer", "rule", "severity"}
	for i, o := range got {
		var keys []string
		for k := range o {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, members) {
			t.Errorf("object %d has members %v, want exactly %v", i, keys, members)
		}
	}
	first := got[0]
	if first["file"] != "a.json" || first["line"] != 2.0 || first["column"] != 2.0 ||
		first["pointer"] != "/openplaybook" || first["severity"] != "error" ||
		first["rule"] != "version" || first["message"] != "bad version" {
		t.Errorf("first object = %v", first)
	}
	if got[2]["severity"] != "info" || got[2]["line"] != 0.0 {
		t.Errorf("third object = %v", got[2])
	}
	if strings.Contains(render(t, "json", nil, []diag.Diagnostic{{Message: "a <b> & c"}}), `\u003c`) {
		t.Error("json output escapes HTML characters")
	}
}

func TestGitHub(t *testing.T) {
	ds := []diag.Diagnostic{
		{File: "dir,x/a:b.json", Line: 3, Column: 4, Severity: diag.Error, Rule: "syntax", Message: "100% bad\nsecond line\r"},
		{File: "a.json", Line: 1, Column: 1, Severity: diag.Warning, Rule: "unused-tool", Message: "w: a, b"},
		{File: "a.json", Severity: diag.Info, Rule: "limit", Message: "i"},
	}
	got := render(t, "github", nil, ds)
	want := "::error file=dir%2Cx/a%3Ab.json,line=3,col=4,title=syntax::100%25 bad%0Asecond line%0D\n" +
		"::warning file=a.json,line=1,col=1,title=unused-tool::w: a, b\n" +
		"::notice file=a.json,title=limit::i\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := render(t, "github", nil, nil); got != "" {
		t.Errorf("clean github output = %q, want nothing", got)
	}
}

func TestUnknownFormat(t *testing.T) {
	var b bytes.Buffer
	err := Write(&b, "xml", nil, sample, nil)
	if err == nil || !strings.Contains(err.Error(), `"text", "json", "sarif", "github"`) {
		t.Errorf("unknown format: err = %v, want one listing the valid formats", err)
	}
	if b.Len() != 0 {
		t.Errorf("unknown format wrote %q", b.String())
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteError(t *testing.T) {
	for _, f := range Formats {
		if err := Write(failWriter{}, f, nil, sample, nil); err == nil {
			t.Errorf("%s: the writer's error was lost", f)
		}
	}
}

// TestCatalog: every rule id has a description, and the reader's table
// names no rule that does not exist.
func TestCatalog(t *testing.T) {
	cat := Catalog()
	names := validate.AllRuleNames()
	if len(cat) != len(names) {
		t.Fatalf("Catalog has %d rules, AllRuleNames %d", len(cat), len(names))
	}
	for i, r := range cat {
		if r.ID != names[i] {
			t.Errorf("Catalog()[%d] = %q, want %q", i, r.ID, names[i])
		}
		if r.Description == "" {
			t.Errorf("rule %q has no description", r.ID)
		}
	}
	for id := range readerRules {
		if !slices.Contains(names, id) {
			t.Errorf("readerRules describes %q, which is not a rule", id)
		}
	}
}

func Example() {
	src := []byte("{\n  \"openplaybook\": \"2.0\"\n}\n")
	ds := []diag.Diagnostic{{
		File: "p.json", Line: 2, Column: 19, Pointer: "/openplaybook",
		Severity: diag.Error, Rule: "version",
		Message: `format version "2.0" is not read by this runtime; it reads 1.0 to 1.6`,
	}}
	_ = Write(os.Stdout, "text", []File{{Name: "p.json", Src: src}}, ds, nil)
	// Output:
	// p.json:2:19: error: format version "2.0" is not read by this runtime; it reads 1.0 to 1.6 [version]
	//  2 |   "openplaybook": "2.0"
	//    |                   ^
	// 1 error, 0 warnings
}

func TestTextHidesControlCharacters(t *testing.T) {
	ds := []diag.Diagnostic{{File: "a\x1b[2J.json", Severity: diag.Error, Rule: "r", Message: "bad \"\x1b]0;x\x07\"\nnext\u202e \xff"}}
	got := render(t, "text", nil, ds)
	want := "a\uFFFD[2J.json: error: bad \"\uFFFD]0;x\uFFFD\"\uFFFDnext\uFFFD \uFFFD [r]\n1 error, 0 warnings\n"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestTextDetailLines: a message's detail lines (after "\n\t", as an MCP
// server's stderr tail) are shown each on an indented line of its own,
// between the diagnostic and its snippet, cleaned like the message; other
// line breaks stay hidden.
func TestTextDetailLines(t *testing.T) {
	ds := []diag.Diagnostic{
		{File: "a.json", Line: 2, Column: 2, Severity: diag.Error, Rule: "preflight-mcp-server",
			Message: "mcp server \"m\": initialize: server exited (exit status 3); its stderr ends:\n\tstarting\n\tboom\x1b[2J: no\ndatabase"},
		{File: "b.json", Severity: diag.Error, Rule: "r", Message: "no place:\n\tone"},
	}
	got := render(t, "text", sampleFiles, ds)
	want := "a.json:2:2: error: mcp server \"m\": initialize: server exited (exit status 3); its stderr ends: [preflight-mcp-server]\n" +
		"    starting\n" +
		"    boom\uFFFD[2J: no\uFFFDdatabase\n" +
		" 2 | \t\"openplaybook\": \"1.6\",\n" +
		"   | \t^\n" +
		"b.json: error: no place: [r]\n" +
		"    one\n" +
		"2 errors, 0 warnings\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
