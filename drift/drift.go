// Package drift compares a document's embedded definition of a tool with
// the registry's definition of the same name, field by field (spec, "Tools
// & capabilities": "A runtime importing a document checks the embedded
// definitions against its own registry and flags drift").
//
// The levels follow docs/format.md, "Drift", and are listed rule by rule
// in docs/drift.md:
//
//   - [diag.Error]: the registry's tool is riskier than the document says
//     (a higher riskClass, a side effect, an approval the document leaves out, more
//     permissions or dataScopeWrites, an input schema that accepts less, an
//     output schema that may return what the document's does not accept),
//     or it is a different tool (source, connectorType, scope).
//   - [diag.Warning]: any other difference a reviewer should see: the
//     document overstates the risk, the description changed, a schema
//     changed in a way that breaks nothing.
//   - [diag.Info]: the registry does not state what the document claims
//     (an MCP server says nothing of riskClass), or a difference with no
//     effect ($schema).
//
// What the registry leaves unsaid is never guessed: a RiskClass of "", a
// nil SideEffecting, RequiresApproval, Permissions, DataScopeResources or
// DataScopeWrites, an empty Source, ConnectorType or Scope, and a nil
// schema mean the registry does not say (a live MCP server lists none of
// permissions, data scopes or approval). A non-nil empty list says "none".
// Only riskClass, sideEffecting and the schemas report an unconfirmable
// claim (info); the other unsaid members are not drift.
package drift

import (
	"fmt"
	"slices"
	"strings"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
)

// Finding is one difference between a document's definition of a tool and
// the registry's.
type Finding struct {
	// Rule is a stable id starting "drift-" (docs/drift.md lists them).
	Rule string
	// Severity is Error, Warning or Info.
	Severity diag.Severity
	// Field is the spec's member name the finding is about: "riskClass",
	// "inputSchema", ...
	Field string
	// Path is, for a schema finding, a JSON Pointer inside the document's
	// schema to the keyword concerned ("/properties/entities/items/required"),
	// after the document's own $refs; it may name a keyword the document's
	// schema lacks (the registry added it). For a harness schema it points
	// at the first difference. "" is the whole schema, and "" for findings
	// that are not about a schema.
	Path string
	// Message names the tool and the field and says what the document says
	// and what the registry says: lowercase, no trailing period.
	Message string
}

// String renders f as "severity: message [rule]".
func (f Finding) String() string {
	return fmt.Sprintf("%s: %s [%s]", f.Severity, f.Message, f.Rule)
}

// Compare compares doc, a document's embedded definition, with reg, the
// registry's definition of the tool of the same name, and returns the
// differences, nil if there are none. The order is deterministic: by
// member, in the order the spec lists them (name, source, description,
// permissions, inputSchema, outputSchema, harnessInputSchema,
// harnessOutputSchema, dataScopeResources, dataScopeWrites,
// requiresApproval, riskClass, sideEffecting, connectorType, scope), then
// within a schema depth first, properties by name.
//
// Compare never panics, whatever the definitions hold, and takes bounded
// time: schemas that are the same text up to whitespace are not parsed,
// and a schema comparison stops at depth 64, after 20,000 subschemas, a
// chain of 32 $refs or an anchor search of 10,000 values, with an error
// finding naming the limit and the place: a comparison cut short cannot
// prove the definitions equal, so it fails closed. It may be called from
// several goroutines at once.
func Compare(doc, reg playbook.Definition) []Finding {
	c := &comparer{tool: doc.Name}
	if c.tool == "" {
		c.tool = reg.Name
	}
	c.name(doc.Name, reg.Name)
	c.source(doc.Source, reg.Source)
	c.description(doc.Description, reg.Description)
	c.list("drift-permissions", "permissions", doc.Permissions, reg.Permissions, diag.Error)
	c.schema(inputField, doc.InputSchema, reg.InputSchema)
	c.schema(outputField, doc.OutputSchema, reg.OutputSchema)
	c.harness("harnessInputSchema", doc.HarnessInputSchema, reg.HarnessInputSchema)
	c.harness("harnessOutputSchema", doc.HarnessOutputSchema, reg.HarnessOutputSchema)
	c.list("drift-data-scope-resources", "dataScopeResources", doc.DataScopeResources, reg.DataScopeResources, diag.Warning)
	c.list("drift-data-scope-writes", "dataScopeWrites", doc.DataScopeWrites, reg.DataScopeWrites, diag.Error)
	c.requiresApproval(doc.RequiresApproval, reg.RequiresApproval)
	c.riskClass(doc.RiskClass, reg.RiskClass, doc.SideEffecting, reg.SideEffecting)
	c.sideEffecting(doc.SideEffecting, reg.SideEffecting)
	c.connectorType(doc.ConnectorType, reg.ConnectorType)
	c.scope(doc.Scope, reg.Scope)
	return c.out
}

