package explain

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/openplaybook/openplaybook/internal/textsafe"
)

// Formats lists the accepted format names of [Render], in the order
// documentation and usage messages list them.
var Formats = []string{"text", "markdown", "html", "mermaid", "json"}

// Render writes e to w in format, one of [Formats]. An unknown format is an
// error naming the valid ones, and nothing is written. Every format escapes
// document text for its medium, so a hostile document cannot inject
// terminal control sequences, markup, script or diagram syntax.
func Render(w io.Writer, e *Explanation, format string) error {
	if e == nil {
		return errors.New("explain: nil explanation")
	}
	switch format {
	case "text":
		return renderText(w, e)
	case "markdown":
		return renderMarkdown(w, e)
	case "html":
		return renderHTML(w, e)
	case "mermaid":
		_, err := io.WriteString(w, mermaid(e))
		return err
	case "json":
		b, err := json.MarshalIndent(e, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	q := make([]string, len(Formats))
	for i, f := range Formats {
		q[i] = strconv.Quote(f)
	}
	return fmt.Errorf("unknown format %q; valid formats are %s", format, strings.Join(q, ", "))
}

// notValid is said under the problems when there are errors.
const notValid = "The document is not valid; what follows is what could be read."

// What every format says about the registry and the run's input.
const (
	noRegistry    = "As the document claims: no registry was consulted (explain --harness FILE checks the tool definitions against the harness's registry)."
	claimLegend   = "a value marked * (claim) is the document's claim, which the registry does not confirm."
	noInputSchema = "none declared: the document has no inputSchema, so a run takes any JSON object as input ({} when none is given)."
)

// stepRisk renders a step's highest risk, with "(claim)" when it rests on
// a value the consulted registry does not confirm.
func stepRisk(st *Step) string {
	if st.RiskClaimed {
		return st.RiskClass + " (claim)"
	}
	return st.RiskClass
}

// claimsText says which of tl's values the consulted registry does not
// confirm, "" when there are none (or no registry was consulted).
func claimsText(tl *Tool) string {
	switch {
	case tl.Claims == nil:
		return ""
	case !tl.Defined && tl.InRegistry == "":
		return "the registry does not have it either"
	case !tl.Defined:
		return "the registry has it (" + tl.InRegistry + "), but the document does not define it, so a run refuses it (openplaybook pin --write embeds it)"
	case tl.InRegistry == "":
		return "not in the registry: every value shown is the document's claim"
	case len(tl.Claims) == 0:
		return ""
	}
	return "claims the registry (" + tl.InRegistry + ") does not confirm: " + strings.Join(tl.Claims, ", ")
}

// PolicyText says what the harness policy's rules do to a tool or gate
// ("" when none applies): "rule big-refunds requires approval when
// args.amount > 10000, by groups finance, 2 distinct people".
func PolicyText(rules []PolicyRule) string {
	var parts []string
	for _, r := range rules {
		s := "rule " + r.Rule
		if r.Effect == "deny" {
			s += " refuses the call"
		} else {
			s += " requires approval"
		}
		if r.When != "" {
			s += " when " + r.When
		}
		if len(r.Deciders.Subjects) > 0 {
			s += ", by " + strings.Join(r.Deciders.Subjects, ", ")
		}
		if len(r.Deciders.Groups) > 0 {
			s += ", by groups " + strings.Join(r.Deciders.Groups, ", ")
		}
		if r.Approvals > 1 {
			s += fmt.Sprintf(", %d distinct people", r.Approvals)
		}
		if r.SelfApproval {
			s += ", self-approval allowed"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// Terminals of the step graph.
const (
	toEnd      = -1 // the run ends
	toRejected = -2 // the run ends rejected
	toMissing  = -3 // the step named does not exist
)

// edge is one transition of the step graph.
type edge struct {
	from  int
	to    int    // a step index, or toEnd, toRejected, toMissing
	name  string // the step id named, for toMissing
	label string // "", "approve" or "reject"
}

// isGate reports whether st is a gate step.
func isGate(st *Step) bool { return st.Kind == "gate" }

// edges returns the transitions of the step graph in step order: for each
// step its next (or end of run), then, for a gate or a step that declares
// one, its onReject (or run ends rejected).
func edges(e *Explanation) []edge {
	index := map[string]int{}
	for i, st := range e.Steps {
		if _, dup := index[st.ID]; !dup && st.ID != "" {
			index[st.ID] = i
		}
	}
	resolve := func(from int, name string, missing bool, label string, otherwise int) edge {
		ed := edge{from: from, label: label, name: name}
		switch {
		case missing:
			ed.to = toMissing
		case name == "":
			ed.to = otherwise
		default:
			j, ok := index[name]
			if !ok {
				ed.to = toMissing
			} else {
				ed.to = j
			}
		}
		return ed
	}
	var out []edge
	for i := range e.Steps {
		st := &e.Steps[i]
		label := ""
		if isGate(st) {
			label = "approve"
		}
		out = append(out, resolve(i, st.Next, st.NextMissing, label, toEnd))
		if isGate(st) || st.OnReject != "" || st.OnRejectMissing {
			out = append(out, resolve(i, st.OnReject, st.OnRejectMissing, "reject", toRejected))
		}
	}
	return out
}

// riskStyles are the values a step's risk can take, for styling.
var riskStyles = []string{"read", "internal", "customer_comms", "money", RiskUnknown, RiskNone}

// riskStyle returns the style name of a risk value (unknown for anything
// unexpected).
func riskStyle(r string) string {
	for _, s := range riskStyles {
		if s == r {
			return s
		}
	}
	return RiskUnknown
}

// tristate renders a declared boolean: "yes", "no", or "unknown" when not
// declared.
func tristate(b *bool) string {
	switch {
	case b == nil:
		return "unknown"
	case *b:
		return "yes"
	}
	return "no"
}

// orUnknown returns s, or "unknown" when s is empty.
func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// riskText renders a tool's riskClass, showing an undeclared or invalid
// value for what it is.
func riskText(t *Tool) string {
	if t.DeclaredRiskClass != "" {
		return "unknown (" + strconv.Quote(t.DeclaredRiskClass) + ")"
	}
	return t.RiskClass
}

// via renders where a tool comes from beyond its family: the connector
// type or the MCP server.
func via(t *Tool) string {
	if t.Server != "" {
		return t.Server
	}
	return t.ConnectorType
}

// listOr joins list with ", ", or returns none when it is empty.
func listOr(list []string, none string) string {
	if len(list) == 0 {
		return none
	}
	return strings.Join(list, ", ")
}

// declaredList renders a list that is nil when not declared.
func declaredList(list []string) string {
	if list == nil {
		return "unknown"
	}
	return listOr(list, "none")
}

// writesNote says what an absent dataScopeWrites means for tl: "none"
// for a tool declaring sideEffecting false, "not declared" for a
// side-effecting one, "unknown" otherwise. It returns "" when
// dataScopeWrites is present.
func writesNote(tl *Tool) string {
	switch {
	case tl.DataScopeWrites != nil:
		return ""
	case tl.SideEffecting == nil:
		return "unknown"
	case *tl.SideEffecting:
		return "not declared"
	}
	return "none"
}

// stepTarget renders a step reference for people: the id, with what an
// absent or dangling one means.
func stepTarget(id string, missing bool, absent string) string {
	switch {
	case missing:
		return strconv.Quote(id) + " (no such step)"
	case id == "":
		return absent
	}
	return id
}

// nextText renders where a step goes next.
func nextText(st *Step) string { return stepTarget(st.Next, st.NextMissing, "end of run") }

// onRejectText renders where a gate goes on rejection.
func onRejectText(st *Step) string {
	return stepTarget(st.OnReject, st.OnRejectMissing, "run ends rejected")
}

func gateNext(g *Gate) string { return stepTarget(g.Next, g.NextMissing, "end of run") }

func gateReject(g *Gate) string {
	return stepTarget(g.OnReject, g.OnRejectMissing, "run ends rejected")
}

// title returns the playbook's display name.
func title(e *Explanation) string {
	switch {
	case e.Manifest.Name != "":
		return e.Manifest.Name
	case e.Manifest.ID != "":
		return e.Manifest.ID
	}
	return "Unnamed playbook"
}

// clean makes s safe and single-line for a terminal: whitespace runs
// (newlines, tabs, U+2028 and U+2029 included) become one space, and the
// characters that could hide or reorder text are escaped by
// [textsafe.Escape] (\u001b, \u202e; bytes that are not UTF-8 as \xff).
func clean(s string) string {
	var b strings.Builder
	space := false
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == '\n' || r == '\r' || r == '\t' || r == '\u2028' || r == '\u2029' {
			space = true
			i += n
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteString(s[i : i+n])
		i += n
	}
	if space {
		b.WriteByte(' ')
	}
	return textsafe.Escape(b.String())
}

// truncate shortens s to at most n runes, ending with "…" when cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// wrap cleans s and breaks it into lines of at most width runes where it
// can (a word longer than width stays whole on its own line).
func wrap(s string, width int) []string {
	words := strings.Fields(clean(s))
	var lines []string
	var cur strings.Builder
	n := 0
	for _, w := range words {
		wn := utf8.RuneCountInString(w)
		if n > 0 && n+1+wn > width {
			lines = append(lines, cur.String())
			cur.Reset()
			n = 0
		}
		if n > 0 {
			cur.WriteByte(' ')
			n++
		}
		cur.WriteString(w)
		n += wn
	}
	if n > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}
