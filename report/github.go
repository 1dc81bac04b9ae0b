package report

import (
	"bytes"
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
func writeGitHub(b *bytes.Buffer, diags []diag.Diagnostic) {
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
}

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
