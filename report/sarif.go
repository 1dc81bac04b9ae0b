package report

import (
	"bytes"
	"cmp"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/openplaybook/openplaybook/diag"
)

// SARIF constants written into every log.
const (
	sarifSchema    = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
	sarifVersion   = "2.1.0"
	toolName       = "openplaybook"
	informationURI = "https://github.com/openplaybook/openplaybook"
	// rulesHelpURI is the page documenting every rule; a rule's helpUri is
	// this page with the rule id as fragment.
	rulesHelpURI = "https://github.com/openplaybook/openplaybook/blob/main/docs/rules.md"
)

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool       sarifTool     `json:"tool"`
	ColumnKind string        `json:"columnKind"`
	Results    []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri"`
	Version        string      `json:"version,omitempty"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID               string       `json:"id"`
	ShortDescription sarifMessage `json:"shortDescription"`
	HelpURI          string       `json:"helpUri"`
}

type sarifMessage struct {
	Text string `json:"text"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	RuleIndex int             `json:"ruleIndex"`
	Level     string          `json:"level"`
	Message   sarifMessage    `json:"message"`
	Locations []sarifLocation `json:"locations"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysicalLocation  `json:"physicalLocation"`
	LogicalLocations []sarifLogicalLocation `json:"logicalLocations,omitempty"`
}

type sarifPhysicalLocation struct {
	ArtifactLocation sarifArtifactLocation `json:"artifactLocation"`
	Region           *sarifRegion          `json:"region,omitempty"`
}

type sarifArtifactLocation struct {
	URI       string `json:"uri"`
	URIBaseID string `json:"uriBaseId,omitempty"`
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn"`
}

type sarifLogicalLocation struct {
	FullyQualifiedName string `json:"fullyQualifiedName"`
}

// writeSARIF renders diags as a SARIF 2.1.0 log of one run:
//
//   - tool.driver lists every rule of opts.Rules (default [Catalog]) with
//     its description and a helpUri into docs/rules.md, so ruleIndex is
//     stable from one run to the next;
//   - each result has ruleId, ruleIndex, level ("error", "warning" or
//     "note" for info), message.text and one location: the file (a URI
//     relative to %SRCROOT%, or a file: URI for an absolute path), the
//     region's startLine and startColumn, and the JSON Pointer as the
//     fullyQualifiedName of a logical location (left out for the root);
//   - columns are counted in UTF-16 code units, the SARIF default, which
//     run.columnKind states explicitly: the byte columns of diagnostics are
//     converted using the file's source.
func writeSARIF(b *bytes.Buffer, src *sources, diags []diag.Diagnostic, opts *Options) error {
	rules := opts.Rules
	if rules == nil {
		rules = Catalog()
	}
	index := make(map[string]int, len(rules))
	driver := sarifDriver{
		Name:           toolName,
		InformationURI: informationURI,
		Version:        opts.ToolVersion,
		Rules:          make([]sarifRule, 0, len(rules)),
	}
	addRule := func(r Rule) {
		if _, dup := index[r.ID]; dup {
			return
		}
		desc := r.Description
		if desc == "" {
			desc = r.ID
		}
		index[r.ID] = len(driver.Rules)
		driver.Rules = append(driver.Rules, sarifRule{
			ID:               r.ID,
			ShortDescription: sarifMessage{Text: desc},
			HelpURI:          rulesHelpURI + "#" + r.ID,
		})
	}
	for _, r := range rules {
		addRule(r)
	}
	cols := utf16Columns(src, diags)
	results := make([]sarifResult, 0, len(diags))
	for i, d := range diags {
		addRule(Rule{ID: d.Rule})
		uri, base := artifactURI(d.File)
		loc := sarifLocation{PhysicalLocation: sarifPhysicalLocation{
			ArtifactLocation: sarifArtifactLocation{URI: uri, URIBaseID: base},
		}}
		if d.Line > 0 {
			loc.PhysicalLocation.Region = &sarifRegion{StartLine: d.Line, StartColumn: cols[i]}
		}
		if d.Pointer != "" {
			loc.LogicalLocations = []sarifLogicalLocation{{FullyQualifiedName: d.Pointer}}
		}
		results = append(results, sarifResult{
			RuleID:    d.Rule,
			RuleIndex: index[d.Rule],
			Level:     sarifLevel(d.Severity),
			Message:   sarifMessage{Text: d.Message},
			Locations: []sarifLocation{loc},
		})
	}
	return encode(b, sarifLog{
		Schema:  sarifSchema,
		Version: sarifVersion,
		Runs: []sarifRun{{
			Tool:       sarifTool{Driver: driver},
			ColumnKind: "utf16CodeUnits",
			Results:    results,
		}},
	})
}

