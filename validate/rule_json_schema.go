package validate

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/internal/jsonnum"
	"github.com/openplaybook/openplaybook/internal/schemacycle"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/syntax"
)

// ruleJSONSchema compiles every embedded JSON Schema: the document's
// inputSchema and each tool's inputSchema and outputSchema
// (docs/format.md, "tools: embedded tool definitions": "Embedded JSON
// Schemas are compiled with draft 2020-12 unless their $schema names
// another draft (MCP servers commonly send draft-07). A $ref is resolved
// only inside the schema itself: remote and file references are never
// fetched, and are errors"; spec "Embedded tool definitions":
// inputSchema and outputSchema are objects).
//
// Schemas are compiled with github.com/santhosh-tekuri/jsonschema/v6, each
// on its own, by a compiler whose loader refuses every URL, so no
// reference ever reads a file or the network. Patterns must compile as
// Go (RE2) regular expressions, since that is what validates arguments at
// run time: lookaround and backreferences are reported.
//
// The rule also warns when a tool's inputSchema says its "type" is not
// "object": a tool's arguments are a JSON object (MCP requires "type":
// "object" for a tool's input schema).
type ruleJSONSchema struct{}

func (ruleJSONSchema) Name() string { return "json-schema" }
func (ruleJSONSchema) Description() string {
	return "embedded JSON Schemas compile (draft 2020-12 unless $schema says otherwise) without fetching any reference"
}

func (ruleJSONSchema) Check(c *Context) {
	d := c.Doc
	jobs := make([]schemaJob, 0, 1+2*len(d.Tools))
	_, anyBad := jsonnum.OutOfRange(d.Source) // one quick scan decides whether any schema needs a look
	add := func(j schemaJob) {
		// A number a float64 cannot hold is dropped silently by the
		// schema library (a "minimum" that no longer bounds anything):
		// refuse the schema instead, and do not compile it.
		if anyBad {
			if n := outOfRangeNumber(d.Source, j.n); n != nil {
				c.Errorf(n, "number %s in %q is not held exactly by a 64-bit float, so a JSON Schema validator would ignore or change it; use at most 15 significant digits, a magnitude below 1.7976931348623157e308, and not one that rounds to 0", n.Text(), j.member)
				return
			}
		}
		jobs = append(jobs, j)
	}
	if d.InputSchema != nil {
		add(schemaJob{n: d.InputSchema, member: "inputSchema"})
	}
	for _, t := range d.Tools {
		if t.InputSchema != nil {
			add(schemaJob{n: t.InputSchema, member: "inputSchema", tool: t})
		}
		if t.OutputSchema != nil {
			add(schemaJob{n: t.OutputSchema, member: "outputSchema", tool: t})
		}
	}
	compileAll(d.Source, jobs)
	for _, j := range jobs {
		if j.err == nil {
			continue
		}
		at, reason := explainSchemaError(j.n, *j.err)
		what := fmt.Sprintf("the document's %q", j.member)
		if j.tool != nil {
			what = fmt.Sprintf("%q of %s", j.member, toolLabel(j.tool))
		}
		if draft := schemaDraft(j.n); draft != "" {
			what += " (" + draft + ")"
		}
		c.diags = append(c.diags, c.Doc.At(int(at.Offset), credentialSafePointer(at), diag.Error, c.rule,
			"%s is not a valid JSON Schema: %s", what, reason))
	}
	for _, t := range d.Tools {
		if t.InputSchema != nil {
			warnNotObject(c, t, t.InputSchema)
		}
	}
}

// schemaJob is one schema to compile: member "inputSchema" or
// "outputSchema" of tool, or of the document when tool is nil. err points
// at the compile error, or is nil when it compiled.
type schemaJob struct {
	n      *syntax.Node
	member string
	tool   *playbook.Tool
	err    *error
}

