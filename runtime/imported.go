package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/internal/jsonnum"
	"github.com/openplaybook/openplaybook/internal/schemacycle"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
)

// Imported is a document made ready to run: each step's allow-list as an
// exact-match set, each embedded tool's compiled schemas and definition
// digest, and the registry entries the names resolve to. It is read-only
// after [Import] and safe for concurrent use.
type Imported struct {
	Doc *playbook.Document
	// Digest is the SHA-256 (hex) of the document's bytes.
	Digest string

	steps map[string]*stepInfo
	tools map[string]*toolInfo
	reg   *registry.Registry
	input *jsonschema.Schema // the document's inputSchema, nil when none
}

type stepInfo struct {
	step    *playbook.Step
	allowed map[string]bool // the step's allowedTools, byte-exact keys
	names   []string        // allowedTools in order, for messages
	list    string          // names joined, for refusal messages
	quoted  string          // the step's id, quoted
}

type toolInfo struct {
	def       playbook.Definition // as embedded
	defDigest string              // SHA-256 of the RFC 8785 form of def
	input     *jsonschema.Schema
	declared  []string // the top-level arguments input declares, sorted, for refusal messages
	noArgs    bool     // the input schema allows only {}
	output    *jsonschema.Schema
	entry     registry.Entry // the registry's definition at import
	resolved  bool
	approval  bool // requiresApproval: the document's or the registry's, whichever says true
	sideEff   bool // sideEffecting true, or not known to be false
	wire      string
	quoted    string // the tool's name, quoted
}

