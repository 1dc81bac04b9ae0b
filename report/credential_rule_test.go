package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
)

// TestCredentialDiagnosticHidesTheRestOfTheLine: a value reported as a
// credential only for where it stands (a plain-looking value under a
// key named like a token) is not shown in the text snippet.
func TestCredentialDiagnosticHidesTheRestOfTheLine(t *testing.T) {
	src := []byte("env:\n  env: {GITHUB_TOKEN: plainliteralvalue123}\n")
	d := diag.Diagnostic{File: "h.yaml", Line: 2, Column: 23, Severity: diag.Error, Rule: "harness-credential", Message: "m"}
	var b bytes.Buffer
	if err := Write(&b, "text", []File{{Name: "h.yaml", Src: src}}, []diag.Diagnostic{d}, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "plainliteral") {
		t.Fatalf("the snippet shows the value:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "{GITHUB_TOKEN: ****") {
		t.Fatalf("the snippet should keep what precedes the value:\n%s", b.String())
	}
}
