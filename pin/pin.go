// Package pin brings a document's embedded tool definitions in line with
// the registry, the way `go mod tidy` brings imports in line with the code:
// every embedded definition of a tool the registry knows takes the
// registry's values, and every allowedTools name the registry knows but the
// document does not embed gets a definition. Everything else in the
// document keeps its bytes: unchanged members, member order, formatting
// and the rest of the file.
//
// What the registry does not say (package drift: an empty riskClass, a nil
// sideEffecting, requiresApproval, permissions or data scopes, a missing
// schema, as an MCP server leaves them) keeps the document's value: pinning
// never erases a claim the registry cannot confirm or deny.
package pin

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/syntax"
)

// Change is one edit pin makes, for the summary line of each tool.
type Change struct {
	// Tool is the tool name.
	Tool string
	// Members are the members changed or added, in document order;
	// Added is true when the whole definition was added.
	Members []string
	Added   bool
}

// Result is the outcome of [Plan].
type Result struct {
	// Source is the document after pinning (the input itself when nothing
	// changes).
	Source []byte
	// Changes lists what changed, tool by tool, in document order.
	Changes []Change
	// Problems are edits pin cannot make on its own (a requires entry to
	// create by hand); when there are any, Source is still usable but the
	// document may not be valid.
	Problems []string
}

// Plan computes the pinned document. doc must have been read from its
// Source without a fatal syntax error (doc.Truncated false).
func Plan(doc *playbook.Document, reg *registry.Registry) (*Result, error) {
	if doc.Root == nil || doc.Truncated || doc.Root.Kind != syntax.Object {
		return nil, fmt.Errorf("%s cannot be pinned: it is not a readable document (run openplaybook validate)", doc.File)
	}
	src := doc.Source
	p := &planner{src: src, indent: detectIndent(src)}
	res := &Result{}
	for _, t := range doc.Tools {
		if t.Name == nil {
			continue
		}
		e, ok := reg.Lookup(t.Name.Value)
		if !ok {
			continue
		}
		if ch := p.updateTool(t, e.Definition); len(ch.Members) > 0 {
			res.Changes = append(res.Changes, ch)
		}
	}
	p.addMissing(doc, reg, res)
	out, err := udiff.Apply(string(src), p.edits)
	if err != nil {
		return nil, fmt.Errorf("pin: applying edits: %w", err)
	}
	res.Source = []byte(out)
	return res, nil
}

// Diff returns a unified diff from old to new labelled with name, or "".
func Diff(name string, old, new []byte) string {
	if bytes.Equal(old, new) {
		return ""
	}
	return udiff.Unified("a/"+name, "b/"+name, string(old), string(new))
}

type planner struct {
	src    []byte
	indent string // one level of indentation, as the document uses it
	edits  []udiff.Edit
}

// merged returns the value the registry gives a member, and whether the
// registry says anything about it.
func merged(member string, reg playbook.Definition) (any, bool) {
	switch member {
	case "source":
		return reg.Source, reg.Source != ""
	case "description":
		return reg.Description, reg.Description != ""
	case "permissions":
		return reg.Permissions, reg.Permissions != nil
	case "inputSchema":
		return reg.InputSchema, reg.InputSchema != nil
	case "outputSchema":
		return reg.OutputSchema, reg.OutputSchema != nil
	case "harnessInputSchema":
		return reg.HarnessInputSchema, reg.HarnessInputSchema != nil
	case "harnessOutputSchema":
		return reg.HarnessOutputSchema, reg.HarnessOutputSchema != nil
	case "dataScopeResources":
		return reg.DataScopeResources, reg.DataScopeResources != nil
	case "dataScopeWrites":
		return reg.DataScopeWrites, reg.DataScopeWrites != nil
	case "requiresApproval":
		return reg.RequiresApproval, reg.RequiresApproval != nil
	case "riskClass":
		return reg.RiskClass, reg.RiskClass != ""
	case "sideEffecting":
		return reg.SideEffecting, reg.SideEffecting != nil
	case "connectorType":
		return reg.ConnectorType, reg.ConnectorType != ""
	case "scope":
		return reg.Scope, reg.Scope != ""
	}
	return nil, false
}

