package report

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strconv"
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
	// docsURI is where the documentation pages of ruleDocs (paths from the
	// repository root) are published; a rule's helpUri is its page there
	// with the anchor of its heading as fragment.
	docsURI = "https://github.com/openplaybook/openplaybook/blob/main/"
	// fingerprintKey names the partialFingerprints entry of a result.
	fingerprintKey = "openplaybook/v1"
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
	Name            string      `json:"name"`
	InformationURI  string      `json:"informationUri"`
	Version         string      `json:"version,omitempty"`
	SemanticVersion string      `json:"semanticVersion"`
	Rules           []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID                   string              `json:"id"`
	ShortDescription     sarifMessage        `json:"shortDescription"`
	FullDescription      *sarifMultiformat   `json:"fullDescription,omitempty"`
	Help                 *sarifMultiformat   `json:"help,omitempty"`
	HelpURI              string              `json:"helpUri,omitempty"`
	DefaultConfiguration *sarifConfiguration `json:"defaultConfiguration,omitempty"`
}

type sarifMessage struct {
	Text string `json:"text"`
}

type sarifMultiformat struct {
	Text     string `json:"text"`
	Markdown string `json:"markdown,omitempty"`
}

type sarifConfiguration struct {
	Level string `json:"level"`
}

type sarifResult struct {
	RuleID              string            `json:"ruleId"`
	RuleIndex           int               `json:"ruleIndex"`
	Level               string            `json:"level"`
	Message             sarifMessage      `json:"message"`
	Locations           []sarifLocation   `json:"locations"`
	PartialFingerprints map[string]string `json:"partialFingerprints"`
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
//   - tool.driver has the tool's version as given and, in
//     semanticVersion, its numeric MAJOR.MINOR.PATCH ("0.0.0" for a
//     development build); it lists every rule of opts.Rules (default
//     [AllRules]), then any other rule a diagnostic names, so ruleIndex is
//     stable from one run to the next. A documented rule (ruleDocs) has a
//     fullDescription and help (text and Markdown) cut from its section
//     of docs/*.md, and a helpUri to that section's heading;
//   - each result has ruleId, ruleIndex, level ("error", "warning" or
//     "note" for info), message.text, partialFingerprints (see
//     [fingerprints]) and one location: the file (a URI
//     relative to %SRCROOT%, or a file: URI for an absolute path), the
//     region's startLine and startColumn, and the JSON Pointer as the
//     fullyQualifiedName of a logical location (left out for the root);
//   - columns are counted in UTF-16 code units, the SARIF default, which
//     run.columnKind states explicitly: the byte columns of diagnostics are
//     converted using the file's source.
func writeSARIF(b *bytes.Buffer, src *sources, diags []diag.Diagnostic, opts *Options) error {
	rules := opts.Rules
	if rules == nil {
		rules = AllRules()
	}
	index := make(map[string]int, len(rules))
	driver := sarifDriver{
		Name:            toolName,
		InformationURI:  informationURI,
		Version:         opts.ToolVersion,
		SemanticVersion: semanticVersion(opts.ToolVersion),
		Rules:           make([]sarifRule, 0, len(rules)),
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
		driver.Rules = append(driver.Rules, sarifRuleOf(r.ID, desc))
	}
	for _, r := range rules {
		addRule(r)
	}
	cols := utf16Columns(src, diags)
	prints := fingerprints(diags)
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
			RuleID:              d.Rule,
			RuleIndex:           index[d.Rule],
			Level:               sarifLevel(d.Severity),
			Message:             sarifMessage{Text: d.Message},
			Locations:           []sarifLocation{loc},
			PartialFingerprints: map[string]string{fingerprintKey: prints[i]},
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

// sarifRuleOf returns the reportingDescriptor of rule id, described by
// desc and, when it is documented, by ruleDocs.
func sarifRuleOf(id, desc string) sarifRule {
	r := sarifRule{ID: id, ShortDescription: sarifMessage{Text: desc}}
	doc, ok := ruleDocs[id]
	if !ok {
		return r
	}
	r.HelpURI = docsURI + doc.Page + "#" + doc.Anchor
	full := doc.Full
	if full == "" {
		full = desc
	}
	r.FullDescription = &sarifMultiformat{Text: plainText(full), Markdown: full}
	help := full
	if doc.Fix != "" {
		help += "\n\n" + doc.Fix
	}
	r.Help = &sarifMultiformat{
		Text:     plainText(help) + "\n\nSee " + r.HelpURI,
		Markdown: help + "\n\nSee [" + id + "](" + r.HelpURI + ").",
	}
	if doc.Level != "" {
		r.DefaultConfiguration = &sarifConfiguration{Level: doc.Level}
	}
	return r
}

// plainText returns Markdown md as plain text: without "**" and "`", and
// with each link [text](target) as its text.
func plainText(md string) string {
	md = strings.NewReplacer("**", "", "`", "").Replace(md)
	var b strings.Builder
	for {
		i := strings.Index(md, "](")
		j := strings.LastIndex(md[:max(i, 0)], "[")
		k := strings.Index(md[max(i, 0):], ")")
		if i < 0 || j < 0 || k < 0 {
			break
		}
		b.WriteString(md[:j])
		b.WriteString(md[j+1 : i])
		md = md[i+k+1:]
	}
	b.WriteString(md)
	return b.String()
}

// fingerprints returns, for each of diags, a partial fingerprint that
// identifies the problem across runs while the document around it
// changes: the first 32 hex digits of the SHA-256 of its rule id, file (as
// its artifact URI) and JSON Pointer, then ":" and its ordinal among the
// diagnostics of diags with the same three (1 for the first), so two
// problems of one rule at one place stay apart. The line, column and
// message are left out: they move when lines are added above, or when
// openplaybook words a message better.
func fingerprints(diags []diag.Diagnostic) []string {
	out := make([]string, len(diags))
	seen := make(map[string]int, len(diags))
	for i, d := range diags {
		uri, _ := artifactURI(d.File)
		sum := sha256.Sum256([]byte(d.Rule + "\x00" + uri + "\x00" + d.Pointer))
		h := hex.EncodeToString(sum[:16])
		seen[h]++
		out[i] = h + ":" + strconv.Itoa(seen[h])
	}
	return out
}

// semanticVersion returns the MAJOR.MINOR.PATCH that version ("v1.2.3",
// "1.2.3-rc.1", a Go pseudo-version) starts with, "0.0.0" when it starts
// with none ("(devel)", "").
func semanticVersion(version string) string {
	v := strings.TrimPrefix(version, "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) == 3 {
		if n := strings.IndexAny(parts[2], "-+"); n >= 0 {
			parts[2] = parts[2][:n]
		}
		ok := true
		for _, p := range parts {
			if p == "" || strings.Trim(p, "0123456789") != "" || len(p) > 1 && p[0] == '0' {
				ok = false
			}
		}
		if ok {
			return strings.Join(parts, ".")
		}
	}
	return "0.0.0"
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
