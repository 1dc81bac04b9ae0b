package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/internal/jsonnum"
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
}

type toolInfo struct {
	def       playbook.Definition // as embedded
	defDigest string              // SHA-256 of the RFC 8785 form of def
	input     *jsonschema.Schema
	output    *jsonschema.Schema
	entry     registry.Entry // the registry's definition at import
	resolved  bool
	approval  bool // requiresApproval: the document's or the registry's, whichever says true
	sideEff   bool // sideEffecting true, or not known to be false
	wire      string
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
		s, err := compileSchema("inputSchema", jsontext.Value(doc.Source[n.Offset:n.End]))
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
		ti := &toolInfo{def: def, defDigest: definitionDigest(def)}
		var err error
		if ti.input, err = compileSchema(def.Name+" inputSchema", def.InputSchema); err != nil {
			return nil, fmt.Errorf("tool %q: %w", def.Name, err)
		}
		if trivialObjectSchema(def.InputSchema) {
			// {} or {"type": "object"}: check 3 already requires an
			// object, so there is nothing more to validate per call.
			ti.input = nil
		}
		if ti.output, err = compileSchema(def.Name+" outputSchema", def.OutputSchema); err != nil {
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
		si := &stepInfo{step: s, allowed: map[string]bool{}, names: s.AllowedTools.Values()}
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
func compileSchema(name string, raw jsontext.Value) (*jsonschema.Schema, error) {
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
	const url = "openplaybook:schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("%s does not compile: %w", name, err)
	}
	return s, nil
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
}

// Decide runs checks 1 to 3 of the decision path for a call to name with
// args, in step: (1) name is on the step's allowedTools, compared byte for
// byte, with no trimming, folding or normalising; (2) it resolves in the
// registry to a definition; (3) args is a JSON object valid against the
// embedded inputSchema. The first check that fails decides. Decide does no
// I/O; approvals, execution and the output check follow in [Engine].
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
	if ti == nil || !ti.resolved {
		return Decision{Code: CodeUnresolved, ArgsDigest: digest(args), Reason: fmt.Sprintf(
			"tool %s in step %s does not resolve in this runtime's registry; the call was refused and not run", quote(name), quote(step))}
	}
	d := Decision{tool: ti}
	if lit, bad := jsonnum.OutOfRange(args); bad {
		d.Code, d.ArgsDigest = CodeInvalidArguments, digest(args)
		d.Reason = fmt.Sprintf("the arguments to %s in step %s hold the number %s, which a 64-bit float does not hold exactly (it would be sent as another number); the call was refused and not run", quote(name), quote(step), clipLit(lit))
		return d
	}
	canon := jsontext.Value(bytes.Clone(args))
	if len(bytes.TrimSpace(canon)) == 0 {
		canon = jsontext.Value("{}")
	}
	if err := canon.Canonicalize(); err != nil {
		d.Code, d.ArgsDigest = CodeInvalidArguments, digest(args)
		d.Reason = fmt.Sprintf("the arguments to %s in step %s are not valid JSON (%v); the call was refused and not run", quote(name), quote(step), trimJSONErr(err))
		return d
	}
	d.Args, d.ArgsDigest = canon, digest(canon)
	if canon.Kind() != '{' {
		d.Code = CodeInvalidArguments
		d.Reason = fmt.Sprintf("the arguments to %s in step %s must be a JSON object; the call was refused and not run", quote(name), quote(step))
		return d
	}
	if ti.input != nil {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(canon))
		if err == nil {
			err = ti.input.Validate(v)
		}
		if err != nil {
			d.Code = CodeInvalidArguments
			d.Reason = fmt.Sprintf("the arguments to %s in step %s do not match its inputSchema: %s; the call was refused and not run", quote(name), quote(step), schemaErr(err))
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
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			parts = append(parts, fmt.Sprintf("at %s: %s", loc, e.ErrorKind.LocalizedString(english)))
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

// trivialObjectSchema reports whether an input schema accepts every JSON
// object: {} or {"type": "object"}, whatever the spacing or $schema.
func trivialObjectSchema(raw jsontext.Value) bool {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return false
	}
	delete(m, "$schema")
	if t, ok := m["type"]; ok {
		if t != "object" {
			return false
		}
		delete(m, "type")
	}
	return len(m) == 0
}