// updateTool edits the members of one embedded definition that differ
// from what the registry says, and adds those the registry says but the
// document lacks.
func (p *planner) updateTool(t *playbook.Tool, reg playbook.Definition) Change {
	ch := Change{Tool: t.Name.Value}
	obj := t.Node
	present := map[string]bool{}
	for _, m := range obj.Members {
		present[m.Name] = true
		v, says := merged(m.Name, reg)
		if !says {
			continue
		}
		newVal, err := encode(v)
		if err != nil || sameJSON(p.src[m.Value.Offset:m.Value.End], newVal) {
			continue
		}
		p.edits = append(p.edits, udiff.Edit{Start: m.Value.Offset, End: m.Value.End, New: p.format(newVal, p.lineIndent(m.NameOffset))})
		ch.Members = append(ch.Members, m.Name)
	}
	var add []string
	for _, name := range playbook.ToolMembers {
		if present[name] {
			continue
		}
		v, says := merged(name, reg)
		if !says {
			continue
		}
		newVal, err := encode(v)
		if err != nil {
			continue
		}
		memberIndent := p.childIndent(obj)
		add = append(add, fmt.Sprintf(",\n%s%q: %s", memberIndent, name, p.format(newVal, memberIndent)))
		ch.Members = append(ch.Members, name)
	}
	if len(add) > 0 {
		p.insertBeforeClose(obj, strings.Join(add, ""))
	}
	return ch
}

// addMissing adds a definition for every allowedTools name the registry
// knows and the document does not embed, and lists MCP and connector tool
// names in their requires entry.
func (p *planner) addMissing(doc *playbook.Document, reg *registry.Registry, res *Result) {
	toolsNode := doc.Root.Member("tools")
	if toolsNode == nil || toolsNode.Kind != syntax.Array {
		return
	}
	var missing []string
	for _, s := range doc.Steps {
		for _, a := range s.AllowedTools.Values() {
			if doc.ToolNamed(a) == nil && reg.Has(a) && !slices.Contains(missing, a) {
				missing = append(missing, a)
			}
		}
	}
	if len(missing) == 0 {
		return
	}
	elemIndent := p.childIndent(toolsNode)
	var b strings.Builder
	for i, name := range missing {
		e, _ := reg.Lookup(name)
		def := e.Definition
		if def.Permissions == nil {
			def.Permissions = []string{}
		}
		v, err := json.Marshal(def)
		if err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("tool %q cannot be encoded: %v", name, err))
			continue
		}
		if len(toolsNode.Elems) > 0 || i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n" + elemIndent + p.format(v, elemIndent))
		res.Changes = append(res.Changes, Change{Tool: name, Added: true})
		p.listInRequires(doc, def, res)
	}
	p.insertBeforeClose(toolsNode, b.String())
}

// listInRequires adds an added tool's name to its MCP server's toolNames
// or its connection's capabilities, or records a problem when the requires
// entry itself is missing.
func (p *planner) listInRequires(doc *playbook.Document, def playbook.Definition, res *Result) {
	if doc.Requires == nil {
		res.Problems = append(res.Problems, fmt.Sprintf("tool %q was added but the document has no requires block to declare it in", def.Name))
		return
	}
	if server, _, ok := playbook.MCPParts(def.Name); ok {
		for _, s := range doc.Requires.MCPServers {
			if playbook.Str(s.Name) == server {
				if s.ToolNames == nil {
					res.Problems = append(res.Problems, fmt.Sprintf("add %q to requires.mcpServers[%q].toolNames by hand (the entry has no toolNames)", def.Name, server))
					return
				}
				p.appendString(s.ToolNames.Node, def.Name)
				return
			}
		}
		res.Problems = append(res.Problems, fmt.Sprintf("tool %q was added; declare MCP server %q in requires.mcpServers by hand", def.Name, server))
		return
	}
	if def.Source == "connector" {
		for _, c := range doc.Requires.Connections {
			if playbook.Str(c.Provider) == def.ConnectorType {
				if c.Capabilities == nil {
					res.Problems = append(res.Problems, fmt.Sprintf("add %q to the %q connection's capabilities by hand (it has none)", def.Name, def.ConnectorType))
					return
				}
				p.appendString(c.Capabilities.Node, def.Name)
				return
			}
		}
		res.Problems = append(res.Problems, fmt.Sprintf("tool %q was added; add a %q connection to requires.connections and manifest.requiredConnectors by hand", def.Name, def.ConnectorType))
	}
}