// Import prepares doc to run against reg. It assumes doc has passed
// validate and check without errors; what it cannot prepare (a schema that
// does not compile, tool names that collide on the LLM wire) is an error
// naming the tool.
func Import(doc *playbook.Document, reg *registry.Registry) (*Imported, error) {
	sum := sha256.Sum256(doc.Source)
	im := &Imported{Doc: doc, Digest: hex.EncodeToString(sum[:]), steps: map[string]*stepInfo{}, tools: map[string]*toolInfo{}, reg: reg}
	if doc.InputSchema != nil {
		n := doc.InputSchema
		s, err := compileSchema("inputSchema", jsontext.Value(doc.Source[n.Offset:n.End]), false)
		if err != nil {
			return nil, fmt.Errorf("the document's inputSchema: %w", err)
		}
		im.input = s
	}
	var names []string
	for _, t := range doc.Tools {
		if t.Name == nil {
			continue
		}
		def := t.Definition(doc.Source)
		ti := &toolInfo{def: def, defDigest: definitionDigest(def), quoted: quote(def.Name)}
		var err error
		if ti.input, err = compileSchema(def.Name+" inputSchema", def.InputSchema, true); err != nil {
			return nil, fmt.Errorf("tool %q: %w", def.Name, err)
		}
		ti.declared = declaredArgs(ti.input)
		switch objectShape(def.InputSchema) {
		case anyObject:
			// Check 3 already requires an object: nothing more to do.
			ti.input = nil
		case emptyObject:
			ti.noArgs = true
		}
		if ti.output, err = compileSchema(def.Name+" outputSchema", def.OutputSchema, false); err != nil {
			return nil, fmt.Errorf("tool %q: %w", def.Name, err)
		}
		ti.entry, ti.resolved = reg.Lookup(def.Name)
		ti.approval = isTrue(def.RequiresApproval) || ti.resolved && isTrue(ti.entry.Definition.RequiresApproval)
		ti.sideEff = def.SideEffecting == nil || *def.SideEffecting ||
			ti.resolved && (ti.entry.Definition.SideEffecting == nil || *ti.entry.Definition.SideEffecting)
		im.tools[def.Name] = ti
		names = append(names, def.Name)
	}
	wires, err := driver.WireNames(names)
	if err != nil {
		return nil, err
	}
	for n, w := range wires {
		im.tools[n].wire = w
	}
	for _, s := range doc.Steps {
		if s.ID == nil {
			continue
		}
		si := &stepInfo{step: s, allowed: map[string]bool{}, names: s.AllowedTools.Values(), quoted: quote(s.ID.Value)}
		si.list = strings.Join(si.names, ", ")
		for _, n := range si.names {
			si.allowed[n] = true
		}
		im.steps[s.ID.Value] = si
	}
	return im, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// definitionDigest is the SHA-256 (hex) of the RFC 8785 canonical JSON of
// a definition: an approval is bound to it, so a definition that changes
// after a person approved a call does not carry the approval over.
func definitionDigest(def playbook.Definition) string {
	b, err := json.Marshal(def)
	if err != nil {
		return ""
	}
	v := jsontext.Value(b)
	if err := v.Canonicalize(); err != nil {
		return ""
	}
	sum := sha256.Sum256(v)
	return hex.EncodeToString(sum[:])
}

// compileSchema compiles a JSON Schema (draft 2020-12 unless it names
// another) with a loader that refuses every URL: no reference is ever
// fetched. A nil schema compiles to nil (nothing to check).
//
// "format" is an assertion, not an annotation, for every format the
// library knows (email, date-time, date, time, duration, uri,
// uri-reference, uuid, ipv4, ipv6, hostname, json-pointer, regex, ...);
// unknown formats are ignored.
//
// When closed is true (a tool's inputSchema), a schema object whose top
// level has none of "additionalProperties", "unevaluatedProperties" and
// "patternProperties" refuses arguments it does not declare: it is
// compiled as {"$ref": ORIGINAL, "unevaluatedProperties": false}, with
// ORIGINAL a resource of its own so that its "#" references still mean
// itself. unevaluatedProperties (unlike additionalProperties added to a
// copy) counts the properties declared through a top-level "$ref",
// "allOf", "anyOf", "oneOf" or "if"/"then"/"else", so a schema that
// declares its arguments in "$defs" keeps them; a subschema that says
// "additionalProperties": true (or a schema) in place still allows
// extras explicitly.
//
// A schema whose in-place references loop ({"$ref": "#"}, two "$defs"
// referring to each other through "$ref" or "allOf" with nothing between
// them that moves into the value) is an error here, naming the pointers:
// the library compiles it and would refuse every call that reaches it.
func compileSchema(name string, raw jsontext.Value, closed bool) (*jsonschema.Schema, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if lit, bad := jsonnum.OutOfRange(raw); bad {
		return nil, fmt.Errorf("%s holds the number %s, which a 64-bit float does not hold exactly (a validator would ignore or change it)", name, clipLit(lit))
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s is not JSON: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	const url = "openplaybook:schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	top := url
	if obj, ok := doc.(map[string]any); ok && closed && opensNothing(obj) {
		top = closedURL
		if err := c.AddResource(closedURL, map[string]any{"$ref": url, "unevaluatedProperties": false}); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	s, err := c.Compile(top)
	if err != nil {
		return nil, fmt.Errorf("%s does not compile: %w", name, err)
	}
	if cyc := schemacycle.Find(s); cyc != nil {
		return nil, fmt.Errorf("%s has a reference cycle that makes validation loop without reading any part of the arguments: %s; move the reference under \"properties\" or \"items\", or remove it", name, renderCycle(cyc))
	}
	return s, nil
}

// closedURL is the wrapper that closes a tool's inputSchema.
const closedURL = "openplaybook:closed.json"

// opensNothing reports whether a schema object's top level says nothing
// about members beyond its "properties".
func opensNothing(obj map[string]any) bool {
	for _, k := range []string{"additionalProperties", "unevaluatedProperties", "patternProperties"} {
		if _, ok := obj[k]; ok {
			return false
		}
	}
	return true
}

// renderCycle shows a cycle as JSON Pointers (in URI fragment form) and
// the keywords between them: "#" $ref → "#/$defs/a" $ref → "#".
func renderCycle(cyc []schemacycle.Step) string {
	var b strings.Builder
	for i, st := range cyc {
		if i == 0 {
			b.WriteString(strconv.Quote("#" + schemacycle.Pointer(st.From)))
		}
		fmt.Fprintf(&b, " %s → %s", st.Keyword, strconv.Quote("#"+schemacycle.Pointer(st.To)))
	}
	return b.String()
}

type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("reference %s is not fetched: schemas must be self-contained", url)
}

// Decision is the outcome of the static part of the decision path
// ([Imported.Decide]): the checks that need no store.
type Decision struct {
	// Allowed is true when the call passed checks 1 to 3.
	Allowed bool
	// Reason says why it was refused, for the agent and the audit log.
	Reason string
	// Code is the refusal's stable code: CodeNotAllowed,
	// CodeUnknownStep, CodeUnresolved or CodeInvalidArguments.
	Code Code
	// Args is the arguments in RFC 8785 canonical form, and ArgsDigest
	// its SHA-256 (hex); for invalid JSON, the digest of the bytes as sent.
	Args       jsontext.Value
	ArgsDigest string
	tool       *toolInfo
	// reasoning is the call's Reasoning, for its approval request
	// ([Caller.agentText]); set by [Caller.Call], never by Decide, and no
	// part of the decision.
	reasoning string
}

// Decide runs checks 1 to 3 of the decision path for a call to name with
// args, in step: (1) name is on the step's allowedTools, compared byte for
// byte, with no trimming, folding or normalising; (2) it resolves in the
// registry to a definition; (3) args is a JSON object valid against the
// embedded inputSchema. The first check that fails decides. Decide does no
// I/O; approvals, execution and the output check follow in [Caller].
func (im *Imported) Decide(step, name string, args []byte) Decision {
	si := im.steps[step]
	if si == nil {
		return Decision{Code: CodeUnknownStep, Reason: fmt.Sprintf("step %s is not a step of this playbook", quote(step)), ArgsDigest: digest(args)}
	}
	if !si.allowed[name] {
		return Decision{Code: CodeNotAllowed, ArgsDigest: digest(args), Reason: fmt.Sprintf(
			"tool %s is not allowed in step %s: it is not on the step's allowedTools (%s); the call was refused and not run",
			quote(name), quote(step), si.list)}
	}
	ti := im.tools[name]
	if ti == nil {
		// check and run refuse such a document before it runs (rule
		// registry-resolve); an Imported built directly still says why.
		return Decision{Code: CodeUnresolved, ArgsDigest: digest(args), Reason: fmt.Sprintf(
			"tool %s in step %s has no embedded definition in the document's \"tools\"; the call was refused and not run", quote(name), quote(step))}
	}
	if !ti.resolved {
		return Decision{Code: CodeUnresolved, ArgsDigest: digest(args), Reason: fmt.Sprintf(
			"tool %s in step %s does not resolve in this runtime's registry; the call was refused and not run", quote(name), quote(step))}
	}
	d := Decision{tool: ti}
	// name is ti's, and step si's: their quoted forms are ready.
	if lit, bad := jsonnum.OutOfRange(args); bad {
		d.Code, d.ArgsDigest = CodeInvalidArguments, digest(args)
		d.Reason = fmt.Sprintf("the arguments to %s in step %s hold the number %s, which a 64-bit float does not hold exactly (it would be sent as another number); the call was refused and not run", ti.quoted, si.quoted, clipLit(lit))
		return d
	}
	canon := jsontext.Value(bytes.Clone(args))
	if len(bytes.TrimSpace(canon)) == 0 {
		canon = jsontext.Value("{}")
	}
	if err := canon.Canonicalize(); err != nil {
		d.Code, d.ArgsDigest = CodeInvalidArguments, digest(args)
		d.Reason = fmt.Sprintf("the arguments to %s in step %s are not valid JSON (%v); the call was refused and not run", ti.quoted, si.quoted, trimJSONErr(err))
		return d
	}
	d.Args, d.ArgsDigest = canon, digest(canon)
	if canon.Kind() != '{' {
		d.Code = CodeInvalidArguments
		d.Reason = "the arguments to " + ti.quoted + " in step " + si.quoted + " must be a JSON object; the call was refused and not run"
		return d
	}
	// {} is the one object {"type": "object"} allows: no schema work.
	if ti.input != nil && !(ti.noArgs && string(canon) == "{}") {
		v, err := decodeInstance(canon)
		if err == nil {
			err = ti.input.Validate(v)
		}
		if err != nil {
			d.Code = CodeInvalidArguments
			d.Reason = "the arguments to " + ti.quoted + " in step " + si.quoted + " do not match its inputSchema: " + argsErr(err, ti.declared) + "; the call was refused and not run"
			return d
		}
	}
	d.Allowed = true
	return d
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// quote renders a name as received, escaped so that control characters,
// look-alikes and invalid UTF-8 are visible: "customer\u2024get".
func quote(s string) string { return strconv.QuoteToASCII(s) }

func trimJSONErr(err error) string {
	return strings.TrimPrefix(err.Error(), "jsontext: ")
}

var english = message.NewPrinter(language.English)

// schemaErr renders a validation error on one line.
func schemaErr(err error) string {
	var ve *jsonschema.ValidationError
	if e, ok := err.(*jsonschema.ValidationError); ok {
		ve = e
	}
	if ve == nil {
		return err.Error()
	}
	var parts []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			parts = append(parts, "at /"+strings.Join(e.InstanceLocation, "/")+": "+kindString(e.ErrorKind))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(parts) > 5 {
		parts = append(parts[:5], fmt.Sprintf("and %d more", len(parts)-5))
	}
	return strings.Join(parts, "; ")
}

// kindString is k.LocalizedString(english), the same text, without the
// message printer for the kinds a refused call most often has (an enum, a
// pattern): the printer's Sprintf with only %s verbs and string arguments
// writes them as they are, and it was most of a refusal's cost
// (TestKindStringMatchesLibrary).
func kindString(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Enum:
		for _, item := range k.Want {
			switch item.(type) {
			case []any, map[string]any:
				return k.LocalizedString(english)
			}
		}
		if len(k.Want) == 1 {
			return "value must be " + libDisplay(k.Want[0])
		}
		var b strings.Builder
		b.WriteString("value must be one of ")
		for i, v := range k.Want {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(libDisplay(v))
		}
		return b.String()
	case *kind.Pattern:
		return libQuote(k.Got) + " does not match pattern " + libQuote(k.Want)
	}
	return k.LocalizedString(english)
}

// libQuote is the schema library's quote (package kind): Go's %q with
// \" unescaped and ' escaped, between single quotes.
func libQuote(s string) string {
	if plainASCII(s) {
		return "'" + s + "'" // what the rest gives for such a string
	}
	s = strconv.Quote(s)
	s = strings.ReplaceAll(s, `\"`, `"`)
	s = strings.ReplaceAll(s, `'`, `\'`)
	return "'" + s[1:len(s)-1] + "'"
}

// plainASCII reports whether s is printable ASCII without \, " or ':
// strconv.Quote only puts it in double quotes.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '\\' || c == '"' || c == '\'' {
			return false
		}
	}
	return true
}