// compileAll compiles the schemas of jobs and sets their err. Schemas
// written identically (large documents repeat them) are compiled once:
// the result depends only on the value, and explainSchemaError locates it
// in each copy (see [schemaDedup]). Distinct schemas are compiled in
// parallel, up to GOMAXPROCS at a time, each with its own compiler.
//
// A panic in a worker (a bug in the library) is not swallowed: it is
// raised again on the calling goroutine once the workers are done, where
// [Document] reports it as it reports any rule's panic, instead of
// crashing the process from a goroutine nothing watches.
func compileAll(src []byte, jobs []schemaJob) {
	dd := schemaDedup{src: src}
	slot := make([]*uniqueSchema, len(jobs))
	for i, j := range jobs {
		slot[i] = dd.add(j.n)
	}
	workers := min(runtime.GOMAXPROCS(0), len(dd.uniq))
	next := make(chan *uniqueSchema)
	var (
		wg       sync.WaitGroup
		panicked sync.Once
		panicVal any
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					panicked.Do(func() { panicVal = p })
					for range next { // let the feeder finish
					}
				}
			}()
			for u := range next {
				u.err = compileFunc(u.n.Value())
			}
		}()
	}
	for _, u := range dd.uniq {
		next <- u
	}
	close(next)
	wg.Wait()
	if panicVal != nil {
		panic(panicVal)
	}
	for i := range jobs {
		if slot[i].err != nil {
			jobs[i].err = &slot[i].err
		}
	}
}

// uniqueSchema is one distinct schema value and its compile error.
type uniqueSchema struct {
	n   *syntax.Node
	err error
}

// schemaDedup finds schemas written identically ([sameValue]) without
// hashing every one: schemas are first bucketed by kind, source length and
// member count, which costs nothing; a new schema is compared with the few
// distinct schemas of its bucket, and only a bucket that grows past
// dedupLinear distinct schemas is indexed by a full [nodeHash]. So each
// repeated schema costs one comparison, and a document of thousands of
// distinct schemas of one length stays linear.
type schemaDedup struct {
	src     []byte // the document's text: equal bytes are equal values
	uniq    []*uniqueSchema
	buckets map[schemaSig]*schemaBucket
}

const dedupLinear = 8

type schemaSig struct {
	kind          syntax.Kind
	span, members int
}

type schemaBucket struct {
	reps   []*uniqueSchema
	byHash map[uint64][]*uniqueSchema // nil until len(reps) > dedupLinear
}

// add returns the unique schema n is a copy of, adding n if it is new.
func (dd *schemaDedup) add(n *syntax.Node) *uniqueSchema {
	if dd.buckets == nil {
		dd.buckets = map[schemaSig]*schemaBucket{}
	}
	sig := schemaSig{n.Kind, int(n.End - n.Offset), memberCount(n)}
	b := dd.buckets[sig]
	if b == nil {
		b = &schemaBucket{}
		dd.buckets[sig] = b
	}
	var h uint64
	candidates := b.reps
	if b.byHash != nil {
		h = nodeHash(n)
		candidates = b.byHash[h]
	}
	for _, u := range candidates {
		if dd.sameBytes(u.n, n) || sameValue(u.n, n) {
			return u
		}
	}
	u := &uniqueSchema{n: n}
	dd.uniq = append(dd.uniq, u)
	b.reps = append(b.reps, u)
	switch {
	case b.byHash != nil:
		b.byHash[h] = append(b.byHash[h], u)
	case len(b.reps) > dedupLinear:
		b.byHash = map[uint64][]*uniqueSchema{}
		for _, r := range b.reps {
			rh := nodeHash(r.n)
			b.byHash[rh] = append(b.byHash[rh], r)
		}
	}
	return u
}

// schemaBase is the URL each schema is compiled under. It is never
// fetched: relative references resolve against it, and the loader
// refuses them like any other.
const (
	schemaDir  = "mem://openplaybook/"
	schemaBase = schemaDir + "schema.json"
)

