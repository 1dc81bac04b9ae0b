package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
)

func manyDiags(errors, warnings, infos int) []diag.Diagnostic {
	var ds []diag.Diagnostic
	for i, n := range []int{errors, warnings, infos} {
		for j := range n {
			ds = append(ds, diag.Diagnostic{File: "dir/a.json", Line: j + 1, Column: 2, Pointer: "/steps", Severity: []diag.Severity{diag.Error, diag.Warning, diag.Info}[i],
				Rule: "step-ref", Message: fmt.Sprintf("problem %d", j)})
		}
	}
	return ds
}

// TestGitHubLimit: up to 10 annotations of each kind, nothing more is
// written; past that, one line says so and the step summary file (the
// $GITHUB_STEP_SUMMARY, appended to) gets a table of every diagnostic.
func TestGitHubLimit(t *testing.T) {
	summary := filepath.Join(t.TempDir(), "summary.md")
	if err := os.WriteFile(summary, []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GITHUB_STEP_SUMMARY", summary)

	out := render(t, "github", nil, manyDiags(10, 10, 10))
	if n := strings.Count(out, "\n"); n != 30 || strings.Contains(out, "openplaybook:") {
		t.Errorf("10 of each kind: %d lines, want the 30 annotations alone:\n%s", n, out)
	}
	if b, _ := os.ReadFile(summary); string(b) != "before\n" {
		t.Errorf("10 of each kind wrote to the summary:\n%s", b)
	}

	ds := manyDiags(12, 3, 11)
	ds[0].Message = "a | pipe, <b>html</b>, `code` and\na line break"
	out = render(t, "github", nil, ds)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(ds)+1 {
		t.Fatalf("got %d lines, want %d annotations and one more:\n%s", len(lines), len(ds), out)
	}
	last := lines[len(lines)-1]
	want := "openplaybook: 12 errors, 11 notices; GitHub shows only the first 10 annotations of each kind per step: the job summary lists them all"
	if last != want {
		t.Errorf("last line\n%q, want\n%q", last, want)
	}
	b, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if !strings.HasPrefix(got, "before\n### openplaybook: 12 errors, 3 warnings, 11 info\n\n| Severity | File | Line | Column | Rule | Message |\n") {
		t.Errorf("summary does not start as expected:\n%s", got)
	}
	if n := strings.Count(got, "\n| "); n != len(ds)+2 {
		t.Errorf("summary has %d table rows, want a header, a separator and %d:\n%s", n, len(ds), got)
	}
	if !strings.Contains(got, "| error | dir/a.json | 1 | 2 | step-ref | a \\| pipe, &lt;b&gt;html&lt;/b&gt;, \\`code\\` and<br>a line break |\n") {
		t.Errorf("summary row of the first diagnostic not escaped as expected:\n%s", got)
	}
	if !strings.Contains(got, "| info | dir/a.json | 11 | 2 | step-ref | problem 10 |\n") {
		t.Errorf("summary lacks the last diagnostic:\n%s", got)
	}

	// A second report appends.
	render(t, "github", nil, manyDiags(0, 11, 0))
	b, _ = os.ReadFile(summary)
	if strings.Count(string(b), "### openplaybook:") != 2 {
		t.Errorf("the second report did not append:\n%s", b)
	}
}

// TestGitHubLimitNoSummary: without $GITHUB_STEP_SUMMARY the line says
// how to see them all, and no file is written.
func TestGitHubLimitNoSummary(t *testing.T) {
	t.Setenv("GITHUB_STEP_SUMMARY", "")
	out := render(t, "github", nil, manyDiags(0, 11, 0))
	if !strings.HasSuffix(out, "\nopenplaybook: 11 warnings; GitHub shows only the first 10 annotations of each kind per step: set $GITHUB_STEP_SUMMARY or use --format text to see them all\n") {
		t.Errorf("output ends:\n%s", out[max(0, len(out)-300):])
	}
	// Options.StepSummary names the file when the environment does not.
	path := filepath.Join(t.TempDir(), "s.md")
	var b bytes.Buffer
	if err := Write(&b, "github", nil, manyDiags(11, 0, 0), &Options{StepSummary: path}); err != nil {
		t.Fatal(err)
	}
	if s, err := os.ReadFile(path); err != nil || !strings.Contains(string(s), "| error | dir/a.json | 11 | 2 | step-ref | problem 10 |") {
		t.Errorf("Options.StepSummary: %v\n%s", err, s)
	}
	// A summary that cannot be written is an error.
	if err := Write(&b, "github", nil, manyDiags(11, 0, 0), &Options{StepSummary: filepath.Join(path, "not-a-dir", "s.md")}); err == nil {
		t.Error("no error for a step summary that cannot be written")
	}
}
