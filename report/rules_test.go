package report

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
)

// TestCheckRulesComplete: every rule id the sources of the packages behind
// `openplaybook check` define (a string constant or literal of the form
// "drift-...", "preflight-...", "harness-..." or "registry-resolve") is in
// checkRules, and checkRules has no other.
func TestCheckRulesComplete(t *testing.T) {
	id := regexp.MustCompile(`"((?:drift|preflight|harness)-[a-z]+(?:-[a-z]+)*|registry-resolve)"`)
	found := map[string]bool{}
	for _, dir := range []string{"drift", "preflight", "host", "harness"} {
		names, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
		if err != nil || len(names) == 0 {
			t.Fatalf("no Go files in ../%s: %v", dir, err)
		}
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			src, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range id.FindAllStringSubmatch(string(src), -1) {
				found[m[1]] = true
			}
		}
	}
	var have []string
	for _, r := range checkRules {
		have = append(have, r.ID)
	}
	for id := range found {
		if !slices.Contains(have, id) {
			t.Errorf("rule %q is defined in the sources but not in checkRules", id)
		}
	}
	for _, id := range have {
		if !found[id] {
			t.Errorf("checkRules has %q, which no source defines", id)
		}
	}
	seen := map[string]bool{}
	for _, r := range AllRules() {
		if seen[r.ID] {
			t.Errorf("AllRules has %q twice", r.ID)
		}
		seen[r.ID] = true
	}
}

func TestSemanticVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.3": "1.2.3", "1.2.3": "1.2.3", "v1.6.0-rc.1": "1.6.0", "v0.0.0-20261201113407-6130d8d6130d": "0.0.0",
		"v2.10.4+dirty": "2.10.4", "(devel)": "0.0.0", "": "0.0.0", "v1.2": "0.0.0", "v01.2.3": "0.0.0", "vx.y.z": "0.0.0",
	} {
		if got := semanticVersion(in); got != want {
			t.Errorf("semanticVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSARIFFingerprints: a result's fingerprint depends on its rule, file
// and pointer, not on its line, column or message; two results alike in
// those three differ by their ordinal.
func TestSARIFFingerprints(t *testing.T) {
	base := diag.Diagnostic{File: "a.json", Line: 3, Column: 5, Pointer: "/steps/0/id", Severity: diag.Error, Rule: "step-id", Message: "m"}
	moved := base
	moved.Line, moved.Column, moved.Message = 9, 1, "reworded"
	other := base
	other.Pointer = "/steps/1/id"
	otherRule := base
	otherRule.Rule = "step-id-unique"
	otherFile := base
	otherFile.File = "b.json"
	got := fingerprints([]diag.Diagnostic{base, other, otherRule, otherFile, moved})
	if fp := fingerprints([]diag.Diagnostic{moved})[0]; fp != got[0] {
		t.Errorf("moving a diagnostic changes its fingerprint: %s, %s", got[0], fp)
	}
	if !strings.HasSuffix(got[0], ":1") || strings.TrimSuffix(got[4], ":2") != strings.TrimSuffix(got[0], ":1") {
		t.Errorf("two results alike: %s, %s; want the same hash, :1 and :2", got[0], got[4])
	}
	for i := 1; i < 4; i++ {
		if got[i][:32] == got[0][:32] {
			t.Errorf("fingerprint %d equals the first: %s", i, got[i])
		}
	}
	if len(got[0]) != 34 || strings.Trim(got[0][:32], "0123456789abcdef") != "" {
		t.Errorf("fingerprint %q is not 32 hex digits and an ordinal", got[0])
	}
	l := decodeSARIF(t, render(t, "sarif", nil, []diag.Diagnostic{base, moved}))
	for i, r := range l.Runs[0].Results {
		if r.PartialFingerprints[fingerprintKey] != got[[]int{0, 4}[i]] {
			t.Errorf("result %d partialFingerprints = %v", i, r.PartialFingerprints)
		}
	}
}

// TestSARIFRuleIndexStable: a rule's index is its place in AllRules,
// whatever the results, and a rule unknown to AllRules is added after
// them, without a helpUri.
func TestSARIFRuleIndexStable(t *testing.T) {
	all := AllRules()
	want := map[string]int{}
	for i, r := range all {
		want[r.ID] = i
	}
	ds := []diag.Diagnostic{
		{File: "h.yaml", Severity: diag.Error, Rule: "harness-dotenv", Message: "m"},
		{File: "a.json", Severity: diag.Warning, Rule: "drift-description", Message: "m"},
		{File: "a.json", Severity: diag.Error, Rule: "preflight-secret", Message: "m"},
		{File: "a.json", Severity: diag.Error, Rule: "no-such-rule", Message: "m"},
		{File: "a.json", Severity: diag.Error, Rule: "syntax", Message: "m"},
	}
	want["no-such-rule"] = len(all)
	l := decodeSARIF(t, render(t, "sarif", nil, ds))
	d := l.Runs[0].Tool.Driver
	if len(d.Rules) != len(all)+1 || d.Rules[len(all)].ID != "no-such-rule" || d.Rules[len(all)].HelpURI != "" {
		t.Fatalf("driver rules: %d, last %+v", len(d.Rules), d.Rules[len(d.Rules)-1])
	}
	if d.SemanticVersion != "0.0.0" {
		t.Errorf("semanticVersion %q for v0.0.0-test", d.SemanticVersion)
	}
	for i, r := range l.Runs[0].Results {
		if r.RuleIndex != want[r.RuleID] || d.Rules[r.RuleIndex].ID != r.RuleID {
			t.Errorf("result %d: rule %q index %d, want %d", i, r.RuleID, r.RuleIndex, want[r.RuleID])
		}
	}
}