// errNotFetched is what the loader answers to every URL.
var errNotFetched = errors.New("remote references are not fetched")

// refuseLoader is the compiler's only loader: it refuses every URL, so
// that compiling a schema never reads a file or the network. The JSON
// Schema meta-schemas are built into the library and need no loading.
type refuseLoader struct{}

func (refuseLoader) Load(string) (any, error) { return nil, errNotFetched }

// compileFunc is compileSchema; tests replace it.
var compileFunc = compileSchema

// compileSchema compiles v, a decoded JSON value, with a fresh compiler.
func compileSchema(v any) error {
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.UseLoader(refuseLoader{})
	if err := comp.AddResource(schemaBase, v); err != nil {
		return err
	}
	sch, err := comp.Compile(schemaBase)
	if err != nil {
		return err
	}
	if cyc := schemacycle.Find(sch); cyc != nil {
		return &cycleError{cyc}
	}
	return nil
}

// cycleError is a schema whose in-place references loop (see package
// internal/schemacycle): the library compiles it, but validating any value
// that reaches the cycle fails, so every call would be refused.
type cycleError struct{ steps []schemacycle.Step }

func (e *cycleError) Error() string { return "reference cycle" }

// drafts maps the $schema URLs the library knows (without "#", either
// scheme) to the draft names messages use.
var drafts = map[string]string{
	"json-schema.org/draft-04/schema":      "draft-04",
	"json-schema.org/draft-06/schema":      "draft-06",
	"json-schema.org/draft-07/schema":      "draft-07",
	"json-schema.org/draft/2019-09/schema": "draft 2019-09",
	"json-schema.org/draft/2020-12/schema": "draft 2020-12",
	"json-schema.org/schema":               "draft 2020-12",
}

const knownDrafts = "draft-04, draft-06, draft-07, 2019-09 and 2020-12"

// schemaDraft names the draft the schema at n is compiled with, or ""
// when its "$schema" names none the library knows.
func schemaDraft(n *syntax.Node) string {
	s := n.Member("$schema")
	if s == nil || s.Kind != syntax.String {
		return "draft 2020-12"
	}
	u := strings.TrimSuffix(s.Text(), "#")
	u = strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://")
	return drafts[u]
}

// explainSchemaError returns the node inside the schema root that err is
// about (root itself when it cannot tell) and a one-line reason.
func explainSchemaError(root *syntax.Node, err error) (*syntax.Node, string) {
	var (
		load     *jsonschema.LoadURLError
		sv       *jsonschema.SchemaValidationError
		notFound *jsonschema.JSONPointerNotFoundError
		anchor   *jsonschema.AnchorNotFoundError
	)
	var cyc *cycleError
	switch {
	case errors.As(err, &cyc):
		return explainCycle(root, cyc.steps)
	case errors.As(err, &load) && errors.Is(load.Err, errNotFetched):
		ref := refNode(root, load.URL)
		key, _ := ref.Key()
		if key == "$schema" {
			return ref, fmt.Sprintf("%q %s names no draft this runtime knows (%s), and meta-schemas are not fetched",
				"$schema", showValue(ref.Text()), knownDrafts)
		}
		if ref == root {
			return root, "a reference is outside the schema, and remote and file references are not fetched"
		}
		return ref, fmt.Sprintf("%q %s is outside the schema: remote and file references are not fetched; put the referenced schema in %q (draft-07: %q) and refer to it as %q",
			key, showValue(ref.Text()), "$defs", "definitions", "#/$defs/<name>")
	case errors.As(err, &sv):
		var ve *jsonschema.ValidationError
		if errors.As(sv.Err, &ve) {
			return explainMetaError(root, ve)
		}
	case errors.As(err, &notFound):
		if ref := refNode(root, notFound.URL); ref != root {
			key, _ := ref.Key()
			return ref, fmt.Sprintf("%q %s points at nothing in the schema", key, showValue(ref.Text()))
		}
	case errors.As(err, &anchor):
		if ref := refNode(root, anchor.Reference); ref != root {
			key, _ := ref.Key()
			return ref, fmt.Sprintf("%q %s names an anchor the schema does not define", key, showValue(ref.Text()))
		}
	}
	msg := strings.ReplaceAll(err.Error(), schemaBase, "")
	msg = strings.ReplaceAll(msg, schemaDir, "")
	if credentialIn(msg) != "" {
		msg = "the schema does not compile (the reason is not shown: it quotes something that looks like a credential)"
	}
	return root, oneLine(msg)
}

