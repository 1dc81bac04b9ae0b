package validate

import (
	"fmt"
	"unicode/utf8"

	"github.com/openplaybook/openplaybook/playbook"
)

// toolNameForm is how messages state a well-formed tool name.
const toolNameForm = "a tool name is segments of [A-Za-z0-9_-] joined by single dots, at most 128 bytes"

// ruleToolName reports malformed tool names wherever the document names a
// tool: tools[].name, steps[].allowedTools[], requires.mcpServers[].toolNames[]
// and requires.connections[].capabilities[] (docs/format.md, "Names": "A
// tool name is ASCII: segments of [A-Za-z0-9_-] joined by single dots, at
// most 128 characters ... Whitespace, control characters, non-ASCII
// letters, empty segments and leading/trailing dots are errors, never
// silently cleaned"). Names are shown quoted, so control characters and
// padding are visible, and are never trimmed or normalised. allowedTools
// patterns and reference URIs are the allowed-tools-form rule's concern.
type ruleToolName struct{}

func (ruleToolName) Name() string { return "tool-name" }
func (ruleToolName) Description() string {
	return "every tool name is ASCII segments of [A-Za-z0-9_-] joined by single dots, at most 128 bytes"
}

func (ruleToolName) Check(c *Context) {
	// where is called only when there is something to report.
	check := func(s *playbook.String, where func() string) {
		if s == nil {
			return
		}
		p := toolNameProblem(s.Value)
		if p == "" {
			return
		}
		if p == "contains a non-ASCII character" {
			p += nonASCIIDetail(s.Value)
		}
		c.Errorf(s.Node, "tool name %+q in %s %s; %s", s.Value, where(), p, toolNameForm)
	}
	checkList := func(l *playbook.StringList, where func() string) {
		if l == nil {
			return
		}
		for _, s := range l.Items {
			check(s, where)
		}
	}
	d := c.Doc
	for _, t := range d.Tools {
		check(t.Name, func() string { return `"tools"` })
	}
	for _, s := range d.Steps {
		if s.AllowedTools == nil {
			continue
		}
		for _, a := range s.AllowedTools.Items {
			if !isReferenceForm(a.Value) {
				check(a, func() string { return fmt.Sprintf("%q of %s", "allowedTools", stepLabel(s)) })
			}
		}
	}
	if d.Requires != nil {
		for _, m := range d.Requires.MCPServers {
			checkList(m.ToolNames, func() string {
				if m.Name == nil {
					return `"toolNames" of an MCP server`
				}
				return fmt.Sprintf("%q of MCP server %q", "toolNames", m.Name.Value)
			})
		}
		for _, x := range d.Requires.Connections {
			checkList(x.Capabilities, func() string {
				if x.Provider == nil {
					return `"capabilities" of a connection`
				}
				return fmt.Sprintf("%q of the %q connection", "capabilities", x.Provider.Value)
			})
		}
	}
}

// nonASCIIDetail names the first non-ASCII character of s, such as
// " (U+2024 at byte 8)", so that a look-alike of "." or a letter is
// visible.
func nonASCIIDetail(s string) string {
	for i, r := range s {
		if r >= utf8.RuneSelf {
			return fmt.Sprintf(" (%U at byte %d)", r, i)
		}
	}
	return ""
}
