// Package report renders [diag.Diagnostic] values for people and for
// machines, in the output formats of `openplaybook validate --format`:
//
//   - "text": for a terminal. Each diagnostic is a line
//     `file:line:col: severity: message [rule]`, then the source line (a
//     window of it when long, every character of a credential shown as
//     '*') and a caret under the column; a last line counts errors and
//     warnings.
//   - "json": a JSON array of objects with exactly the members file, line,
//     column, pointer, severity, rule and message; `[]` when there is
//     nothing to report. This shape is a public contract (docs/cli.md).
//   - "sarif": a SARIF 2.1.0 log with one run, as GitHub code scanning
//     accepts it: every rule openplaybook has is described in
//     tool.driver (from docs/rules.md, docs/check.md and docs/drift.md,
//     with a helpUri to its heading), and each result has a
//     partialFingerprints entry.
//   - "github": GitHub Actions workflow commands (`::error file=...::msg`),
//     which the Actions runner turns into annotations; past 10 of one
//     kind, a line says GitHub hides the rest and the job summary gets a
//     Markdown table of them all.
//
// Every format writes only to the writer it is given; none writes to
// standard error. The one exception is github's job summary: when there
// are more annotations than GitHub shows, the full list is appended to
// the file $GITHUB_STEP_SUMMARY names (see [Options.StepSummary]). See [Write]. Only the text format shows source text, and
// never a credential in it; the others carry messages and pointers, which
// [playbook.Document.At] has already cleaned of credentials.
package report

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/syntax"
	"github.com/openplaybook/openplaybook/validate"
)

// Formats lists the names [Write] accepts, the default ("text") first.
var Formats = []string{"text", "json", "sarif", "github"}

// File is one checked document: the name its diagnostics carry in
// [diag.Diagnostic.File] and its source text, from which the text format
// cuts snippets and the sarif format counts columns.
type File struct {
	Name string
	Src  []byte
}

// Options configures [Write]. A nil *Options means defaults.
type Options struct {
	// ToolVersion is written as the SARIF tool.driver.version. Empty
	// leaves it out.
	ToolVersion string
	// Rules describes the rule ids for the SARIF rules array, in order.
	// Nil means [AllRules]. A rule id that occurs in the diagnostics but
	// not here is added after them.
	Rules []Rule
	// StepSummary is the file the github format appends the full list of
	// diagnostics to when GitHub would not show them all as annotations
	// (more than 10 of one kind). Empty means $GITHUB_STEP_SUMMARY, the
	// job summary of GitHub Actions; with neither, nothing is written.
	StepSummary string
}

// Rule is a rule id and its one-line description.
type Rule struct {
	ID          string
	Description string
}

// Write renders diags in format (one of [Formats]) to w, in the order
// given: sort them with [diag.Sort] first for stable output. files gives
// the source of each file the diagnostics name; a diagnostic whose file is
// not among them, or whose Line is 0, is rendered without a snippet (text)
// and with its byte column as is (sarif).
//
// It is not an error for diags to be empty: text writes nothing, json
// writes `[]`, sarif a log whose run has no results, github nothing.
// Write returns an error for an unknown format, and the first error of w.
func Write(w io.Writer, format string, files []File, diags []diag.Diagnostic, opts *Options) error {
	if opts == nil {
		opts = &Options{}
	}
	src := newSources(files)
	var b bytes.Buffer
	switch format {
	case "text":
		writeText(&b, src, diags)
	case "json":
		if err := writeJSON(&b, diags); err != nil {
			return err
		}
	case "sarif":
		if err := writeSARIF(&b, src, diags, opts); err != nil {
			return err
		}
	case "github":
		summary := opts.StepSummary
		if summary == "" {
			summary = os.Getenv("GITHUB_STEP_SUMMARY")
		}
		if err := writeGitHub(&b, diags, summary); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown format %q; valid formats are %s", format, quoteList(Formats))
	}
	_, err := w.Write(b.Bytes())
	return err
}