// appendString adds a string element at the end of array arr, on the same
// line as the last element when the array is on one line.
func (p *planner) appendString(arr *syntax.Node, s string) {
	q, _ := json.Marshal(s)
	if len(arr.Elems) == 0 {
		p.edits = append(p.edits, udiff.Edit{Start: arr.Offset + 1, End: arr.End - 1, New: string(q)})
		return
	}
	last := arr.Elems[len(arr.Elems)-1]
	sep := ", "
	if bytes.ContainsRune(p.src[arr.Offset:arr.End], '\n') {
		sep = ",\n" + p.lineIndent(last.Offset)
	}
	p.edits = append(p.edits, udiff.Edit{Start: last.End, End: last.End, New: sep + string(q)})
}

// insertBeforeClose inserts text after the last member or element of a
// container, before the whitespace that precedes its closing delimiter.
func (p *planner) insertBeforeClose(n *syntax.Node, text string) {
	at := n.Offset + 1
	if len(n.Members) > 0 {
		at = n.Members[len(n.Members)-1].Value.End
	} else if len(n.Elems) > 0 {
		at = n.Elems[len(n.Elems)-1].End
	} else {
		text = strings.TrimPrefix(text, ",")
	}
	if len(n.Members) == 0 && len(n.Elems) == 0 {
		text += "\n" + p.lineIndent(n.Offset)
		p.edits = append(p.edits, udiff.Edit{Start: at, End: n.End - 1, New: text})
		return
	}
	p.edits = append(p.edits, udiff.Edit{Start: at, End: at, New: text})
}

// lineIndent returns the whitespace that starts the line holding off.
func (p *planner) lineIndent(off int) string {
	start := bytes.LastIndexByte(p.src[:off], '\n') + 1
	end := start
	for end < len(p.src) && (p.src[end] == ' ' || p.src[end] == '\t') {
		end++
	}
	return string(p.src[start:end])
}

// childIndent returns the indentation of a container's members or
// elements: that of its first child, or its own line's plus one level.
func (p *planner) childIndent(n *syntax.Node) string {
	if len(n.Members) > 0 {
		return p.lineIndent(n.Members[0].NameOffset)
	}
	if len(n.Elems) > 0 {
		return p.lineIndent(n.Elems[0].Offset)
	}
	return p.lineIndent(n.Offset) + p.indent
}

// format renders a JSON value indented the document's way, its first line
// at the current position and later lines under prefix.
func (p *planner) format(v []byte, prefix string) string {
	val := jsontext.Value(slices.Clone(v))
	if err := val.Indent(jsontext.WithIndentPrefix(prefix), jsontext.WithIndent(p.indent)); err != nil {
		return string(v)
	}
	return string(val)
}

// detectIndent guesses one level of indentation from the first indented
// line (two spaces when there is none).
func detectIndent(src []byte) string {
	for _, line := range bytes.Split(src, []byte("\n"))[1:] {
		n := 0
		for n < len(line) && (line[n] == ' ' || line[n] == '\t') {
			n++
		}
		if n > 0 {
			return string(line[:n])
		}
	}
	return "  "
}

func encode(v any) ([]byte, error) {
	switch x := v.(type) {
	case jsontext.Value:
		return x, nil
	}
	return json.Marshal(v)
}

// sameJSON reports whether two JSON texts are the same value (RFC 8785
// canonical forms equal): key order, spacing and number spelling aside.
func sameJSON(a, b []byte) bool {
	ca, cb := jsontext.Value(slices.Clone(a)), jsontext.Value(slices.Clone(b))
	if ca.Canonicalize() != nil || cb.Canonicalize() != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca, cb)
}

// Summary renders the changes one line per tool, sorted as given.
func Summary(changes []Change) string {
	var b strings.Builder
	for _, c := range changes {
		if c.Added {
			fmt.Fprintf(&b, "  %s: added from the registry\n", c.Tool)
			continue
		}
		ms := slices.Clone(c.Members)
		sort.Strings(ms)
		fmt.Fprintf(&b, "  %s: %s\n", c.Tool, strings.Join(ms, ", "))
	}
	return b.String()
}
