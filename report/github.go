package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/openplaybook/openplaybook/diag"
)

// writeGitHub renders diags as GitHub Actions workflow commands, one a
// line, which the runner turns into annotations on the file and line:
//
//	::error file=examples/x.json,line=12,col=7,title=unknown-member::unknown member "nxt" ...
//
// Errors are ::error, warnings ::warning and info ::notice. line and col
// are left out for a diagnostic with no position. Values are escaped as
// the runner requires: in the message "%", "\r" and "\n" become "%25",
// "%0D" and "%0A"; in the properties ":" and "," also become "%3A" and
// "%2C".
//
// The runner shows at most [githubAnnotationLimit] annotations of each
// kind per step. When there are more of some kind, a last line (plain
// text, not a command, so that the limit does not hide it too) says so,
// and, when summary is not "", the full list is appended to that file as
// a Markdown table (see [writeStepSummary]): the job summary, whose file
// the runner names in $GITHUB_STEP_SUMMARY.
func writeGitHub(b *bytes.Buffer, diags []diag.Diagnostic, summary string) error {
	for _, d := range diags {
		b.WriteString("::")
		b.WriteString(githubCommand(d.Severity))
		b.WriteString(" file=")
		b.WriteString(escapeProperty(filepath.ToSlash(d.File)))
		if d.Line > 0 {
			b.WriteString(",line=")
			b.WriteString(strconv.Itoa(d.Line))
			b.WriteString(",col=")
			b.WriteString(strconv.Itoa(max(d.Column, 1)))
		}
		b.WriteString(",title=")
		b.WriteString(escapeProperty(d.Rule))
		b.WriteString("::")
		b.WriteString(escapeData(d.Message))
		b.WriteByte('\n')
	}
	var over []string
	for _, s := range []diag.Severity{diag.Error, diag.Warning, diag.Info} {
		if n := diag.Count(diags, s); n > githubAnnotationLimit {
			over = append(over, plural(n, githubCommand(s)))
		}
	}
	if len(over) == 0 {
		return nil
	}
	where := "set $GITHUB_STEP_SUMMARY or use --format text to see them all"
	if summary != "" {
		where = "the job summary lists them all"
	}
	fmt.Fprintf(b, "openplaybook: %s; GitHub shows only the first %d annotations of each kind per step: %s\n",
		strings.Join(over, ", "), githubAnnotationLimit, where)
	if summary == "" {
		return nil
	}
	return writeStepSummary(summary, diags)
}

// githubAnnotationLimit is how many annotations of one kind (error,
// warning, notice) GitHub Actions shows for a step.
const githubAnnotationLimit = 10

// writeStepSummary appends to the file named path (creating it) a
// Markdown heading with the counts and a table of diags: severity, file,
// line, column, rule and message, each cell escaped by [markdownCell].
func writeStepSummary(path string, diags []diag.Diagnostic) error {
	var b strings.Builder
	fmt.Fprintf(&b, "### openplaybook: %s\n\n", summary(diags))
	b.WriteString("| Severity | File | Line | Column | Rule | Message |\n| --- | --- | ---: | ---: | --- | --- |\n")
	for _, d := range diags {
		line, col := "", ""
		if d.Line > 0 {
			line, col = strconv.Itoa(d.Line), strconv.Itoa(max(d.Column, 1))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", d.Severity, markdownCell(filepath.ToSlash(d.File)), line, col,
			markdownCell(d.Rule), markdownCell(d.Message))
	}
	b.WriteByte('\n')
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("writing the step summary: %w", err)
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the step summary: %w", err)
	}
	return nil
}

// markdownCell escapes s for a cell of a GitHub Markdown table: HTML
// ("&", "<", ">") becomes entities, so text of a document is never markup;
// "|" and the Markdown punctuation that would format ("\\", "`", "*", "_",
// "[", "]") are backslash-escaped; a line break becomes "<br>".
var markdownCell = strings.NewReplacer(
	"&", "&amp;", "<", "&lt;", ">", "&gt;",
	"|", "\\|", "\\", "\\\\", "`", "\\`", "*", "\\*", "_", "\\_", "[", "\\[", "]", "\\]",
	"\r\n", "<br>", "\n", "<br>", "\r", "<br>",
).Replace

func githubCommand(s diag.Severity) string {
	switch s {
	case diag.Error:
		return "error"
	case diag.Warning:
		return "warning"
	default:
		return "notice"
	}
}

var (
	dataEscaper     = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A")
	propertyEscaper = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C")
)

// escapeData escapes the message of a workflow command.
func escapeData(s string) string { return dataEscaper.Replace(s) }

// escapeProperty escapes a property value of a workflow command.
func escapeProperty(s string) string { return propertyEscaper.Replace(s) }
