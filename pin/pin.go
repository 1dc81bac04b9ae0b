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
//
// Pinning never lowers a risk the document states: a riskClass lower in
// the registry (read < internal < customer_comms < money), sideEffecting
// false where the document says true, requiresApproval false where the
// document says true keep the document's value, with a note naming the
// member ([Result.Notes]); a riskier registry value is written. A server's
// annotations and description are claims of the server's; lowering what a
// reviewer approved is a person's decision.
//
// The pinned document is always readable JSON, lists no name twice, and
// has no reader or validator error the original did not have: an edit
// that would add one is left out, the rest is pinned, and
// [Result.Problems] says which member a person must fill.
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

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/syntax"
	"github.com/openplaybook/openplaybook/validate"
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
	// changes). It is always readable JSON, and pinning introduces no
	// reader or validator error into it: an edit that would is left out
	// and explained in Problems.
	Source []byte
	// Changes lists what changed, tool by tool, in document order.
	Changes []Change
	// Notes are values pin kept on purpose: a riskClass, sideEffecting or
	// requiresApproval the registry states lower than the document does
	// (pin never lowers a risk claim). Each names the tool and the member.
	Notes []string
	// Problems are edits pin cannot make on its own and left out of
	// Source: each names the tool and the member (or requires entry) a
	// person must fill, and why.
	Problems []string
}

// Plan computes the pinned document. doc must have been read from its
// Source without a fatal syntax error (doc.Truncated false).
//
// Each edit (one member of one embedded definition, or one added
// definition with its requires listing) is checked with the reader and
// the validator ([playbook.Read], [validate.Document], with the registry's
// names): one that would introduce an error the document does not already
// have is left out, so that everything pin can decide is still pinned and
// what needs a person is said in Problems.
func Plan(doc *playbook.Document, reg *registry.Registry) (*Result, error) {
	if doc.Root == nil || doc.Truncated || doc.Root.Kind != syntax.Object {
		return nil, fmt.Errorf("%s cannot be pinned: it is not a readable document (run openplaybook validate)", doc.File)
	}
	src := doc.Source
	p := &planner{src: src, indent: detectIndent(src), doc: doc, reg: reg}
	res := &Result{}
	for i, t := range doc.Tools {
		if t.Name == nil {
			continue
		}
		e, ok := reg.Lookup(t.Name.Value)
		if !ok {
			continue
		}
		p.updateTool(i, t, e.Definition, res)
	}
	p.addMissing(res)
	if len(p.groups) == 0 {
		res.Source = src
		return res, nil
	}

	base := p.errorKeys(src)
	all := make([]bool, len(p.groups))
	for i := range all {
		all[i] = true
	}
	out, err := p.render(all)
	if err != nil {
		return nil, err
	}
	accepted := all
	if bad := p.newErrors(base, out); len(bad) > 0 {
		// Something needs a person: keep each edit that, with those kept
		// before it, introduces no error.
		accepted = make([]bool, len(p.groups))
		for i, g := range p.groups {
			accepted[i] = true
			try, err := p.render(accepted)
			if err != nil {
				return nil, err
			}
			if bad := p.newErrors(base, try); len(bad) > 0 {
				accepted[i] = false
				res.Problems = append(res.Problems, p.explain(g, bad)...)
				continue
			}
			out = try
		}
		if out, err = p.render(accepted); err != nil {
			return nil, err
		}
	}
	res.Source = out
	last := -1 // the tool index of the last change
	for i, g := range p.groups {
		if !accepted[i] {
			continue
		}
		if g.added {
			res.Changes = append(res.Changes, Change{Tool: g.tool, Added: true})
			res.Problems = append(res.Problems, g.problems...)
			last = -1
			continue
		}
		if last == g.toolIndex {
			c := &res.Changes[len(res.Changes)-1]
			c.Members = append(c.Members, g.member)
			continue
		}
		res.Changes = append(res.Changes, Change{Tool: g.tool, Members: []string{g.member}})
		last = g.toolIndex
	}
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
	doc    *playbook.Document
	reg    *registry.Registry
	groups []*group
}

