package report

import (
	"bytes"
	"encoding/json"

	"github.com/openplaybook/openplaybook/diag"
)

// jsonDiagnostic is the json format's object for one diagnostic. Its
// members are a public contract (docs/cli.md): exactly these seven, with
// these names and types. It is declared here, rather than encoding
// [diag.Diagnostic] directly, so that a field added to Diagnostic cannot
// change the contract by accident.
type jsonDiagnostic struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Pointer  string `json:"pointer"`
	Severity string `json:"severity"`
	Rule     string `json:"rule"`
	Message  string `json:"message"`
}

// writeJSON renders diags as an indented JSON array, `[]` when empty,
// followed by a newline.
func writeJSON(b *bytes.Buffer, diags []diag.Diagnostic) error {
	out := make([]jsonDiagnostic, len(diags))
	for i, d := range diags {
		out[i] = jsonDiagnostic{
			File: d.File, Line: d.Line, Column: d.Column, Pointer: d.Pointer,
			Severity: d.Severity.String(), Rule: d.Rule, Message: d.Message,
		}
	}
	return encode(b, out)
}

// encode writes v as JSON indented by two spaces, without HTML escaping
// (so "<" stays "<" in messages), and a final newline.
func encode(b *bytes.Buffer, v any) error {
	e := json.NewEncoder(b)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	return e.Encode(v)
}