func sarifLevel(s diag.Severity) string {
	switch s {
	case diag.Error:
		return "error"
	case diag.Warning:
		return "warning"
	default:
		return "note"
	}
}

// utf16Columns returns the column of each of diags in UTF-16 code units
// (see [utf16Column]; at least 1): the byte column as it is for a
// diagnostic with no line or whose file is not among src. The diagnostics
// of one line are converted in order of column, each from where the one
// before stopped, so a line is decoded once however many diagnostics it
// has, whatever their order in diags.
func utf16Columns(src *sources, diags []diag.Diagnostic) []int {
	cols := make([]int, len(diags))
	order := make([]int, 0, len(diags))
	for i, d := range diags {
		cols[i] = max(d.Column, 1)
		if d.Line > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		x, y := &diags[a], &diags[b]
		return cmp.Or(strings.Compare(x.File, y.File), cmp.Compare(x.Line, y.Line), cmp.Compare(cols[a], cols[b]))
	})
	var (
		c         utf16Cursor
		file      string
		line      = -1
		lineFound bool
	)
	for _, i := range order {
		d := &diags[i]
		if d.File != file || d.Line != line {
			file, line = d.File, d.Line
			var text []byte
			text, _, lineFound = src.line(file, line)
			c = utf16Cursor{line: text}
		}
		if lineFound {
			cols[i] = c.column(cols[i])
		}
	}
	return cols
}

// utf16Column converts the 1-based byte column col of line to a 1-based
// column in UTF-16 code units. A byte that is not UTF-8 counts as one
// unit; a column past the end of the line counts the missing bytes as one
// unit each.
func utf16Column(line []byte, col int) int {
	c := utf16Cursor{line: line}
	return c.column(col)
}

// utf16Cursor converts byte columns of one line to UTF-16 columns, as
// [utf16Column] does, for columns given in increasing order: each goes on
// from where the one before stopped.
type utf16Cursor struct {
	line       []byte
	off, units int // the units of line[:off], whole characters
}

func (c *utf16Cursor) column(col int) int {
	at := col - 1
	for c.off < at && c.off < len(c.line) {
		r, n := utf8.DecodeRune(c.line[c.off:])
		if r >= 0x10000 {
			c.units += 2
		} else {
			c.units++
		}
		c.off += n
	}
	return c.units + max(at-c.off, 0) + 1
}

// artifactURI returns the SARIF artifactLocation of a file name: a
// relative path becomes a relative URI reference with forward slashes
// and uriBaseId "%SRCROOT%" (the repository root, for code scanning); an
// absolute path becomes a file: URI with no base.
func artifactURI(name string) (uri, base string) {
	if filepath.IsAbs(name) {
		p := filepath.ToSlash(name)
		if !strings.HasPrefix(p, "/") {
			p = "/" + p // a Windows drive path: file:///C:/...
		}
		return "file://" + escapePath(p), ""
	}
	return escapePath(filepath.ToSlash(filepath.Clean(name))), "%SRCROOT%"
}

// escapePath percent-encodes every byte of p except the unreserved
// characters of RFC 3986 and "/", so the result is a valid URI path (a
// ":" in a relative name cannot be read as a scheme).
func escapePath(p string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '/' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