// group is one edit pin decides on its own: one member of an embedded
// definition (replaced or added), or one added definition with the
// listing of its name in the requires block. Groups are kept or left out
// whole.
type group struct {
	tool      string
	toolIndex int    // in doc.Tools; -1 for an added definition
	member    string // "" for an added definition
	added     bool

	edit   *udiff.Edit  // a member's value replaced
	obj    *syntax.Node // a member added to this object ...
	text   string       // ... as this text (",\n  \"m\": v")
	def    string       // an added definition, formatted as an element of tools
	raw    []byte       // the added definition, compact
	listIn *syntax.Node // the array (toolNames, capabilities) to list the added name in; nil: none
	value  string       // the member's new value, for messages

	problems []string // about an added definition that is kept (a requires entry to create by hand)
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

// lowers reports, for the members that state a risk (riskClass,
// sideEffecting, requiresApproval), whether the registry's value v is
// less risky than the document's stated value cur, and why; pin never
// writes such a value. A riskClass outside the order cannot be compared,
// so it is not assumed lower or higher: the document's is kept.
func lowers(member string, t *playbook.Tool, v any) (string, bool) {
	switch member {
	case "riskClass":
		doc, reg := playbook.Str(t.RiskClass), v.(string)
		if t.RiskClass == nil {
			return "", false // not a string: the reader's to report; nothing stated
		}
		dr, rr := playbook.RiskRank(doc), playbook.RiskRank(reg)
		switch {
		case dr < 0 || rr < 0:
			return fmt.Sprintf("kept riskClass %q: the registry says %q, and the two cannot be ordered (read < internal < customer_comms < money); set it by hand", doc, reg), true
		case rr < dr:
			return fmt.Sprintf("kept riskClass %q: the registry says %q, which is lower (read < internal < customer_comms < money); pin never lowers a risk claim, lower it by hand if the tool really is less risky", doc, reg), true
		}
	case "sideEffecting":
		if b, ok := v.(*bool); ok && b != nil && !*b && t.SideEffecting != nil && t.SideEffecting.Value {
			return "kept sideEffecting true: the registry says false; pin never removes a side effect the document declares, change it by hand if the tool really changes nothing", true
		}
	case "requiresApproval":
		if b, ok := v.(*bool); ok && b != nil && !*b && t.RequiresApproval != nil && t.RequiresApproval.Value {
			return "kept requiresApproval true: the registry says false; pin never drops an approval the document requires, change it by hand if the playbook really needs none", true
		}
	}
	return "", false
}

// updateTool plans the edits of one embedded definition: each member that
// differs from what the registry says, and each the registry says but the
// document lacks, except a lower risk (see [lowers]).
func (p *planner) updateTool(i int, t *playbook.Tool, reg playbook.Definition, res *Result) {
	obj := t.Node
	present := map[string]bool{}
	for name, m := range obj.Members() {
		present[name] = true
		v, says := merged(name, reg)
		if !says {
			continue
		}
		newVal, err := encode(v)
		if err != nil || sameJSON(p.src[m.Offset:m.End], newVal) {
			continue
		}
		if note, ok := lowers(name, t, v); ok {
			res.Notes = append(res.Notes, fmt.Sprintf("tool %q: %s", t.Name.Value, note))
			continue
		}
		p.groups = append(p.groups, &group{
			tool: t.Name.Value, toolIndex: i, member: name, value: string(newVal),
			edit: &udiff.Edit{Start: int(m.Offset), End: int(m.End), New: p.format(newVal, p.lineIndent(m.NameOffset()))},
		})
	}
	for _, name := range playbook.ToolMembers {
		if present[name] {
			continue
		}
		v, says := merged(name, reg)
		if !says {
			if name != "inputSchema" && name != "outputSchema" {
				continue
			}
			// A required schema the registry states none of (an MCP
			// server that declares no outputSchema): {} says "any
			// value", which is what the registry knows.
			v = map[string]any{}
			res.Notes = append(res.Notes, anySchemaNote(t.Name.Value, name))
		}
		newVal, err := encode(v)
		if err != nil {
			continue
		}
		memberIndent := p.childIndent(obj)
		p.groups = append(p.groups, &group{
			tool: t.Name.Value, toolIndex: i, member: name, value: string(newVal),
			obj: obj, text: fmt.Sprintf(",\n%s%q: %s", memberIndent, name, p.format(newVal, memberIndent)),
		})
	}
}

// addMissing plans a definition for every allowedTools name the registry
// knows and the document does not embed, with the listing of MCP and
// connector tool names in their requires entry.
func (p *planner) addMissing(res *Result) {
	doc := p.doc
	toolsNode := doc.Root.Member("tools")
	if toolsNode == nil || toolsNode.Kind != syntax.Array {
		return
	}
	var missing []string
	for _, s := range doc.Steps {
		for _, a := range s.AllowedTools.Values() {
			if doc.ToolNamed(a) == nil && p.reg.Has(a) && !slices.Contains(missing, a) {
				missing = append(missing, a)
			}
		}
	}
	elemIndent := p.childIndent(toolsNode)
	for _, name := range missing {
		e, _ := p.reg.Lookup(name)
		def := e.Definition
		if def.Permissions == nil {
			def.Permissions = []string{}
		}
		v, err := json.Marshal(def)
		if err != nil {
			res.Problems = append(res.Problems, fmt.Sprintf("tool %q cannot be encoded: %v", name, err))
			continue
		}
		// As for a member of an embedded definition: a required schema
		// the registry states none of (an MCP tool without an
		// outputSchema) is written as {}, any value. The encoder leaves
		// an empty schema out, so it is added to the object here.
		for _, m := range []struct {
			name string
			val  jsontext.Value
		}{{"inputSchema", def.InputSchema}, {"outputSchema", def.OutputSchema}} {
			if empty := len(m.val) == 0 || m.val.Kind() == '{' && len(bytes.TrimSpace(m.val[1:len(m.val)-1])) == 0; empty {
				v = append(v[:len(v)-1], fmt.Sprintf(`,%q:{}}`, m.name)...)
				res.Notes = append(res.Notes, anySchemaNote(name, m.name))
			}
		}
		g := &group{tool: name, toolIndex: -1, added: true, def: p.format(v, elemIndent), raw: v}
		g.listIn, g.problems = p.listInRequires(def)
		p.groups = append(p.groups, g)
	}
}

// anySchemaNote says pin wrote {} for a required schema (member) of tool
// that the registry states none of.
func anySchemaNote(tool, member string) string {
	return fmt.Sprintf("tool %q: the registry states no %s; pin wrote {} (any value): narrow it if you know the shape", tool, member)
}

// listInRequires finds the array an added tool's name belongs in: its MCP
// server's toolNames or its connection's capabilities. It returns nil when
// the name is already listed there (it is never listed twice), or, with a
// problem, when the requires entry itself is missing.
func (p *planner) listInRequires(def playbook.Definition) (*syntax.Node, []string) {
	doc := p.doc
	if doc.Requires == nil {
		return nil, []string{fmt.Sprintf("tool %q was added but the document has no requires block to declare it in", def.Name)}
	}
	if server, _, ok := playbook.MCPParts(def.Name); ok {
		for _, s := range doc.Requires.MCPServers {
			if playbook.Str(s.Name) == server {
				switch {
				case s.ToolNames == nil || s.ToolNames.Node == nil || s.ToolNames.Node.Kind != syntax.Array:
					return nil, []string{fmt.Sprintf("add %q to requires.mcpServers[%q].toolNames by hand (the entry has no toolNames)", def.Name, server)}
				case s.ToolNames.Has(def.Name):
					return nil, nil
				}
				return s.ToolNames.Node, nil
			}
		}
		return nil, []string{fmt.Sprintf("tool %q was added; declare MCP server %q in requires.mcpServers by hand", def.Name, server)}
	}
	if def.Source == "connector" {
		for _, c := range doc.Requires.Connections {
			if playbook.Str(c.Provider) == def.ConnectorType {
				switch {
				case c.Capabilities == nil || c.Capabilities.Node == nil || c.Capabilities.Node.Kind != syntax.Array:
					return nil, []string{fmt.Sprintf("add %q to the %q connection's capabilities by hand (it has none)", def.Name, def.ConnectorType)}
				case c.Capabilities.Has(def.Name):
					return nil, nil
				}
				return c.Capabilities.Node, nil
			}
		}
		return nil, []string{fmt.Sprintf("tool %q was added; add a %q connection to requires.connections and manifest.requiredConnectors by hand", def.Name, def.ConnectorType)}
	}
	return nil, nil
}

// render applies the groups marked in keep to the source. All the text
// added to one container (members of one definition, definitions added to
// tools, names listed in one array) goes in as one edit, so that the
// separators between the pieces are right whatever the container holds.
func (p *planner) render(keep []bool) ([]byte, error) {
	var edits []udiff.Edit
	var objs []*syntax.Node
	objText := map[*syntax.Node][]string{}
	var arrs []*syntax.Node
	arrNames := map[*syntax.Node][]string{}
	var defs []string
	for i, g := range p.groups {
		if !keep[i] {
			continue
		}
		switch {
		case g.edit != nil:
			edits = append(edits, *g.edit)
		case g.obj != nil:
			if objText[g.obj] == nil {
				objs = append(objs, g.obj)
			}
			objText[g.obj] = append(objText[g.obj], g.text)
		case g.added:
			defs = append(defs, g.def)
			if g.listIn != nil {
				if arrNames[g.listIn] == nil {
					arrs = append(arrs, g.listIn)
				}
				arrNames[g.listIn] = append(arrNames[g.listIn], g.tool)
			}
		}
	}
	for _, o := range objs {
		edits = append(edits, p.insertBeforeClose(o, strings.Join(objText[o], "")))
	}
	if len(defs) > 0 {
		toolsNode := p.doc.Root.Member("tools")
		elemIndent := p.childIndent(toolsNode)
		var b strings.Builder
		for _, d := range defs {
			b.WriteString(",\n" + elemIndent + d)
		}
		edits = append(edits, p.insertBeforeClose(toolsNode, b.String()))
	}
	for _, a := range arrs {
		edits = append(edits, p.appendStrings(a, arrNames[a]))
	}
	out, err := udiff.Apply(string(p.src), edits)
	if err != nil {
		return nil, fmt.Errorf("pin: applying edits: %w", err)
	}
	return []byte(out), nil
}

// errorKeys returns the reader's and the validator's errors about src, as
// rule and pointer, counted.
func (p *planner) errorKeys(src []byte) map[string]int {
	d, ds := playbook.Read(p.doc.File, src, nil)
	ds = append(ds, validate.Document(d, &validate.Options{Registry: p.reg.Has})...)
	keys := map[string]int{}
	for _, x := range ds {
		if x.Severity == diag.Error {
			keys[x.Rule+"\x00"+x.Pointer]++
		}
	}
	return keys
}

// newErrors returns the errors about src that the document did not have
// (base, from [planner.errorKeys]).
func (p *planner) newErrors(base map[string]int, src []byte) []diag.Diagnostic {
	d, ds := playbook.Read(p.doc.File, src, nil)
	ds = append(ds, validate.Document(d, &validate.Options{Registry: p.reg.Has})...)
	diag.Sort(ds)
	seen := map[string]int{}
	var out []diag.Diagnostic
	for _, x := range ds {
		if x.Severity != diag.Error {
			continue
		}
		k := x.Rule + "\x00" + x.Pointer
		seen[k]++
		if seen[k] > base[k] {
			out = append(out, x)
		}
	}
	return out
}

// explain says what a person must fill for an edit pin left out, naming
// the tool and the member.
func (p *planner) explain(g *group, bad []diag.Diagnostic) []string {
	var out []string
	if g.added {
		for _, d := range bad {
			out = append(out, fmt.Sprintf("tool %q was not added: %s (%s); add its definition to tools by hand with %s filled:\n%s",
				g.tool, d.Message, d.Rule, memberOf(d), p.format(g.raw, "")))
		}
		out = append(out, g.problems...)
		return out
	}
	t := p.doc.Tools[g.toolIndex]
	ptr := fmt.Sprintf("/tools/%d", g.toolIndex)
	if g.member == "sideEffecting" && g.value == "true" && playbook.Str(t.RiskClass) == "read" {
		return []string{fmt.Sprintf("tool %q: sideEffecting was not pinned: the registry says true and states no riskClass, and the document says riskClass \"read\" (a read tool has no side effects); fill riskClass (%s/riskClass) by hand with \"internal\", \"customer_comms\" or \"money\", list its writes in dataScopeWrites, then pin again",
			g.tool, ptr)}
	}
	for _, d := range bad {
		out = append(out, fmt.Sprintf("tool %q: %s was not pinned to %s: %s (%s at %s); fill %s (%s/%s) by hand",
			g.tool, g.member, short(g.value), d.Message, d.Rule, d.Pointer, memberOf(d), ptr, memberOf(d)))
	}
	return out
}

// memberOf names the definition member a validator error asks a person to
// fill.
func memberOf(d diag.Diagnostic) string {
	switch d.Rule {
	case "side-effect-writes":
		return "dataScopeWrites"
	case "read-tool":
		return "riskClass"
	}
	parts := strings.Split(d.Pointer, "/")
	if len(parts) >= 4 && parts[1] == "tools" {
		return strings.NewReplacer("~1", "/", "~0", "~").Replace(parts[3])
	}
	if d.Pointer == "" {
		return "the document"
	}
	return d.Pointer
}

func short(v string) string {
	if len(v) > 60 {
		return v[:57] + "..."
	}
	return v
}

// appendStrings returns the edit that adds string elements at the end of
// array arr, on the same line as the last element when the array is on
// one line.
func (p *planner) appendStrings(arr *syntax.Node, names []string) udiff.Edit {
	qs := make([]string, len(names))
	for i, s := range names {
		q, _ := json.Marshal(s)
		qs[i] = string(q)
	}
	multi := bytes.ContainsRune(p.src[arr.Offset:arr.End], '\n')
	if arr.Len() == 0 {
		// Whatever lies between the brackets is whitespace: replace it.
		return udiff.Edit{Start: int(arr.Offset) + 1, End: int(arr.End) - 1, New: strings.Join(qs, ", ")}
	}
	last := arr.Child(arr.Len() - 1)
	sep := ", "
	if multi {
		sep = ",\n" + p.lineIndent(int(last.Offset))
	}
	return udiff.Edit{Start: int(last.End), End: int(last.End), New: sep + strings.Join(qs, sep)}
}

// insertBeforeClose returns the edit that inserts text after the last
// member or element of a container, before the whitespace that precedes
// its closing delimiter. text starts with a comma, dropped when the
// container is empty.
func (p *planner) insertBeforeClose(n *syntax.Node, text string) udiff.Edit {
	at := n.Offset + 1
	if n.Len() > 0 {
		at = n.Child(n.Len() - 1).End
	} else {
		text = strings.TrimPrefix(text, ",")
	}
	if n.Len() == 0 {
		text += "\n" + p.lineIndent(int(n.Offset))
		return udiff.Edit{Start: int(at), End: int(n.End) - 1, New: text}
	}
	return udiff.Edit{Start: int(at), End: int(at), New: text}
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
	if n.Len() > 0 {
		return p.lineIndent(n.Child(0).NameOffset()) // an element's is its Offset
	}
	return p.lineIndent(int(n.Offset)) + p.indent
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
