package explain

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// textWidth is the width the text format is laid out for.
const textWidth = 100

// textWriter accumulates the text format; tables go through tabwriter.
type textWriter struct {
	buf bytes.Buffer
}

func (t *textWriter) line(indent int, s string) {
	t.buf.WriteString(strings.Repeat(" ", indent))
	t.buf.WriteString(s)
	t.buf.WriteByte('\n')
}

func (t *textWriter) blank() { t.buf.WriteByte('\n') }

// para writes s cleaned and wrapped at indent.
func (t *textWriter) para(indent int, s string) {
	for _, l := range wrap(s, textWidth-indent) {
		t.line(indent, l)
	}
}

// table returns a tabwriter whose output goes to t; Flush it when done.
func (t *textWriter) table() *tabwriter.Writer {
	return tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
}

// cells writes one table row: the cells are cleaned, indented by indent.
func cells(tw io.Writer, indent int, cs ...string) {
	for i := range cs {
		cs[i] = clean(cs[i])
	}
	fmt.Fprintf(tw, "%s%s\n", strings.Repeat(" ", indent), strings.Join(cs, "\t"))
}

func renderText(w io.Writer, e *Explanation) error {
	t := &textWriter{}
	textProblems(t, e)
	textHeader(t, e)
	textSummary(t, e)
	textInput(t, e)
	textSteps(t, e)
	textRequires(t, e)
	_, err := w.Write(t.buf.Bytes())
	return err
}

func countsText(c ProblemCounts) string {
	plural := func(n int, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return strconv.Itoa(n) + " " + many
	}
	return plural(c.Errors, "error", "errors") + ", " + plural(c.Warnings, "warning", "warnings") + ", " + plural(c.Infos, "info", "infos")
}

func position(p *Problem) string {
	if p.Line == 0 {
		return "-"
	}
	return fmt.Sprintf("%d:%d", p.Line, p.Column)
}

func textProblems(t *textWriter, e *Explanation) {
	if len(e.Problems) == 0 {
		return
	}
	t.line(0, "PROBLEMS: "+countsText(e.ProblemCounts))
	if e.ProblemCounts.Errors > 0 {
		t.line(2, notValid)
	}
	posWidth := 0
	for i := range e.Problems {
		posWidth = max(posWidth, len(position(&e.Problems[i])))
	}
	// 2 indent, position, 2, severity (at most 7), 2.
	width := max(textWidth-2-posWidth-2-7-2, 40)
	tw := t.table()
	for i := range e.Problems {
		p := &e.Problems[i]
		lines := wrap(p.Message+" ["+p.Rule+"]", width)
		cells(tw, 2, position(p), p.Severity, lines[0])
		for _, l := range lines[1:] {
			cells(tw, 2, "", "", l)
		}
	}
	tw.Flush()
	t.blank()
}

func textHeader(t *textWriter, e *Explanation) {
	m := &e.Manifest
	t.line(0, clean(title(e)))
	t.line(2, clean(fmt.Sprintf("id %s · version %s · OpenPlaybook %s", orUnknown(m.ID), orUnknown(m.Version), orUnknown(e.OpenPlaybook))))
	if e.DocumentDigest != "" {
		t.line(2, "sha256 "+e.DocumentDigest)
	}
	if m.Description != "" {
		t.para(2, m.Description)
	}
	t.para(2, registryText(e))
	for _, u := range e.Registry.Unavailable {
		t.para(4, "not consulted: "+u)
	}
	t.blank()
}

// registryText says what the tool definitions were checked against.
func registryText(e *Explanation) string {
	if !e.Registry.Consulted {
		return noRegistry
	}
	return "Checked against " + orNone(e.Registry.Source, "a registry") + "; " + claimLegend
}

