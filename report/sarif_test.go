package report

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/openplaybook/openplaybook/diag"
)

// sarifSchemaFiles are two texts of the SARIF 2.1.0 JSON Schema (see
// testdata/README.md): rtm.5 (draft-04), and the final 2.1.0 one the SARIF
// Multitool ships (draft 2020-12).
var sarifSchemaFiles = []string{"testdata/sarif-2.1.0-rtm.5.json", "testdata/sarif-2.1.0-multitool-5.7.0.json"}

func compileSARIFSchema(t *testing.T, file string) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	const url = "mem:///sarif-2.1.0.json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSARIFSchema: the sarif output, clean and with every kind of
// diagnostic, is valid against the SARIF 2.1.0 schema.
func TestSARIFSchema(t *testing.T) {
	for _, file := range sarifSchemaFiles {
		t.Run(file, func(t *testing.T) { testSARIFSchema(t, compileSARIFSchema(t, file)) })
	}
}

func testSARIFSchema(t *testing.T, s *jsonschema.Schema) {
	ds := append([]diag.Diagnostic{
		{File: "/abs/dir with space/x.json", Line: 1, Column: 1, Severity: diag.Error, Rule: "internal", Message: "not in the catalog"},
		{File: "dir/sub:colon.json", Line: 1, Column: 1, Pointer: "/a~1b", Severity: diag.Warning, Rule: "unused-tool", Message: "m"},
	}, sample...)
	for name, ds := range map[string][]diag.Diagnostic{"clean": nil, "problems": ds} {
		t.Run(name, func(t *testing.T) {
			out := render(t, "sarif", sampleFiles, ds)
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(out)))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(v); err != nil {
				t.Errorf("sarif output is not valid SARIF 2.1.0:\n%v\n%s", err, out)
			}
		})
	}
	// The schema does catch what code scanning rejects.
	bad, _ := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(`{"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}},
		"results": [{"message": {"text": "m"}, "locations": [{"physicalLocation": {"region": {"startLine": 1, "startColumn": 0}}}]}]}]}`)))
	if err := s.Validate(bad); err == nil {
		t.Error("the SARIF schema accepted startColumn 0")
	}
}

// sarifOut is the part of a SARIF log the tests look at.
type sarifOut struct {
	Schema  string `json:"$schema"`
	Version string `json:"version"`
	Runs    []struct {
		ColumnKind string `json:"columnKind"`
		Tool       struct {
			Driver struct {
				Name, InformationURI, Version string
				SemanticVersion               string
				Rules                         []struct {
					ID               string `json:"id"`
					ShortDescription struct{ Text string }
					FullDescription  struct{ Text, Markdown string }
					Help             struct{ Text, Markdown string }
					HelpURI          string `json:"helpUri"`
				}
			}
		}
		Results []struct {
			RuleID    string `json:"ruleId"`
			RuleIndex int    `json:"ruleIndex"`
			Level     string
			Message   struct{ Text string }
			Locations []struct {
				PhysicalLocation struct {
					ArtifactLocation struct {
						URI       string `json:"uri"`
						URIBaseID string `json:"uriBaseId"`
					}
					Region *struct{ StartLine, StartColumn int }
				}
				LogicalLocations []struct{ FullyQualifiedName string }
			}
			PartialFingerprints map[string]string
		} `json:"results"`
	}
}

func decodeSARIF(t *testing.T, out string) sarifOut {
	t.Helper()
	var l sarifOut
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Runs) != 1 {
		t.Fatalf("got %d runs, want 1", len(l.Runs))
	}
	return l
}

func TestSARIFContent(t *testing.T) {
	ds := append([]diag.Diagnostic{
		{File: "x.json", Line: 1, Column: 1, Severity: diag.Error, Rule: "internal", Message: "panic"},
	}, sample...)
	l := decodeSARIF(t, render(t, "sarif", sampleFiles, ds))
	run := l.Runs[0]
	if l.Version != "2.1.0" || l.Schema == "" || run.ColumnKind != "utf16CodeUnits" {
		t.Errorf("version %q, $schema %q, columnKind %q", l.Version, l.Schema, run.ColumnKind)
	}
	d := run.Tool.Driver
	if d.Name != "openplaybook" || d.InformationURI == "" || d.Version != "v0.0.0-test" {
		t.Errorf("driver = %+v", d)
	}
	all := AllRules()
	if len(d.Rules) != len(all) {
		t.Errorf("driver has %d rules, want the %d of AllRules", len(d.Rules), len(all))
	}
	for i, r := range d.Rules {
		if r.ID != all[i].ID || r.ShortDescription.Text == "" || !strings.HasPrefix(r.HelpURI, docsURI+"docs/") ||
			r.FullDescription.Text == "" || r.FullDescription.Markdown == "" || r.Help.Text == "" || r.Help.Markdown == "" {
			t.Errorf("rule %d = %+v", i, r)
		}
	}
	if len(run.Results) != len(ds) {
		t.Fatalf("got %d results, want %d", len(run.Results), len(ds))
	}
	for i, r := range run.Results {
		if d.Rules[r.RuleIndex].ID != r.RuleID || r.RuleID != ds[i].Rule {
			t.Errorf("result %d: ruleId %q ruleIndex %d (rule %q)", i, r.RuleID, r.RuleIndex, d.Rules[r.RuleIndex].ID)
		}
		if r.Message.Text != ds[i].Message || len(r.Locations) != 1 {
			t.Errorf("result %d = %+v", i, r)
		}
	}
	levels := []string{"error", "error", "warning", "note"}
	for i, want := range levels {
		if run.Results[i].Level != want {
			t.Errorf("result %d level %q, want %q", i, run.Results[i].Level, want)
		}
	}
	loc := run.Results[1].Locations[0]
	if a := loc.PhysicalLocation.ArtifactLocation; a.URI != "a.json" || a.URIBaseID != "%SRCROOT%" {
		t.Errorf("artifactLocation = %+v", a)
	}
	if r := loc.PhysicalLocation.Region; r == nil || r.StartLine != 2 || r.StartColumn != 2 {
		t.Errorf("region = %+v", r)
	}
	if len(loc.LogicalLocations) != 1 || loc.LogicalLocations[0].FullyQualifiedName != "/openplaybook" {
		t.Errorf("logicalLocations = %+v", loc.LogicalLocations)
	}
	// a.json line 3 has "é" (2 bytes, 1 UTF-16 unit) before byte column 17.
	if r := run.Results[2].Locations[0].PhysicalLocation.Region; r == nil || r.StartColumn != 16 {
		t.Errorf("column after a two-byte character = %+v, want 16", r)
	}
	if loc := run.Results[3].Locations[0]; loc.PhysicalLocation.Region != nil || loc.LogicalLocations != nil {
		t.Errorf("a diagnostic without a place has location %+v", loc)
	}
	// Clean: results is [] (not null), so code scanning closes old alerts.
	var raw struct {
		Runs []map[string]json.RawMessage `json:"runs"`
	}
	if err := json.Unmarshal([]byte(render(t, "sarif", nil, nil)), &raw); err != nil {
		t.Fatal(err)
	}
	if got := string(raw.Runs[0]["results"]); got != "[]" {
		t.Errorf("clean results = %s, want []", got)
	}
}