type comparer struct {
	tool string
	out  []Finding
}

func (c *comparer) add(rule string, sev diag.Severity, field, format string, args ...any) {
	c.out = append(c.out, Finding{
		Rule:     rule,
		Severity: sev,
		Field:    field,
		Message:  fmt.Sprintf("tool %q: ", c.tool) + fmt.Sprintf(format, args...),
	})
}

// name: the caller pairs definitions by name; different names are a
// different tool.
func (c *comparer) name(doc, reg string) {
	if doc != reg {
		c.add("drift-name", diag.Error, "name", "the registry's definition is named %q; it is not the same tool", reg)
	}
}

func (c *comparer) source(doc, reg string) {
	if reg != "" && doc != reg {
		c.add("drift-source", diag.Error, "source", "source is %q in the registry, %s in the document; it is a different tool", reg, quoteOrAbsent(doc))
	}
}

func (c *comparer) description(doc, reg string) {
	if doc == reg {
		return
	}
	d, r := excerpts(doc, reg)
	c.add("drift-description", diag.Warning, "description", "the description changed: the registry says %q, the document says %q; a changed description can change what a model does with the tool", r, d)
}

// list compares a set-valued member. More in the registry is reported at
// more (Error for permissions and dataScopeWrites), fewer at Warning.
func (c *comparer) list(rule, field string, doc, reg []string, more diag.Severity) {
	if reg == nil || slices.Equal(doc, reg) {
		return // the registry does not say, or the very same list
	}
	extra, missing := setDiff(reg, doc), setDiff(doc, reg)
	if len(extra) > 0 {
		why := ""
		if more == diag.Error {
			why = "; the document understates what the tool does"
		}
		c.add(rule, more, field, "the registry lists %s the document does not: %s (registry %s, document %s)%s", field, quoteList(extra), quoteList(reg), quoteList(doc), why)
	}
	if len(missing) > 0 {
		c.add(rule, diag.Warning, field, "the document lists %s the registry does not: %s (registry %s, document %s); the document overstates", field, quoteList(missing), quoteList(reg), quoteList(doc))
	}
}

func (c *comparer) schema(f schemaField, doc, reg []byte) {
	if len(reg) == 0 {
		if len(doc) > 0 {
			c.add(f.rule, diag.Info, f.field, "the registry does not state %s; the document's cannot be confirmed", f.field)
		}
		return
	}
	c.out = append(c.out, compareSchemas(c.tool, f, doc, reg)...)
}

// harness compares harnessInputSchema or harnessOutputSchema: values of
// the harness's own, compared as JSON values; any difference is a warning.
func (c *comparer) harness(field string, doc, reg []byte) {
	if len(reg) == 0 || sameJSON(doc, reg) || sameValue(doc, reg) {
		return
	}
	var detail, path string
	dv, derr := parseSchema(doc)
	rv, rerr := parseSchema(reg)
	switch {
	case len(doc) == 0:
		detail = "the registry has one, the document has none"
	case derr != nil:
		detail = fmt.Sprintf("the document's is not readable JSON (%v)", derr)
	case rerr != nil:
		detail = fmt.Sprintf("the registry's is not readable JSON (%v)", rerr)
	case equal(dv, rv):
		return
	default:
		path = firstDifference(dv, rv, "", 0)
		at := ""
		if path != "" {
			at = fmt.Sprintf(" at %q", path)
		}
		detail = fmt.Sprintf("the values differ%s: %s in the registry, %s in the document", at, showAt(rv, path), showAt(dv, path))
	}
	c.out = append(c.out, Finding{
		Rule:     "drift-harness-schema",
		Severity: diag.Warning,
		Field:    field,
		Path:     path,
		Message:  fmt.Sprintf("tool %q: %s changed: %s", c.tool, field, detail),
	})
}

// firstDifference returns the JSON Pointer of the first place, in member
// name order, where a and b differ.
func firstDifference(a, b any, ptr string, depth int) string {
	if depth > maxDepth {
		return ptr
	}
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok {
			return ptr
		}
		for _, k := range unionKeys(a, b) {
			av, aok := a[k]
			bv, bok := b[k]
			if !aok || !bok {
				return ptr + "/" + escape(k)
			}
			if !equal(av, bv) {
				return firstDifference(av, bv, ptr+"/"+escape(k), depth+1)
			}
		}
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return ptr
		}
		for i := range a {
			if !equal(a[i], b[i]) {
				return firstDifference(a[i], b[i], fmt.Sprintf("%s/%d", ptr, i), depth+1)
			}
		}
	}
	return ptr
}

// showAt renders the value at ptr, or "absent".
func showAt(v any, ptr string) string {
	t, ok := pointerGet(v, ptr)
	if !ok {
		return "absent"
	}
	return show(t, true)
}

