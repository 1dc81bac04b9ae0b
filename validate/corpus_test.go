package validate

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
)

var update = flag.Bool("update", false, "rewrite the golden .out files of testdata/err")

// check reads and validates one file the way `openplaybook validate` does.
func check(t testing.TB, path string) []diag.Diagnostic {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, ds := playbook.Read(filepath.Base(path), src, nil)
	ds = append(ds, Document(doc, nil)...)
	diag.Sort(ds)
	return ds
}

// golden renders diagnostics one per line: line:col pointer severity rule: message.
func golden(ds []diag.Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "%d:%d %s %s %s: %s\n", d.Line, d.Column, orRoot(d.Pointer), d.Severity, d.Rule, d.Message)
	}
	return b.String()
}

func orRoot(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}

// TestValidCorpus: every example and every file of testdata/ok gives no
// diagnostic at all.
func TestValidCorpus(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.json")
	ok, _ := filepath.Glob("../testdata/ok/*.json")
	files = append(files, ok...)
	if len(files) < 7 {
		t.Fatalf("found only %d valid documents", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if ds := check(t, f); len(ds) > 0 {
				t.Errorf("want no diagnostics, got:\n%s", golden(ds))
			}
		})
	}
}

// TestInvalidCorpus: every file of testdata/err gives exactly the
// diagnostics of its golden .out file. Run with -update to rewrite them
// (-run 'TestInvalidCorpus/^r1-' -update rewrites only the matching ones),
// then read the diff.
func TestInvalidCorpus(t *testing.T) {
	files, _ := filepath.Glob("../testdata/err/*.json")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			got := golden(check(t, f))
			if got == "" {
				t.Fatal("an invalid case gave no diagnostics")
			}
			out := strings.TrimSuffix(f, ".json") + ".out"
			if *update {
				if err := os.WriteFile(out, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("missing golden file (run go test ./validate -run TestInvalidCorpus -update): %v", err)
			}
			if got != string(want) {
				t.Errorf("diagnostics differ from %s\n--- got\n%s--- want\n%s", out, got, want)
			}
		})
	}
}

// TestEveryRuleHasACase: each rule, and each reader rule, fires in at least
// one invalid case of the corpus, so none of them is untested.
func TestEveryRuleHasACase(t *testing.T) {
	fired := map[string]bool{}
	files, _ := filepath.Glob("../testdata/err/*.json")
	for _, f := range files {
		for _, d := range check(t, f) {
			fired[d.Rule] = true
		}
	}
	for _, name := range AllRuleNames() {
		if !fired[name] {
			t.Errorf("rule %q fires in no testdata/err case", name)
		}
	}
	if len(files) < 60 {
		t.Errorf("testdata/err has %d cases, want at least 60", len(files))
	}
}

// TestRulesDocumented: docs/rules.md has a section for every rule.
func TestRulesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(AllRuleNames(), "internal") {
		if !strings.Contains(string(doc), "\n## `"+name+"`") {
			t.Errorf("docs/rules.md has no section \"## `%s`\"", name)
		}
	}
}

func TestRuleNamesUnique(t *testing.T) {
	names := AllRuleNames()
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(names) {
		t.Errorf("duplicate rule names in %v", names)
	}
}

// TestRulesDocExamplesAreReal: every message quoted in a ```text block of
// docs/rules.md is one the corpus really produces (its goldens are compared
// with real output above), so the documentation cannot drift.
func TestRulesDocExamplesAreReal(t *testing.T) {
	doc, err := os.ReadFile("../docs/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	real := map[string]bool{}
	files, _ := filepath.Glob("../testdata/err/*.json")
	for _, f := range files {
		for _, d := range check(t, f) {
			real[fmt.Sprintf("%s: %s [%s]", d.Severity, d.Message, d.Rule)] = true
		}
	}
	blocks := strings.Split(string(doc), "```text\n")
	for _, b := range blocks[1:] {
		block, _, _ := strings.Cut(b, "```")
		for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
			if line != "" && !real[line] {
				t.Errorf("docs/rules.md quotes a message no corpus case gives:\n  %s", line)
			}
		}
	}
}
