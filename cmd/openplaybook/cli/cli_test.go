package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/report"
	"github.com/openplaybook/openplaybook/schema"
	"github.com/openplaybook/openplaybook/syntax"
	"github.com/openplaybook/openplaybook/validate"
)

// run runs the command line in process and returns its exit code, stdout
// and stderr.
func run(t *testing.T, stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	c := &CLI{Stdin: stdin, Stdout: &out, Stderr: &errb, Version: "v9.9.9-test"}
	code := c.Main(args)
	return code, out.String(), errb.String()
}

// variant returns examples/release-notes.json changed by edit, as JSON.
func variant(t *testing.T, edit func(doc map[string]any)) []byte {
	t.Helper()
	src, err := os.ReadFile("../../../examples/release-notes.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// withUnknownMember is a document with one error: an unknown member name
// in the first step.
func withUnknownMember(t *testing.T, name string) []byte {
	return variant(t, func(doc map[string]any) {
		doc["steps"].([]any)[0].(map[string]any)[name] = "x"
	})
}

// warningsOnly is a document whose only problem is a warning: a gate step
// that no step leads to.
func warningsOnly(t *testing.T) []byte {
	return variant(t, func(doc map[string]any) {
		doc["steps"] = append(doc["steps"].([]any), map[string]any{
			"id": "orphan", "kind": "gate", "purpose": "Nothing leads here.",
		})
	})
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// decodeJSON decodes the json format and checks its contract: an array of
// objects with exactly the seven members.
func decodeJSON(t *testing.T, out string) []map[string]any {
	t.Helper()
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("json output is not a JSON array of objects: %v\n%s", err, out)
	}
	if got == nil {
		t.Fatalf("json output is %q, want an array ([] when clean)", out)
	}
	want := []string{"column", "file", "line", "message", "pointer", "rule", "severity"}
	for i, o := range got {
		var keys []string
		for k := range o {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, want) {
			t.Errorf("object %d has members %v, want exactly %v", i, keys, want)
		}
	}
	return got
}

func TestValidateExamples(t *testing.T) {
	t.Parallel()
	code, out, errs := run(t, nil, "validate", "../../../examples/")
	if code != ExitOK || out != "" || errs != "" {
		t.Errorf("validate examples/: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	code, out, _ = run(t, nil, "validate", "--format", "json", "../../../examples")
	if code != ExitOK || out != "[]\n" {
		t.Errorf("validate --format json examples: exit %d, stdout %q; want 0 and []", code, out)
	}
}

func TestValidateError(t *testing.T) {
	t.Parallel()
	p := writeFile(t, t.TempDir(), "bad.json", withUnknownMember(t, "nxt"))
	code, out, errs := run(t, nil, "validate", "--format", "json", p)
	if code != ExitProblems || errs != "" {
		t.Fatalf("exit %d, stderr %q; want 1 and nothing", code, errs)
	}
	got := decodeJSON(t, out)
	found := false
	for _, o := range got {
		if o["rule"] == "unknown-member" && o["severity"] == "error" && o["file"] == p &&
			o["pointer"] == "/steps/0/nxt" && o["line"].(float64) > 0 && o["column"].(float64) > 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("no unknown-member error at /steps/0/nxt in\n%s", out)
	}

	code, out, _ = run(t, nil, "validate", p)
	if code != ExitProblems || !strings.Contains(out, ": error: unknown member \"nxt\"") ||
		!strings.Contains(out, "[unknown-member]") || !strings.Contains(out, "^\n") ||
		!strings.HasSuffix(out, " errors, 0 warnings\n") && !strings.HasSuffix(out, "1 error, 0 warnings\n") {
		t.Errorf("text output, exit %d:\n%s", code, out)
	}
}

func TestStrict(t *testing.T) {
	t.Parallel()
	p := writeFile(t, t.TempDir(), "warn.json", warningsOnly(t))
	code, out, _ := run(t, nil, "validate", "--format", "json", p)
	ds := decodeJSON(t, out)
	var sevs []string
	for _, d := range ds {
		sevs = append(sevs, d["severity"].(string))
	}
	if len(ds) == 0 || slices.Contains(sevs, "error") {
		t.Fatalf("the fixture should give warnings only, got %v:\n%s", sevs, out)
	}
	if code != ExitOK {
		t.Errorf("warnings only: exit %d, want 0", code)
	}
	if code, _, _ := run(t, nil, "validate", "--strict", p); code != ExitProblems {
		t.Errorf("warnings only with --strict: exit %d, want 1", code)
	}
}

func TestUnreadable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := writeFile(t, dir, "good.json", warningsOnly(t))
	missing := filepath.Join(dir, "missing.json")
	code, out, errs := run(t, nil, "validate", good, missing)
	if code != ExitUsage || out != "" {
		t.Errorf("missing file: exit %d, stdout %q; want 2 and no report", code, out)
	}
	if !strings.Contains(errs, "openplaybook: stat "+missing+": no such file or directory") {
		t.Errorf("stderr does not give the OS error: %q", errs)
	}
	// A file used as a directory.
	code, _, errs = run(t, nil, "validate", filepath.Join(good, "x.json"))
	if code != ExitUsage || !strings.Contains(errs, "not a directory") {
		t.Errorf("path through a file: exit %d, stderr %q", code, errs)
	}
	// Every bad path is reported, one a line.
	code, _, errs = run(t, nil, "validate", missing, missing+"2")
	if code != ExitUsage || strings.Count(errs, "openplaybook: stat ") != 2 {
		t.Errorf("two missing files: exit %d, stderr %q", code, errs)
	}
}

func TestEmptyDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "notes.txt", []byte("hi"))
	if err := os.Mkdir(filepath.Join(dir, "sub.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sub.json"), "deep.json", []byte("{}"))
	code, out, errs := run(t, nil, "validate", dir)
	if code != ExitUsage || out != "" || !strings.Contains(errs, "has no *.json files") {
		t.Errorf("directory without *.json: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestStdin(t *testing.T) {
	t.Parallel()
	code, out, errs := run(t, bytes.NewReader(withUnknownMember(t, "nxt")), "validate", "-f", "json", "-")
	if code != ExitProblems || errs != "" {
		t.Fatalf("stdin: exit %d, stderr %q", code, errs)
	}
	for _, d := range decodeJSON(t, out) {
		if d["file"] != StdinName {
			t.Errorf("a diagnostic of stdin names file %q, want %q", d["file"], StdinName)
		}
	}
	src, _ := os.ReadFile("../../../examples/release-notes.json")
	if code, out, _ := run(t, bytes.NewReader(src), "validate", "-"); code != ExitOK || out != "" {
		t.Errorf("valid stdin: exit %d, stdout %q", code, out)
	}
	if code, _, errs := run(t, bytes.NewReader(src), "validate", "-", "-"); code != ExitUsage || errs == "" {
		t.Errorf(`"-" twice: exit %d, stderr %q; want 2 and a message`, code, errs)
	}
}

func TestSARIF(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := writeFile(t, dir, "bad.json", withUnknownMember(t, "nxt"))
	code, out, _ := run(t, nil, "validate", "--format=sarif", p)
	if code != ExitProblems {
		t.Errorf("exit %d, want 1", code)
	}
	var log struct {
		Schema  string `json:"$schema"`
		Version string `json:"version"`
		Runs    []struct {
			Tool struct {
				Driver struct {
					Name           string `json:"name"`
					InformationURI string `json:"informationUri"`
					Version        string `json:"version"`
					Rules          []struct {
						ID               string `json:"id"`
						ShortDescription struct {
							Text string `json:"text"`
						} `json:"shortDescription"`
					} `json:"rules"`
				} `json:"driver"`
			} `json:"tool"`
			Results []struct {
				RuleID    string `json:"ruleId"`
				RuleIndex int    `json:"ruleIndex"`
				Level     string `json:"level"`
				Message   struct {
					Text string `json:"text"`
				} `json:"message"`
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct {
							URI string `json:"uri"`
						} `json:"artifactLocation"`
						Region struct {
							StartLine   int `json:"startLine"`
							StartColumn int `json:"startColumn"`
						} `json:"region"`
					} `json:"physicalLocation"`
				} `json:"locations"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &log); err != nil {
		t.Fatalf("sarif output is not JSON: %v", err)
	}
	if log.Version != "2.1.0" || log.Schema == "" || len(log.Runs) != 1 {
		t.Fatalf("version %q, $schema %q, %d runs", log.Version, log.Schema, len(log.Runs))
	}
	run := log.Runs[0]
	if d := run.Tool.Driver; d.Name != "openplaybook" || d.InformationURI == "" || d.Version != "v9.9.9-test" || len(d.Rules) < len(validate.AllRuleNames()) {
		t.Errorf("driver: name %q, informationUri %q, version %q, %d rules", d.Name, d.InformationURI, d.Version, len(d.Rules))
	}
	if len(run.Results) == 0 {
		t.Fatal("no results")
	}
	for _, r := range run.Results {
		if r.RuleID == "" || run.Tool.Driver.Rules[r.RuleIndex].ID != r.RuleID || r.Level == "" || r.Message.Text == "" ||
			len(r.Locations) != 1 || r.Locations[0].PhysicalLocation.ArtifactLocation.URI != "file://"+filepath.ToSlash(p) ||
			r.Locations[0].PhysicalLocation.Region.StartLine < 1 || r.Locations[0].PhysicalLocation.Region.StartColumn < 1 {
			t.Errorf("result %+v", r)
		}
	}
}

func TestGitHubFormat(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a,b")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, dir, "x:y.json", withUnknownMember(t, "100%"))
	code, out, _ := run(t, nil, "validate", "--format", "github", p)
	if code != ExitProblems {
		t.Errorf("exit %d, want 1", code)
	}
	escaped := strings.NewReplacer(",", "%2C", ":", "%3A").Replace(filepath.ToSlash(p))
	wantPrefix := "::error file=" + escaped + ",line="
	if !strings.HasPrefix(out, wantPrefix) {
		t.Errorf("output does not start with %q:\n%s", wantPrefix, out)
	}
	if !strings.Contains(out, ",title=unknown-member::unknown member \"100%25\"") {
		t.Errorf("the message's %% is not escaped:\n%s", out)
	}
	if strings.Count(out, "\n") != strings.Count(out, "::error ")+strings.Count(out, "::warning ")+strings.Count(out, "::notice ") {
		t.Errorf("a command spans lines:\n%s", out)
	}
}

// TestDeterministic: many files, checked in parallel, give the same report
// every time, sorted by file name and then position.
func TestDeterministic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := withUnknownMember(t, "nxt")
	warn := warningsOnly(t)
	for i := range 40 {
		writeFile(t, dir, fmt.Sprintf("doc-%02d.json", i), bad)
		writeFile(t, dir, fmt.Sprintf("warn-%02d.json", i), warn)
	}
	for _, format := range []string{"text", "json", "sarif", "github"} {
		_, first, _ := run(t, nil, "validate", "-f", format, dir)
		for range 3 {
			if _, again, _ := run(t, nil, "validate", "-f", format, dir); again != first {
				t.Fatalf("%s: two runs over the same files differ", format)
			}
		}
	}
	_, out, _ := run(t, nil, "validate", "-f", "json", dir)
	ds := decodeJSON(t, out)
	if !slices.IsSortedFunc(ds, func(a, b map[string]any) int {
		return strings.Compare(a["file"].(string), b["file"].(string))
	}) {
		t.Error("json output is not sorted by file")
	}
	files := map[any]bool{}
	for _, d := range ds {
		files[d["file"]] = true
	}
	if len(files) != 80 {
		t.Errorf("diagnostics name %d files, want 80", len(files))
	}
}

func TestSamePathTwice(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := writeFile(t, dir, "bad.json", withUnknownMember(t, "nxt"))
	_, once, _ := run(t, nil, "validate", "-f", "json", p)
	_, twice, _ := run(t, nil, "validate", "-f", "json", p, dir, dir+"/./bad.json")
	if once != twice {
		t.Errorf("a file named twice is reported twice:\n%s", twice)
	}
}

func TestTooLarge(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "huge.json")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(syntax.DefaultMaxSize + 1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	code, out, _ := run(t, nil, "validate", "-f", "json", p)
	ds := decodeJSON(t, out)
	if code != ExitProblems || len(ds) != 1 || ds[0]["rule"] != syntax.RuleLimit {
		t.Errorf("file over the size limit: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, io.LimitReader(zeros{}, syntax.DefaultMaxSize+10), "validate", "-f", "json", "-")
	ds = decodeJSON(t, out)
	if code != ExitProblems || len(ds) != 1 || ds[0]["rule"] != syntax.RuleLimit {
		t.Errorf("stdin over the size limit: exit %d\n%s", code, out)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string // in stderr
	}{
		{nil, "Usage:"},
		{[]string{"validate"}, "validate needs at least one PATH"},
		{[]string{"validate", "--format", "xml", "x.json"}, "must be one of text, json, sarif, github"},
		{[]string{"validate", "--nope", "x.json"}, "unknown flag: --nope"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"schema", "extra"}, "unknown command"},
	}
	for _, tt := range tests {
		code, out, errs := run(t, nil, tt.args...)
		if code != ExitUsage || !strings.Contains(errs, tt.want) || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", tt.args, code, out, errs, tt.want)
		}
	}
	if code, out, _ := run(t, nil, "--help"); code != ExitOK || !strings.Contains(out, "validate") {
		t.Errorf("--help: exit %d, stdout %q", code, out)
	}
	if code, out, _ := run(t, nil, "validate", "--help"); code != ExitOK || !strings.Contains(out, "--strict") {
		t.Errorf("validate --help: exit %d, stdout %q", code, out)
	}
}

func TestSchemaCommand(t *testing.T) {
	t.Parallel()
	code, out, _ := run(t, nil, "schema")
	if code != ExitOK || out != string(schema.JSON()) {
		t.Errorf("schema: exit %d, output is not the embedded schema", code)
	}
}

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	code, out, _ := run(t, nil, "version")
	if code != ExitOK || !strings.HasPrefix(out, "openplaybook v9.9.9-test\n") {
		t.Errorf("version: exit %d, %q", code, out)
	}
	if v := (&CLI{}).version(); v == "" {
		t.Error("the default version is empty")
	}
}

func TestRulesCommand(t *testing.T) {
	t.Parallel()
	code, out, _ := run(t, nil, "rules")
	if code != ExitOK {
		t.Errorf("rules: exit %d", code)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	names := validate.AllRuleNames()
	if len(lines) != len(names) {
		t.Fatalf("rules printed %d lines for %d rules", len(lines), len(names))
	}
	for i, name := range names {
		if f := strings.Fields(lines[i]); len(f) < 2 || f[0] != name {
			t.Errorf("line %d = %q, want rule %q and its description", i, lines[i], name)
		}
	}
}

// TestNilStreams: a CLI with no streams does not panic.
func TestNilStreams(t *testing.T) {
	t.Parallel()
	if code := (&CLI{}).Main([]string{"validate", "-"}); code != ExitProblems {
		t.Errorf("empty stdin: exit %d, want 1 (a syntax error)", code)
	}
}

func TestExplain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.json", withUnknownMember(t, "nxt"))
	for _, f := range []string{"text", "markdown", "html", "mermaid", "json"} {
		code, out, errs := run(t, nil, "explain", "--format", f, "../../../examples/release-notes.json")
		if code != ExitOK || out == "" || errs != "" {
			t.Errorf("explain --format %s: exit %d, %d bytes out, stderr %q", f, code, len(out), errs)
		}
	}
	// Problems do not fail explain; they are part of the explanation.
	code, out, _ := run(t, nil, "explain", "-f", "json", bad)
	var e struct {
		Problems []struct{ Rule string } `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatal(err)
	}
	if code != ExitOK || len(e.Problems) == 0 || e.Problems[0].Rule == "" {
		t.Errorf("explain of an invalid document: exit %d, problems %+v", code, e.Problems)
	}
	src, _ := os.ReadFile(bad)
	code, out, _ = run(t, bytes.NewReader(src), "explain", "-f", "json", "-")
	var se struct {
		Problems []struct{ File string } `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &se); err != nil || code != ExitOK || len(se.Problems) == 0 || se.Problems[0].File != StdinName {
		t.Errorf("explain -: exit %d, err %v\n%s", code, err, out)
	}
	for _, args := range [][]string{
		{"explain"},
		{"explain", bad, bad},
		{"explain", filepath.Join(dir, "missing.json")},
		{"explain", dir},
		{"explain", "-f", "pdf", bad},
	} {
		if code, out, errs := run(t, nil, args...); code != ExitUsage || out != "" || errs == "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and a message", args, code, out, errs)
		}
	}
}

// TestDocs: docs/cli.md lists every command and has a section for each and every
// validate format, and documents every exit code.
func TestDocs(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, cmd := range (&CLI{}).root().Commands() {
		if cmd.Hidden || cmd.Name() == "help" {
			continue
		}
		if !strings.Contains(text, "\n## "+cmd.Name()+"\n") {
			t.Errorf("docs/cli.md has no section \"## %s\"", cmd.Name())
		}
		if !strings.Contains(text, "[`"+cmd.Name()+"`](#"+cmd.Name()+")") {
			t.Errorf("docs/cli.md's command list has no [`%s`](#%s)", cmd.Name(), cmd.Name())
		}
	}
	for _, f := range report.Formats {
		if !strings.Contains(text, "\n### `--format "+f+"`") {
			t.Errorf("docs/cli.md has no section for --format %s", f)
		}
	}
	for _, code := range []int{ExitOK, ExitProblems, ExitUsage, ExitInternal} {
		if !strings.Contains(text, fmt.Sprintf("\n| %d | ", code)) {
			t.Errorf("docs/cli.md does not document exit code %d", code)
		}
	}
}

// TestMaxSize: --max-size raises (or lowers) the size limit of validate,
// check and explain, in bytes or with a unit; the limit error names the
// limit and the flag.
func TestMaxSize(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "doc.json")
	if err := os.WriteFile(p, []byte(`{"openplaybook": "1.6"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := run(t, nil, "validate", "-f", "json", "--max-size", "10", p)
	ds := decodeJSON(t, out)
	if code != ExitProblems || len(ds) != 1 || ds[0]["rule"] != syntax.RuleLimit ||
		ds[0]["message"] != "document is 23 bytes; the limit is 10 bytes, raise it with --max-size" {
		t.Errorf("validate --max-size 10: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, strings.NewReader(strings.Repeat(" ", 2000)), "validate", "-f", "json", "--max-size", "1KiB", "-")
	ds = decodeJSON(t, out)
	if code != ExitProblems || len(ds) != 1 || ds[0]["rule"] != syntax.RuleLimit ||
		ds[0]["message"] != "document is more than 1024 bytes; the limit is 1024 bytes (1KiB), raise it with --max-size" {
		t.Errorf("validate --max-size 1KiB -: exit %d\n%s", code, out)
	}
	for _, v := range []string{"23", "1kb", "64MiB", "64MB", "1GiB", " 2 KiB"} {
		code, out, _ = run(t, nil, "validate", "-f", "json", "--max-size", v, p)
		for _, d := range decodeJSON(t, out) {
			if d["rule"] == syntax.RuleLimit {
				t.Errorf("validate --max-size %q: %v", v, d)
			}
		}
		if code == ExitUsage {
			t.Errorf("validate --max-size %q: exit %d", v, code)
		}
	}
	for _, v := range []string{"0", "-1", "abc", "2GiB", "1.5MB", "12 parsecs", "99999999999999999999"} {
		if code, _, _ := run(t, nil, "validate", "--max-size", v, p); code != ExitUsage {
			t.Errorf("validate --max-size %q: exit %d, want %d", v, code, ExitUsage)
		}
	}
	if code, out, _ := run(t, nil, "explain", "-f", "json", "--max-size", "10", p); code != ExitOK || !strings.Contains(out, "raise it with --max-size") {
		t.Errorf("explain --max-size 10: exit %d\n%s", code, out)
	}
}