// explainCycle reports a reference cycle at the keyword of its first
// step ("$ref", "allOf/0", ...), naming every pointer on the way.
func explainCycle(root *syntax.Node, steps []schemacycle.Step) (*syntax.Node, string) {
	var b strings.Builder
	for i, st := range steps {
		if i == 0 {
			b.WriteString(strconv.Quote("#" + schemacycle.Pointer(st.From)))
		}
		fmt.Fprintf(&b, " %s → %s", st.Keyword, strconv.Quote("#"+schemacycle.Pointer(st.To)))
	}
	first := steps[0]
	tokens := pointerTokens(schemacycle.Pointer(first.From))
	tokens = append(tokens, strings.Split(first.Keyword, "/")...)
	return locate(root, tokens), fmt.Sprintf("the references %s loop without reading any part of the value, so validating it never ends; move a reference under %q or %q, or remove it",
		b.String(), "properties", "items")
}

// pointerTokens splits a JSON Pointer ("/$defs/a~1b") into its unescaped
// tokens.
func pointerTokens(p string) []string {
	if p == "" {
		return nil
	}
	toks := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks
}

// explainMetaError reports the deepest failure of a schema checked
// against its draft's meta-schema, at the schema value it is about. Of
// failures equally deep, the first in the source wins, so the choice does
// not depend on the library's map iteration order.
func explainMetaError(root *syntax.Node, ve *jsonschema.ValidationError) (*syntax.Node, string) {
	var leaf *jsonschema.ValidationError
	var at *syntax.Node
	var loc []string
	// Causes extend their parent's instance location, except below
	// propertyNames, whose causes are about the name alone ([]): so a
	// failure is placed at the deepest location on its path.
	var walk func(v *jsonschema.ValidationError, path []string)
	walk = func(v *jsonschema.ValidationError, path []string) {
		if len(v.InstanceLocation) >= len(path) {
			path = v.InstanceLocation
		}
		for _, c := range v.Causes {
			walk(c, path)
		}
		if len(v.Causes) > 0 {
			return
		}
		n := locate(root, path)
		if leaf == nil || len(path) > len(loc) || len(path) == len(loc) && n.Offset < at.Offset {
			leaf, at, loc = v, n, path
		}
	}
	walk(ve, nil)
	alone := *leaf
	alone.Causes = nil
	msg := alone.Error()
	if rest, ok := strings.CutPrefix(msg, "at '"); ok {
		if _, after, found := strings.Cut(rest, "': "); found {
			msg = after
		}
	}
	msg = oneLine(msg)
	if credentialIn(msg) != "" {
		msg = "the value is not valid here (not shown: it looks like a credential)"
	}
	if key, ok := at.Key(); ok && at != root && credentialIn(key) == "" {
		msg = fmt.Sprintf("%q: %s", key, msg)
	}
	if strings.Contains(msg, "is not valid regex") {
		msg += " (patterns are Go RE2 syntax: no lookaround or backreferences)"
	}
	return at, msg
}

// locate follows a JSON Pointer's tokens from root as far as they go.
func locate(root *syntax.Node, tokens []string) *syntax.Node {
	at := root
	for _, tok := range tokens {
		next := childNode(at, tok)
		if next == nil {
			break
		}
		at = next
	}
	return at
}

