package explain

import (
	"fmt"
	"strings"
)

// riskColors are the fill, stroke and text colours of each risk style,
// shared by the mermaid and html formats.
var riskColors = map[string][3]string{
	"read":           {"#e3f4e1", "#2e7d32", "#14301a"},
	"internal":       {"#e1ecfb", "#1f5fae", "#0f2a4d"},
	"customer_comms": {"#fdebd3", "#c26a00", "#4a2a00"},
	"money":          {"#fbdada", "#b3261e", "#4d0d09"},
	RiskUnknown:      {"#fff5c2", "#8a6d00", "#3d3000"},
	RiskNone:         {"#eeeeee", "#616161", "#212121"},
}

// mermaidText makes s safe inside a double-quoted mermaid label: the text
// is made single-line and shortened, and every character other than ASCII
// letters, digits, space and _-.,:/ is written as a mermaid entity code
// (#34; for a quote), so no text can close the label, start markup or
// change the diagram.
func mermaidText(s string, n int) string {
	var b strings.Builder
	for _, r := range truncate(clean(s), n) {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune(" _-.,:/", r):
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, "#%d;", r)
		}
	}
	return b.String()
}

// mermaid renders the step graph as a mermaid flowchart. Node ids are
// generated (s0, s1, ...), never taken from the document. The document's
// digest is a comment on the second line. A step that allows a tool
// declaring requiresApproval says "needs approval" and has the class
// approval (a heavier outline); a risk the consulted registry does not
// confirm says "(claim)".
func mermaid(e *Explanation) string {
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	if e.DocumentDigest != "" {
		fmt.Fprintf(&b, "  %%%% document sha256 %s\n", mermaidText(e.DocumentDigest, 64))
	}
	if len(e.Steps) == 0 {
		b.WriteString("  empty([\"no steps\"])\n")
		return b.String()
	}
	var approvals []string
	for i := range e.Steps {
		st := &e.Steps[i]
		ref := mermaidText(st.Ref, 40)
		if isGate(st) {
			fmt.Fprintf(&b, "  s%d{\"%s<br/>gate: a person decides\"}\n", i, ref)
			continue
		}
		label := ref + "<br/>risk: " + mermaidText(st.RiskClass, 20)
		if st.RiskClaimed {
			label += " (claim)"
		}
		if len(st.ApprovalTools) > 0 {
			label += "<br/>needs approval"
			approvals = append(approvals, fmt.Sprintf("s%d", i))
		}
		fmt.Fprintf(&b, "  s%d[\"%s\"]\n", i, label)
	}
	var ends, rejected bool
	missing := map[string]string{}
	for _, ed := range edges(e) {
		arrow := "-->"
		if ed.label != "" {
			arrow = "-->|" + ed.label + "|"
		}
		var to string
		switch ed.to {
		case toEnd:
			to, ends = "run_end", true
		case toRejected:
			to, rejected = "run_rejected", true
		case toMissing:
			id, ok := missing[ed.name]
			if !ok {
				id = fmt.Sprintf("missing%d", len(missing))
				missing[ed.name] = id
				fmt.Fprintf(&b, "  %s[\"no such step: %s\"]\n", id, mermaidText(ed.name, 40))
			}
			to = id
		default:
			to = fmt.Sprintf("s%d", ed.to)
		}
		fmt.Fprintf(&b, "  s%d %s %s\n", ed.from, arrow, to)
	}
	if ends {
		b.WriteString("  run_end([\"end of run\"])\n")
	}
	if rejected {
		b.WriteString("  run_rejected([\"run ends rejected\"])\n")
	}
	for _, r := range riskStyles {
		c := riskColors[r]
		fmt.Fprintf(&b, "  classDef %s fill:%s,stroke:%s,color:%s\n", r, c[0], c[1], c[2])
	}
	b.WriteString("  classDef terminal fill:#ffffff,stroke:#616161,stroke-dasharray:4 3\n")
	b.WriteString("  classDef missing fill:#ffffff,stroke:#b3261e,stroke-dasharray:4 3\n")
	if approvals != nil {
		b.WriteString("  classDef approval stroke-width:4px\n")
	}
	for _, r := range riskStyles {
		var ids []string
		for i := range e.Steps {
			if st := &e.Steps[i]; riskStyle(st.RiskClass) == r {
				ids = append(ids, fmt.Sprintf("s%d", i))
			}
		}
		if ids != nil {
			fmt.Fprintf(&b, "  class %s %s\n", strings.Join(ids, ","), r)
		}
	}
	var terms []string
	if ends {
		terms = append(terms, "run_end")
	}
	if rejected {
		terms = append(terms, "run_rejected")
	}
	if terms != nil {
		fmt.Fprintf(&b, "  class %s terminal\n", strings.Join(terms, ","))
	}
	if len(missing) > 0 {
		ids := make([]string, 0, len(missing))
		for i := range len(missing) {
			ids = append(ids, fmt.Sprintf("missing%d", i))
		}
		fmt.Fprintf(&b, "  class %s missing\n", strings.Join(ids, ","))
	}
	if approvals != nil {
		fmt.Fprintf(&b, "  class %s approval\n", strings.Join(approvals, ","))
	}
	return b.String()
}
