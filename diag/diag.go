// Package diag defines the one shape every openplaybook check reports in: a
// [Diagnostic] is a problem found in a document, located by file, 1-based
// line and byte column, and RFC 6901 JSON Pointer, and named by a stable
// kebab-case rule id.
//
// The JSON encoding of a Diagnostic (members file, line, column, pointer,
// severity, rule, message) is a public contract of `openplaybook validate
// --format json`; see docs/cli.md.
package diag

import (
	"cmp"
	"fmt"
	"slices"
)

// Severity orders how bad a diagnostic is. Only [Error] makes `validate`
// exit 1; [Warning] does too under --strict; [Info] never does.
type Severity int

const (
	// Info is advice; it never fails a run.
	Info Severity = iota
	// Warning is a likely mistake that the format still accepts.
	Warning
	// Error means the document is not a valid OpenPlaybook document or
	// breaks a consistency rule of docs/format.md.
	Error
)

// String returns "error", "warning" or "info".
func (s Severity) String() string {
	switch s {
	case Error:
		return "error"
	case Warning:
		return "warning"
	default:
		return "info"
	}
}

// MarshalText encodes the severity as its String form.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText decodes "error", "warning" or "info"; anything else is an
// error naming the valid values.
func (s *Severity) UnmarshalText(b []byte) error {
	switch string(b) {
	case "error":
		*s = Error
	case "warning":
		*s = Warning
	case "info":
		*s = Info
	default:
		return fmt.Errorf("severity %q is not one of \"error\", \"warning\", \"info\"", b)
	}
	return nil
}

// Diagnostic is one problem at one place. Line and Column are 1-based;
// Column counts bytes, not runes, so it matches what editors given a byte
// offset show for ASCII and what SARIF calls a byte column. Line and Column
// are 0 when the problem has no place in the file (for example an
// unreadable file). Pointer is an RFC 6901 JSON Pointer to the value the
// problem is about ("" is the whole document).
type Diagnostic struct {
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Column   int      `json:"column"`
	Pointer  string   `json:"pointer"`
	Severity Severity `json:"severity"`
	Rule     string   `json:"rule"`
	Message  string   `json:"message"`
}

// Sort orders diagnostics by file, line, column, rule and message, so that
// output is stable whatever order the checks ran in.
func Sort(ds []Diagnostic) {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		return cmp.Or(
			cmp.Compare(a.File, b.File),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Column, b.Column),
			cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.Message, b.Message),
		)
	})
}

// Count returns how many diagnostics have severity s.
func Count(ds []Diagnostic, s Severity) int {
	n := 0
	for _, d := range ds {
		if d.Severity == s {
			n++
		}
	}
	return n
}