// childNode returns the member tok of an object or the element tok of an
// array, or nil.
func childNode(n *syntax.Node, tok string) *syntax.Node {
	switch n.Kind {
	case syntax.Object:
		return n.Member(tok)
	case syntax.Array:
		i, err := strconv.Atoi(tok)
		if err == nil && i >= 0 && i < n.Len() {
			return n.Child(i)
		}
	}
	return nil
}

// refNode finds the "$ref", "$dynamicRef", "$recursiveRef" or "$schema"
// string under root that resolved to url, or returns root.
func refNode(root *syntax.Node, url string) *syntax.Node {
	url = strings.TrimPrefix(url, schemaBase)
	urlNoFrag, _, _ := strings.Cut(url, "#")
	found := root
	syntax.Walk(root, func(n *syntax.Node) bool {
		if found != root {
			return false
		}
		key, ok := n.Key()
		if !ok || n.Kind != syntax.String {
			return true
		}
		switch key {
		case "$ref", "$dynamicRef", "$recursiveRef", "$schema":
		default:
			return true
		}
		ref := n.Text()
		refNoFrag, _, _ := strings.Cut(ref, "#")
		if ref == url || strings.HasSuffix(url, ref) ||
			refNoFrag != "" && (refNoFrag == urlNoFrag || strings.HasSuffix(urlNoFrag, refNoFrag)) {
			found = n
		}
		return true
	})
	return found
}

// showValue quotes a reference for a message, unless it looks like a
// credential (a URL with user info, say), which is never shown.
func showValue(s string) string {
	if credentialIn(s) != "" {
		return "(not shown: it looks like a credential)"
	}
	return strconv.Quote(s)
}

// oneLine joins the lines of a library message into one and bounds its
// length.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// warnNotObject warns when a tool's inputSchema declares a type other than
// "object".
func warnNotObject(c *Context, t *playbook.Tool, n *syntax.Node) {
	typ := n.Member("type")
	if typ == nil {
		return
	}
	switch typ.Kind {
	case syntax.String:
		if typ.Text() == "object" {
			return
		}
	case syntax.Array:
		for _, e := range typ.Elems() {
			if e.Kind == syntax.String && e.Text() == "object" {
				return
			}
		}
	default:
		return
	}
	c.Warnf(typ, "%q of %s does not describe an object; a tool's arguments are a JSON object (MCP requires %s), so make it %s and describe the arguments in %q",
		"inputSchema", toolLabel(t), `"type": "object"`, `"type": "object"`, "properties")
}

// outOfRangeNumber returns the first number below n that a float64 cannot
// hold (see package internal/jsonnum), or nil. src is the document's text:
// a quick scan of n's bytes decides whether the tree needs a walk.
func outOfRangeNumber(src []byte, n *syntax.Node) *syntax.Node {
	if n.End > n.Offset && int(n.End) <= len(src) {
		if _, bad := jsonnum.OutOfRange(src[n.Offset:n.End]); !bad {
			return nil
		}
	}
	var bad *syntax.Node
	syntax.Walk(n, func(x *syntax.Node) bool {
		if bad != nil {
			return false
		}
		if x.Kind == syntax.Number && jsonnum.Bad(x.Text()) {
			bad = x
		}
		return true
	})
	return bad
}

// sameBytes reports whether two values are spelled with the same bytes,
// which makes them the same value without walking them.
func (dd *schemaDedup) sameBytes(a, b *syntax.Node) bool {
	if dd.src == nil || int(a.End) > len(dd.src) || int(b.End) > len(dd.src) || a.End <= a.Offset {
		return false
	}
	return bytes.Equal(dd.src[a.Offset:a.End], dd.src[b.Offset:b.End])
}

// memberCount is the number of members of an object, 0 for anything else.
func memberCount(n *syntax.Node) int {
	if n.Kind != syntax.Object {
		return 0
	}
	return n.Len()
}