// libDisplay is the schema library's display of a primitive value.
func libDisplay(v any) string {
	if s, ok := v.(string); ok {
		return libQuote(s)
	}
	return fmt.Sprintf("%v", v)
}

// argsErr renders a validation error of a call's arguments on one line,
// as [schemaErr] does, except that top-level arguments the schema does not
// declare (refused by the closed wrapper of [compileSchema], or by an
// explicit "additionalProperties": false) are named together first, with
// the arguments the schema does declare.
func argsErr(err error, declared []string) string {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return schemaErr(err)
	}
	var extra []string
	rest := *ve
	rest.Causes = nil
	var walk func(e *jsonschema.ValidationError) bool // reports whether e is only about undeclared arguments
	walk = func(e *jsonschema.ValidationError) bool {
		if len(e.Causes) == 0 {
			switch k := e.ErrorKind.(type) {
			case *kind.FalseSchema:
				if len(e.InstanceLocation) == 1 && e.SchemaURL == closedURL+"#/unevaluatedProperties" {
					extra = append(extra, e.InstanceLocation[0])
					return true
				}
			case *kind.AdditionalProperties:
				if len(e.InstanceLocation) == 0 {
					extra = append(extra, k.Properties...)
					return true
				}
			}
			return false
		}
		all := true
		for _, c := range e.Causes {
			if !walk(c) {
				all = false
			}
		}
		return all
	}
	var others []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		if !walk(c) {
			others = append(others, c)
		}
	}
	if len(ve.Causes) == 0 && !walk(ve) {
		return schemaErr(err)
	}
	if len(extra) == 0 {
		return schemaErr(err)
	}
	slices.Sort(extra)
	extra = slices.Compact(extra)
	q := make([]string, len(extra))
	for i, e := range extra {
		q[i] = quote(e)
	}
	msg := fmt.Sprintf("argument %s is not declared", q[0])
	if len(q) > 1 {
		msg = fmt.Sprintf("arguments %s are not declared", strings.Join(q, ", "))
	}
	if len(declared) == 0 {
		msg += " (the inputSchema declares no arguments)"
	} else {
		d := make([]string, len(declared))
		for i, n := range declared {
			d[i] = quote(n)
		}
		msg += fmt.Sprintf(" (the inputSchema declares %s)", strings.Join(d, ", "))
	}
	if len(others) > 0 {
		rest.Causes = others
		msg += "; " + schemaErr(&rest)
	}
	return msg
}