// requiresApproval: a document that leaves out an approval the registry
// requires understates what the tool does (error); a document that asks
// for approval the registry does not require is stricter, and a run asks
// for it (the runtime asks when either says true), so it only overstates
// (warning). For MCP tools approval is the document's and the harness's
// policy, not the server's, so a registry that does not say (nil) is not
// drift.
func (c *comparer) requiresApproval(doc, reg *bool) {
	switch {
	case reg == nil:
	case !*reg && doc != nil && *doc:
		c.add("drift-requires-approval", diag.Warning, "requiresApproval", "requiresApproval is false in the registry, true in the document: the document overstates, and a run asks for approval as the document says")
	case *reg && (doc == nil || !*doc):
		c.add("drift-requires-approval", diag.Error, "requiresApproval", "requiresApproval is true in the registry, %s in the document: the registry requires approval the document does not plan for; the document understates what the tool does", boolOrAbsent(doc))
	}
}

func (c *comparer) riskClass(doc, reg string, docSE, regSE *bool) {
	const rule, field = "drift-risk-class", "riskClass"
	if doc == reg {
		return
	}
	dr, rr := playbook.RiskRank(doc), playbook.RiskRank(reg)
	switch {
	case reg == "":
		if regSE != nil && *regSE && doc == "read" {
			c.add(rule, diag.Error, field, "riskClass is %q in the document, but the registry marks the tool side-effecting (sideEffecting true) and does not state a riskClass; a side-effecting tool is not a read tool, so the document understates what it does", doc)
			return
		}
		c.add(rule, diag.Info, field, "the registry does not state riskClass; the document's claim %q cannot be confirmed", doc)
	case doc == "":
		c.add(rule, diag.Warning, field, "riskClass is %q in the registry, absent in the document", reg)
	case dr < 0 || rr < 0:
		c.add(rule, diag.Error, field, "riskClass is %q in the registry, %q in the document, and the two cannot be ordered (read < internal < customer_comms < money)", reg, doc)
	case rr > dr:
		c.add(rule, diag.Error, field, "riskClass is %q in the registry, %q in the document: the tool is riskier than the document says (read < internal < customer_comms < money)", reg, doc)
	default:
		c.add(rule, diag.Warning, field, "riskClass is %q in the registry, %q in the document: the document overstates the risk (read < internal < customer_comms < money)", reg, doc)
	}
}

// sideEffecting: a document that does not say, for a tool the registry
// says is side-effecting, hides a side effect (the spec: "write tools
// declare their side effects").
func (c *comparer) sideEffecting(doc, reg *bool) {
	const rule, field = "drift-side-effecting", "sideEffecting"
	switch {
	case reg == nil:
		if doc != nil {
			c.add(rule, diag.Info, field, "the registry does not state sideEffecting; the document's claim %t cannot be confirmed", *doc)
		}
	case *reg && (doc == nil || !*doc):
		c.add(rule, diag.Error, field, "sideEffecting is true in the registry, %s in the document: the document hides a side effect", boolOrAbsent(doc))
	case !*reg && doc != nil && *doc:
		c.add(rule, diag.Warning, field, "sideEffecting is false in the registry, true in the document: the document overstates")
	}
}

func (c *comparer) connectorType(doc, reg string) {
	if reg != "" && doc != reg {
		c.add("drift-connector-type", diag.Error, "connectorType", "connectorType is %q in the registry, %s in the document; it is a different tool", reg, quoteOrAbsent(doc))
	}
}

func (c *comparer) scope(doc, reg string) {
	switch {
	case reg == "" || doc == reg:
	case doc == "":
		c.add("drift-scope", diag.Warning, "scope", "scope is %q in the registry, absent in the document", reg)
	default:
		c.add("drift-scope", diag.Error, "scope", "scope is %q in the registry, %q in the document; it is a different tool", reg, doc)
	}
}

// setDiff returns the members of a not in b, in a's order, once each.
func setDiff(a, b []string) []string {
	var out []string
	if len(a)+len(b) <= 32 {
		for i, s := range a {
			if !slices.Contains(b, s) && !slices.Contains(a[:i], s) {
				out = append(out, s)
			}
		}
		return out
	}
	skip := make(map[string]bool, len(a)+len(b))
	for _, s := range b {
		skip[s] = true
	}
	for _, s := range a {
		if !skip[s] {
			skip[s] = true
			out = append(out, s)
		}
	}
	return out
}

func quoteList(l []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range l {
		if i == 20 {
			fmt.Fprintf(&b, ", and %d more", len(l)-20)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", s)
	}
	b.WriteByte(']')
	return b.String()
}

func quoteOrAbsent(s string) string {
	if s == "" {
		return "absent"
	}
	return fmt.Sprintf("%q", s)
}

func boolOrAbsent(b *bool) string {
	if b == nil {
		return "absent"
	}
	return fmt.Sprint(*b)
}
