package explain

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// mdText escapes s as inline GitHub-flavoured Markdown text that is safe in
// a table cell: one line, no markup, no HTML. Emphasis, code, link, table
// and strikethrough characters are backslash-escaped (so is any ASCII
// punctuation starting the text, which could start a heading, a list or a
// quote), < > & become entities, and control or invisible characters are
// shown as Go escapes.
func mdText(s string) string {
	var b strings.Builder
	for i, r := range clean(s) {
		switch {
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '&':
			b.WriteString("&amp;")
		case strings.ContainsRune("\\`*_[]|~", r), i == 0 && r < utf8.RuneSelf && (unicode.IsPunct(r) || unicode.IsSymbol(r)):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdCode renders s as a code span safe in a table cell (a name, an id).
func mdCode(s string) string {
	s = clean(s)
	if s == "" {
		return ""
	}
	if strings.ContainsAny(s, "`<>&") {
		// A code span cannot escape a backtick and would show entities
		// literally: fall back to escaped text.
		return mdText(s)
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

// mdCodes renders list as comma-separated code spans, or none.
func mdCodes(list []string, none string) string {
	if len(list) == 0 {
		return none
	}
	parts := make([]string, len(list))
	for i, s := range list {
		parts[i] = mdCode(s)
	}
	return strings.Join(parts, ", ")
}

// mdDeclared renders a list that is nil when not declared.
func mdDeclared(list []string) string {
	if list == nil {
		return "unknown"
	}
	return mdCodes(list, "none")
}

type mdWriter struct{ bytes.Buffer }

func (m *mdWriter) f(format string, args ...any) { fmt.Fprintf(m, format, args...) }

func (m *mdWriter) row(cells ...string) {
	m.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

func (m *mdWriter) header(cells ...string) {
	m.row(cells...)
	seps := make([]string, len(cells))
	for i := range seps {
		seps[i] = "---"
	}
	m.row(seps...)
}

func renderMarkdown(w io.Writer, e *Explanation) error {
	m := &mdWriter{}
	man := &e.Manifest
	m.f("# %s\n\n", mdText(title(e)))
	if len(e.Problems) > 0 {
		m.f("## Problems: %s\n\n", mdText(countsText(e.ProblemCounts)))
		if e.ProblemCounts.Errors > 0 {
			m.f("%s\n\n", notValid)
		}
		m.header("Line:col", "Severity", "Message", "Rule")
		for i := range e.Problems {
			p := &e.Problems[i]
			m.row(position(p), p.Severity, mdText(p.Message), mdCode(p.Rule))
		}
		m.f("\n")
	}
	m.f("- **Id:** %s\n- **Version:** %s\n- **Format:** OpenPlaybook %s\n",
		mdCode(orUnknown(man.ID)), mdText(orUnknown(man.Version)), mdText(orUnknown(e.OpenPlaybook)))
	if e.DocumentDigest != "" {
		m.f("- **SHA-256:** %s\n", mdCode(e.DocumentDigest))
	}
	m.f("\n")
	if man.Description != "" {
		m.f("%s\n\n", mdText(man.Description))
	}
	if e.Registry.Consulted {
		m.f("Checked against %s; a value marked *(claim)* is the document's claim, which the registry does not confirm.\n\n", mdText(orNone(e.Registry.Source, "a registry")))
		for _, u := range e.Registry.Unavailable {
			m.f("- Not consulted: %s\n", mdText(u))
		}
		if len(e.Registry.Unavailable) > 0 {
			m.f("\n")
		}
	} else {
		m.f("%s\n\n", mdText(noRegistry))
	}

	s := &e.Summary
	m.f("## What it can do\n\nHighest risk: **%s**.\n\n", mdText(s.RiskClass))
	noneDeclared := "none declared"
	if n := len(s.UndefinedTools) + len(s.UnknownRisk); n > 0 {
		noneDeclared = fmt.Sprintf("none declared, but %d tool(s) are undefined or of unknown risk", n)
	}
	m.header("Capability", "Where")
	stepTools := func(list []StepTools) string {
		if len(list) == 0 {
			return noneDeclared
		}
		var parts []string
		for _, x := range list {
			parts = append(parts, "step "+mdCode(x.Step)+": "+mdCodes(x.Tools, ""))
		}
		return strings.Join(parts, "<br>")
	}
	m.row("Move money", stepTools(s.Money))
	m.row("Contact customers", stepTools(s.CustomerComms))
	var parts []string
	for _, x := range s.DataScopeWrites {
		parts = append(parts, "step "+mdCode(x.Step)+": "+mdCodes(x.DataScopeWrites, ""))
	}
	m.row("Write data", joinOr(parts, noneDeclared))
	parts = nil
	for _, x := range s.MCPServers {
		parts = append(parts, "step "+mdCode(x.Step)+": "+mdCodes(x.Servers, "")+" ("+mdCodes(x.Tools, "")+")")
	}
	m.row("Call MCP servers", joinOr(parts, "none"))
	parts = nil
	for _, x := range s.RequiresApproval {
		parts = append(parts, mdCode(x.Tool)+" ("+mdText(x.RiskClass)+") in "+mdCodes(x.Steps, ""))
	}
	m.row("Need approval", joinOr(parts, "no tool call declares requiresApproval"))
	parts = nil
	for i := range s.Gates {
		g := &s.Gates[i]
		parts = append(parts, mdCode(g.Step)+": "+mdText(g.Purpose)+" (approve → "+mdStep(g.Next, g.NextMissing, "end of run")+", reject → "+mdStep(g.OnReject, g.OnRejectMissing, "run ends rejected")+")")
	}
	m.row("Human gates", joinOr(parts, "none: no person is asked before the run goes on"))
	parts = nil
	for _, x := range s.UndefinedTools {
		parts = append(parts, mdCode(x.Tool)+" in "+mdCodes(x.Steps, "")+": "+UndefinedNote)
	}
	m.row("Undefined tools", joinOr(parts, "none"))
	parts = nil
	for _, x := range s.UnknownRisk {
		parts = append(parts, mdCode(x.Tool)+" in "+mdCodes(x.Steps, ""))
	}
	m.row("Unknown risk", joinOr(parts, "none"))

	m.f("\n## Run input\n\n")
	switch {
	case e.InputSchema == nil:
		m.f("%s\n\n", mdText(noInputSchema))
	case len(e.Input) == 0:
		m.f("The inputSchema declares no top-level properties.\n\n")
	default:
		m.header("Name", "Type", "Required", "Description")
		for _, f := range e.Input {
			m.row(mdCode(f.Name), mdText(orNone(f.Type, "any")), yesNo(f.Required), mdText(f.Description))
		}
		m.f("\n")
	}
	if e.InputSchema != nil {
		m.f("```json\n%s\n```\n\n", mdFence(schemaText(e.InputSchema, true)))
	}

	m.f("## Step graph\n\n```mermaid\n%s```\n\n", mermaid(e))

	m.f("## Steps\n\n")
	if len(e.Steps) == 0 {
		m.f("No steps.\n\n")
	} else {
		m.f("The run starts at %s.\n\n", mdCode(e.EntryStep))
	}
	for i := range e.Steps {
		st := &e.Steps[i]
		m.f("### %d. %s\n\n", i+1, mdText(st.Ref))
		m.f("- **Kind:** %s\n", mdText(kindText(st)))
		if !isGate(st) {
			m.f("- **Highest risk:** %s\n", mdText(stepRisk(st)))
		}
		m.f("- **Purpose:** %s\n", mdText(orNone(st.Purpose, "(no purpose given)")))
		if isGate(st) {
			m.f("- **On approve:** %s\n- **On reject:** %s\n", mdStep(st.Next, st.NextMissing, "end of run"), mdStep(st.OnReject, st.OnRejectMissing, "run ends rejected"))
		} else {
			m.f("- **Next:** %s\n", mdStep(st.Next, st.NextMissing, "end of run"))
			if st.OnReject != "" || st.OnRejectMissing {
				m.f("- **onReject (only gates have one):** %s\n", mdStep(st.OnReject, st.OnRejectMissing, "run ends rejected"))
			}
		}
		m.f("\n")
		if len(st.AllowedTools) == 0 {
			if !isGate(st) {
				m.f("This step can call no tool.\n\n")
			}
			continue
		}
		m.header("Tool", "Family", "Source", "Connector / server", "riskClass", "sideEffecting", "requiresApproval", "permissions", "dataScopeWrites")
		// Under the table, each tool's description, then what the
		// registry does not confirm.
		var notes []string
		for j := range st.AllowedTools {
			tl := &st.AllowedTools[j]
			c := func(field, cell string) string {
				if claimed(tl, field) {
					return cell + " *(claim)*"
				}
				return cell
			}
			note := mdCode(tl.Name) + ": "
			if tl.Defined {
				note += c("description", mdText(orNone(tl.Description, "(no description)")))
			} else {
				note += mdText(UndefinedNote)
			}
			if n := claimsText(tl); n != "" {
				note += " — " + mdText(n)
			}
			if n := PolicyText(tl.Policy); n != "" {
				note += " — policy: " + mdText(n)
			}
			notes = append(notes, note)
			if !tl.Defined {
				m.row(mdCode(tl.Name), mdText(tl.Family), "", mdCode(via(tl)), "unknown", "unknown", "unknown", "unknown", "**"+mdText(UndefinedNote)+"**")
				continue
			}
			m.row(mdCode(tl.Name), mdText(tl.Family),
				c("source", mdText(orUnknown(tl.Source))), c("connectorType", mdCode(via(tl))), c("riskClass", mdText(riskText(tl))),
				c("sideEffecting", tristate(tl.SideEffecting)), c("requiresApproval", tristate(tl.RequiresApproval)),
				c("permissions", mdDeclared(tl.Permissions)), c("dataScopeWrites", mdWrites(tl)))
		}
		m.f("\n")
		for _, n := range notes {
			m.f("- %s\n", n)
		}
		m.f("\n")
	}

	q := &e.Requires
	m.f("## What a harness must provide\n\n### Connections\n\n")
	if len(q.Connections) == 0 {
		m.f("None.\n\n")
	} else {
		m.header("Provider", "authKind", "Scopes", "Tools used")
		for _, c := range q.Connections {
			m.row(mdCode(orUnknown(c.Provider)), mdText(orUnknown(c.AuthKind)), mdCodes(c.Scopes, "none"), mdCodes(c.Capabilities, "none"))
		}
		m.f("\n")
	}
	m.f("### MCP servers\n\n")
	if len(q.MCPServers) == 0 {
		m.f("None.\n\n")
	} else {
		m.header("Server", "Tool names")
		for _, s := range q.MCPServers {
			m.row(mdCode(orUnknown(s.Name)), mdCodes(s.ToolNames, "none"))
		}
		m.f("\n")
	}
	m.f("### Secrets\n\nNames and purposes only; a document never holds their values.\n\n")
	if len(q.Secrets) == 0 {
		m.f("None.\n")
	} else {
		m.header("Secret", "Purpose")
		for _, s := range q.Secrets {
			m.row(mdCode(orUnknown(s.Name)), mdText(orNone(s.Purpose, "(no purpose given)")))
		}
	}
	_, err := w.Write(m.Bytes())
	return err
}

// mdFence makes s safe inside a ``` fenced block: a line of backticks
// could close the fence, so backticks are written as \u0060 (JSON text
// means the same).
func mdFence(s string) string { return strings.ReplaceAll(s, "`", `\u0060`) }

func mdWrites(tl *Tool) string {
	if n := writesNote(tl); n != "" {
		return n
	}
	return mdCodes(tl.DataScopeWrites, "none")
}

// mdStep renders a step reference: the id as code, with what follows
// from an absent or dangling reference as text.
func mdStep(ref string, missing bool, absent string) string {
	switch {
	case missing:
		return mdCode(ref) + " (no such step)"
	case ref == "":
		return absent
	}
	return mdCode(ref)
}

func joinOr(parts []string, none string) string {
	if len(parts) == 0 {
		return none
	}
	return strings.Join(parts, "<br>")
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}