// declaredArgs returns the names of the top-level properties s declares,
// in its own "properties" or those of the schemas it applies in place
// ($ref, allOf, anyOf, oneOf, if, then, else), sorted.
func declaredArgs(s *jsonschema.Schema) []string {
	seen := map[*jsonschema.Schema]bool{}
	var names []string
	var walk func(s *jsonschema.Schema)
	walk = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		for n := range s.Properties {
			names = append(names, n)
		}
		walk(s.Ref)
		walk(s.RecursiveRef)
		if s.DynamicRef != nil {
			walk(s.DynamicRef.Ref)
		}
		for _, l := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, {s.If, s.Then, s.Else}} {
			for _, x := range l {
				walk(x)
			}
		}
	}
	walk(s)
	slices.Sort(names)
	return slices.Compact(names)
}

// NeedsApproval reports whether a call to the tool waits for a person's
// approval (requiresApproval true in the document or the registry).
func (im *Imported) NeedsApproval(name string) bool {
	ti := im.tools[name]
	return ti != nil && ti.approval
}

// clipLit shortens a long number literal for a message.
func clipLit(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Shapes of an input schema that need no validator.
const (
	otherShape  = iota
	anyObject   // {"type": "object", "additionalProperties": true}: any object
	emptyObject // {} or {"type": "object"}: only {} (undeclared arguments are refused)
)

// objectShape tells the input schemas Decide can check without the
// validator, whatever their spacing or $schema.
func objectShape(raw jsontext.Value) int {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return otherShape
	}
	delete(m, "$schema")
	if t, ok := m["type"]; ok {
		if t != "object" {
			return otherShape
		}
		delete(m, "type")
	}
	switch {
	case len(m) == 0:
		return emptyObject
	case len(m) == 1 && m["additionalProperties"] == true:
		return anyObject
	}
	return otherShape
}