// textInput writes what input a run takes: the inputSchema's top-level
// properties, or the schema itself when it declares none.
func textInput(t *textWriter, e *Explanation) {
	t.line(0, "RUN INPUT (inputSchema)")
	switch {
	case e.InputSchema == nil:
		t.para(2, noInputSchema)
	case len(e.Input) == 0:
		t.para(2, "no top-level properties declared; the schema: "+schemaText(e.InputSchema, false))
	default:
		tw := t.table()
		cells(tw, 2, "NAME", "TYPE", "REQUIRED", "DESCRIPTION")
		nameW, typeW := len("NAME"), len("TYPE")
		for _, f := range e.Input {
			nameW = max(nameW, len(clean(f.Name)))
			typeW = max(typeW, len(clean(orNone(f.Type, "any"))))
		}
		width := max(textWidth-2-nameW-2-typeW-2-len("REQUIRED")-2, 30)
		for _, f := range e.Input {
			lines := wrap(f.Description, width)
			if len(lines) == 0 {
				lines = []string{""}
			}
			cells(tw, 2, f.Name, orNone(f.Type, "any"), yesNo(f.Required), lines[0])
			for _, l := range lines[1:] {
				cells(tw, 2, "", "", "", l)
			}
		}
		tw.Flush()
	}
	t.blank()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// kv writes a label and a value whose lines are continued under the
// value column.
type kv struct {
	tw    *tabwriter.Writer
	label string
}

func (k *kv) add(s string) {
	fmt.Fprintf(k.tw, "  %s\t%s\n", k.label, clean(s))
	k.label = ""
}

// summaryValueWidth is the room the summary leaves for values.
const summaryValueWidth = textWidth - 22

func textSummary(t *textWriter, e *Explanation) {
	s := &e.Summary
	t.line(0, "WHAT IT CAN DO (highest risk: "+s.RiskClass+")")
	tw := t.table()
	uncertain := len(s.UndefinedTools) + len(s.UnknownRisk)
	noneDeclared := "none declared"
	if uncertain > 0 {
		noneDeclared = fmt.Sprintf("none declared, but %d tool(s) are undefined or of unknown risk", uncertain)
	}
	stepTools := func(label string, list []StepTools) {
		k := &kv{tw: tw, label: label}
		for _, x := range list {
			k.add(x.Step + ": " + strings.Join(x.Tools, ", "))
		}
		if len(list) == 0 {
			k.add(noneDeclared)
		}
	}
	stepTools("Move money", s.Money)
	stepTools("Contact customers", s.CustomerComms)
	k := &kv{tw: tw, label: "Write data"}
	for _, x := range s.DataScopeWrites {
		k.add(x.Step + ": " + strings.Join(x.DataScopeWrites, ", "))
	}
	if len(s.DataScopeWrites) == 0 {
		k.add(noneDeclared)
	}
	k = &kv{tw: tw, label: "Call MCP servers"}
	for _, x := range s.MCPServers {
		k.add(x.Step + ": " + strings.Join(x.Servers, ", ") + " (" + strings.Join(x.Tools, ", ") + ")")
	}
	if len(s.MCPServers) == 0 {
		k.add("none")
	}
	k = &kv{tw: tw, label: "Need approval"}
	for _, x := range s.RequiresApproval {
		k.add(x.Tool + " (" + x.RiskClass + ") in " + strings.Join(x.Steps, ", "))
	}
	if len(s.RequiresApproval) == 0 {
		k.add("no tool call declares requiresApproval")
	}
	k = &kv{tw: tw, label: "Human gates"}
	for i := range s.Gates {
		g := &s.Gates[i]
		k.add(g.Step + ": approve -> " + gateNext(g) + ", reject -> " + gateReject(g))
		for _, l := range wrap(g.Purpose, summaryValueWidth-2) {
			k.add("  " + l)
		}
	}
	if len(s.Gates) == 0 {
		k.add("none: no person is asked before the run goes on")
	}
	toolSteps := func(label string, list []ToolSteps, note string) {
		k := &kv{tw: tw, label: label}
		for _, x := range list {
			k.add(x.Tool + " in " + strings.Join(x.Steps, ", ") + note)
		}
		if len(list) == 0 {
			k.add("none")
		}
	}
	toolSteps("Undefined tools", s.UndefinedTools, ": "+UndefinedNote)
	toolSteps("Unknown risk", s.UnknownRisk, "")
	tw.Flush()
	t.blank()
}

// from renders a tool's family with its connector type or server, and its
// source where the source does not follow from the family.
func from(tl *Tool) string {
	s := tl.Family
	if v := via(tl); v != "" {
		s += " " + v
	}
	want := map[string]string{FamilyBuiltIn: "primitive", FamilyConnector: "connector", FamilyMCP: "mcp"}[tl.Family]
	switch {
	case !tl.Defined:
	case tl.Source == "":
		s += " (no source)"
	case tl.Source != want:
		s += " (source " + tl.Source + ")"
	}
	return s
}

// writes renders sideEffecting together with the declared
// dataScopeWrites: "none" for a tool declaring no side effects, the scopes
// written for a side-effecting one.
func writes(tl *Tool) string {
	w := strings.Join(tl.DataScopeWrites, ", ")
	switch {
	case tl.SideEffecting == nil && w != "":
		return w + " (sideEffecting unknown)"
	case tl.SideEffecting == nil:
		return "unknown"
	case *tl.SideEffecting && w != "":
		return w
	case *tl.SideEffecting:
		return "side effects, scopes not declared"
	case w != "":
		return w + " (yet sideEffecting false)"
	}
	return "none"
}

// approval renders requiresApproval.
func approval(tl *Tool) string {
	if tl.RequiresApproval == nil {
		return "unknown"
	}
	if *tl.RequiresApproval {
		return "required"
	}
	return "no"
}

// kindText describes a step's kind for people.
func kindText(st *Step) string {
	switch st.Kind {
	case "agent":
		if st.Agent == "" {
			return "agent (no agent named)"
		}
		return "agent " + st.Agent
	case "gate":
		if n := PolicyText(st.Policy); n != "" {
			return "gate: a person decides (policy: " + n + ")"
		}
		return "gate: a person decides"
	case "":
		return "kind unknown"
	}
	return "kind " + strconv.Quote(st.Kind) + " (not a 1.6 kind)"
}

func textSteps(t *textWriter, e *Explanation) {
	if len(e.Steps) == 0 {
		t.line(0, "STEPS: none")
		t.blank()
		return
	}
	t.line(0, "STEPS (entry: "+clean(e.EntryStep)+")")
	for i := range e.Steps {
		st := &e.Steps[i]
		t.blank()
		head := fmt.Sprintf("%d. %s — %s", i+1, st.Ref, kindText(st))
		if !isGate(st) {
			head += ", highest risk: " + stepRisk(st)
		}
		t.line(2, clean(head))
		if st.Purpose != "" {
			t.para(4, st.Purpose)
		} else {
			t.line(4, "(no purpose given)")
		}
		if isGate(st) {
			t.line(4, clean("on approve: "+nextText(st)))
			t.line(4, clean("on reject: "+onRejectText(st)))
		} else {
			t.line(4, clean("next: "+nextText(st)))
			if st.OnReject != "" || st.OnRejectMissing {
				t.line(4, clean("onReject (only gates have one): "+onRejectText(st)))
			}
		}
		if isGate(st) && len(st.AllowedTools) == 0 {
			continue
		}
		if len(st.AllowedTools) == 0 {
			t.line(4, "tools: none (this step can call no tool)")
			continue
		}
		t.blank()
		textTools(t, st.AllowedTools)
		for j := range st.AllowedTools {
			if tl := &st.AllowedTools[j]; !tl.Defined {
				t.line(4, clean("! "+tl.Name+": "+UndefinedNote))
			}
		}
	}
	t.blank()
}

// textTools writes a step's tool table: one aligned row per tool, each
// followed, under the FROM column (so the table stays within 100 columns),
// by its description, its permissions and, when a registry was consulted,
// the values it does not confirm. A value in the row that is such a claim
// ends in "*".
func textTools(t *textWriter, tools []Tool) {
	var tab bytes.Buffer
	tw := tabwriter.NewWriter(&tab, 0, 0, 2, ' ', 0)
	cells(tw, 4, "TOOL", "FROM", "RISK", "APPROVAL", "WRITES")
	for j := range tools {
		tl := &tools[j]
		cells(tw, 4, tl.Name,
			from(tl)+star(tl, "source", "connectorType"),
			riskText(tl)+star(tl, "riskClass"),
			approval(tl)+star(tl, "requiresApproval"),
			writes(tl)+star(tl, "sideEffecting", "dataScopeWrites"))
	}
	tw.Flush()
	rows := strings.Split(strings.TrimSuffix(tab.String(), "\n"), "\n")
	off := strings.Index(rows[0], "FROM")
	t.line(0, strings.TrimRight(rows[0], " "))
	for j, row := range rows[1:] {
		t.line(0, strings.TrimRight(row, " "))
		if j >= len(tools) {
			continue
		}
		tl := &tools[j]
		if tl.Defined {
			t.para(off, orNone(tl.Description, "(no description)")+star(tl, "description"))
			t.para(off, "permissions: "+declaredList(tl.Permissions)+star(tl, "permissions"))
		}
		if n := claimsText(tl); n != "" {
			t.para(off, "* "+n)
		}
		if n := PolicyText(tl.Policy); n != "" {
			t.para(off, "policy: "+n)
		}
	}
}

// star is "*" when any of the fields of tl is a claim the consulted
// registry does not confirm.
func star(tl *Tool, fields ...string) string {
	for _, f := range fields {
		if claimed(tl, f) {
			return "*"
		}
	}
	return ""
}

func textRequires(t *textWriter, e *Explanation) {
	q := &e.Requires
	t.line(0, "WHAT A HARNESS MUST PROVIDE")
	t.line(2, "Connections")
	if len(q.Connections) == 0 {
		t.line(4, "none")
	} else {
		tw := t.table()
		cells(tw, 4, "PROVIDER", "AUTH", "SCOPES")
		for _, c := range q.Connections {
			scopes := c.Scopes
			if len(scopes) == 0 {
				scopes = []string{"none"}
			}
			cells(tw, 4, orUnknown(c.Provider), orUnknown(c.AuthKind), scopes[0])
			for _, s := range scopes[1:] {
				cells(tw, 4, "", "", s)
			}
		}
		tw.Flush()
	}
	t.line(2, "MCP servers")
	if len(q.MCPServers) == 0 {
		t.line(4, "none")
	} else {
		tw := t.table()
		for _, m := range q.MCPServers {
			cells(tw, 4, orUnknown(m.Name), listOr(m.ToolNames, "no tool names listed"))
		}
		tw.Flush()
	}
	t.line(2, "Secrets (names and purposes only; a document never holds their values)")
	if len(q.Secrets) == 0 {
		t.line(4, "none")
	} else {
		tw := t.table()
		width := 0
		for _, s := range q.Secrets {
			width = max(width, len(clean(orUnknown(s.Name))))
		}
		width = max(textWidth-4-width-2, 40)
		for _, s := range q.Secrets {
			lines := wrap(s.Purpose, width)
			if len(lines) == 0 {
				lines = []string{"(no purpose given)"}
			}
			cells(tw, 4, orUnknown(s.Name), lines[0])
			for _, l := range lines[1:] {
				cells(tw, 4, "", l)
			}
		}
		tw.Flush()
	}
}