// summary counts diags as "N errors, M warnings", adding ", K info" when
// there is advice: "1 error, 0 warnings", "0 errors, 2 warnings, 1 info".
func summary(diags []diag.Diagnostic) string {
	s := plural(diag.Count(diags, diag.Error), "error") + ", " + plural(diag.Count(diags, diag.Warning), "warning")
	if n := diag.Count(diags, diag.Info); n > 0 {
		s += fmt.Sprintf(", %d info", n)
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// readerRules describes the rules of the reader (packages syntax and
// playbook), which have ids but no Rule values of their own.
var readerRules = map[string]string{
	syntax.RuleSyntax:          "the file is well-formed JSON (RFC 8259)",
	syntax.RuleDuplicateMember: "no object has two members of the same name, compared after unescaping",
	syntax.RuleInvalidUTF8:     "the file is valid UTF-8",
	syntax.RuleByteOrderMark:   "the file does not start with a byte order mark",
	syntax.RuleComment:         "the file has no comments; JSON has none",
	syntax.RuleTrailingComma:   "no object or array ends with a trailing comma",
	syntax.RuleTrailingData:    "nothing follows the document's one JSON value",
	syntax.RuleNonFinite:       "no NaN or Infinity; JSON has no such numbers",
	syntax.RuleLimit:           "the document is within the reader's size, depth, string and array limits",
	playbook.RuleType:          "every member has the JSON type the format gives it",
	playbook.RuleUnknownMember: "every member is one the format defines",
	playbook.RuleMemberCase:    "member names are spelled with exactly the format's case",
}

// Catalog returns every rule id openplaybook's reader and validator can
// report ([validate.AllRuleNames], in that order) with its description.
func Catalog() []Rule {
	desc := make(map[string]string, len(readerRules))
	for id, d := range readerRules {
		desc[id] = d
	}
	for _, r := range validate.Rules() {
		desc[r.Name()] = r.Description()
	}
	names := validate.AllRuleNames()
	out := make([]Rule, len(names))
	for i, id := range names {
		out[i] = Rule{ID: id, Description: desc[id]}
	}
	return out
}

func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// sources indexes the files' text by name, and on first use their line
// starts and the credentials they hold.
type sources struct {
	src    map[string][]byte
	starts map[string][]int32 // line starts
	spans  map[string][]span
}

func newSources(files []File) *sources {
	s := &sources{src: make(map[string][]byte, len(files)), starts: map[string][]int32{}, spans: map[string][]span{}}
	for _, f := range files {
		s.src[f.Name] = f.Src
	}
	return s
}

// line returns line n (1-based) of file without its line ending ("\n" or
// "\r\n"), and the offset in the file where it starts; ok is false when
// the file is unknown or has no such line. Its cost does not depend on
// the length of the line.
func (s *sources) line(file string, n int) (line []byte, start int, ok bool) {
	src, ok := s.src[file]
	if !ok || n < 1 {
		return nil, 0, false
	}
	starts, ok := s.starts[file]
	if !ok {
		// Counted first, so that a large file's index is one allocation
		// of its size rather than grown by copying.
		src := src[:min(len(src), 1<<31-1)] // files are at most syntax.MaxSizeLimit bytes
		starts = make([]int32, 1, 1+bytes.Count(src, []byte{'\n'}))
		for i := 0; ; {
			j := bytes.IndexByte(src[i:], '\n')
			if j < 0 {
				break
			}
			i += j + 1
			starts = append(starts, int32(i))
		}
		s.starts[file] = starts
	}
	if n > len(starts) {
		return nil, 0, false
	}
	start, end := int(starts[n-1]), len(src)
	if n < len(starts) {
		end = int(starts[n]) - 1 // the '\n'
	}
	return bytes.TrimSuffix(src[start:end], []byte("\r")), start, true
}