func TestUTF16Column(t *testing.T) {
	tests := []struct {
		line string
		col  int
		want int
	}{
		{"abc", 1, 1},
		{"abc", 3, 3},
		{"\u00e9x", 3, 2},        // é: 2 bytes, 1 unit
		{"\u20acx", 4, 2},        // €: 3 bytes, 1 unit
		{"\U0001F600x", 5, 3},    // 😀: 4 bytes, 2 units
		{"a\xffb", 3, 3},         // an invalid byte counts as one unit
		{"ab", 5, 5},             // past the end: one unit a byte
		{"\U0001F600", 3, 3},     // inside a character: counts it whole
		{"\t\U0001F600\t", 7, 5}, // tabs are one unit
	}
	for _, tt := range tests {
		if got := utf16Column([]byte(tt.line), tt.col); got != tt.want {
			t.Errorf("utf16Column(%q, %d) = %d, want %d", tt.line, tt.col, got, tt.want)
		}
	}
}

func TestArtifactURI(t *testing.T) {
	tests := []struct{ name, uri, base string }{
		{"a.json", "a.json", "%SRCROOT%"},
		{"./dir/../examples/a.json", "examples/a.json", "%SRCROOT%"},
		{"my docs/a b.json", "my%20docs/a%20b.json", "%SRCROOT%"},
		{"c:x.json", "c%3Ax.json", "%SRCROOT%"},
		{"/tmp/a.json", "file:///tmp/a.json", ""},
		{"<stdin>", "%3Cstdin%3E", "%SRCROOT%"},
	}
	for _, tt := range tests {
		uri, base := artifactURI(tt.name)
		if uri != tt.uri || base != tt.base {
			t.Errorf("artifactURI(%q) = %q, %q; want %q, %q", tt.name, uri, base, tt.uri, tt.base)
		}
	}
}

// BenchmarkSARIFLongLine renders the sarif format, which converts each
// column to UTF-16 units, for diagnostics on minified one-line documents.
func BenchmarkSARIFLongLine(b *testing.B) {
	for _, bc := range []struct {
		name    string
		size, n int
	}{
		{"16MiB-10diags", 16 << 20, 10},
		{"50KB-5000diags", 50_000, 5000},
	} {
		f, ds := oneLine(bc.size, bc.n)
		files := []File{f}
		opts := &Options{Rules: []Rule{{ID: "r", Description: "r"}}}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := Write(io.Discard, "sarif", files, ds, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestUTF16ColumnsAgree: converting the columns of many diagnostics,
// given in any order, line by line from where the last one stopped, gives
// what converting each from the start of its line does.
func TestUTF16ColumnsAgree(t *testing.T) {
	src := "{\"a\": \"caf\u00e9 \U0001F600\tx\xff\xe2\x82\",\n\"\U0001F600\U0001F600\": 1}\n"
	files := []File{{Name: "a.json", Src: []byte(src)}}
	s := newSources(files)
	rng := rand.New(rand.NewPCG(3, 4))
	var ds []diag.Diagnostic
	for range 500 {
		ds = append(ds, diag.Diagnostic{File: []string{"a.json", "other.json"}[rng.IntN(2)], Line: rng.IntN(5), Column: rng.IntN(40)})
	}
	got := utf16Columns(s, ds)
	for i, d := range ds {
		want := max(d.Column, 1)
		if line, _, ok := s.line(d.File, d.Line); ok && d.Line > 0 {
			want = utf16Column(line, want)
		}
		if got[i] != want {
			t.Errorf("%s:%d:%d: column %d, want %d", d.File, d.Line, d.Column, got[i], want)
		}
	}
}
