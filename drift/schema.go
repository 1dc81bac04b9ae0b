package drift

import (
	"bytes"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/diag"
)

// Limits of the schema comparison. Past them it stops, so any input
// finishes in bounded time, and reports an error (a [capped] change): a
// comparison cut short cannot prove the two schemas equal, so it fails
// closed, saying which limit and where.
const (
	// maxDepth bounds how deep the comparison descends (each subschema and
	// each $ref followed is one level).
	maxDepth = 64
	// maxSteps bounds how many pairs of subschemas one comparison visits.
	maxSteps = 20000
	// maxRefHops bounds a chain of $refs that point at $refs.
	maxRefHops = 32
	// maxAnchorVisits bounds the values visited to find a "#name" anchor.
	maxAnchorVisits = 10000
	// maxFindings bounds the findings listed for one schema; the rest are
	// summed up in one last finding at their highest severity.
	maxFindings = 100
)

// change classifies one difference between the document's schema and the
// registry's. A finding's severity follows from its change and from whether
// the schema describes what the tool accepts (input) or what it returns
// (output); see [severityOf].
type change uint8

const (
	// narrows: the registry's schema accepts less than the document's (a new
	// required property, a narrower type or enum, a tighter bound).
	narrows change = 1 << iota
	// widens: the registry's schema accepts more than the document's.
	widens
	// differs: a change that neither narrows nor widens what is accepted,
	// but that a reader or a model sees (a description, a format, a new
	// optional property).
	differs
	// cosmetic: no effect on what is accepted or shown ($schema, $id,
	// $comment).
	cosmetic
	// opaque: the two schemas cannot be compared here (a remote $ref,
	// unreadable JSON, a $ref that loops).
	opaque
	// capped: the comparison stopped at one of its limits (maxDepth,
	// maxSteps, maxRefHops, maxAnchorVisits); what lies past it was not
	// compared, so nothing proves the schemas equal. Always an error.
	capped
)

// severityOf maps a change to a severity. For an input schema the registry
// accepting less is an error (the document's calls may be refused); for an
// output schema the registry returning more is an error (the document's
// steps may get values its schema does not allow). A change both ways is
// an error either way.
func severityOf(c change, output bool) diag.Severity {
	if c&capped != 0 {
		return diag.Error
	}
	sev := diag.Info
	if c&(differs|opaque) != 0 {
		sev = diag.Warning
	}
	breaking, safe := narrows, widens
	if output {
		breaking, safe = widens, narrows
	}
	if c&safe != 0 {
		sev = max(sev, diag.Warning)
	}
	if c&breaking != 0 {
		sev = diag.Error
	}
	return sev
}

// schemaField names one schema member of a definition.
type schemaField struct {
	field  string // "inputSchema", "outputSchema"
	rule   string // "drift-input-schema", "drift-output-schema"
	output bool   // what the tool returns, not what it accepts
}

var (
	inputField  = schemaField{"inputSchema", "drift-input-schema", false}
	outputField = schemaField{"outputSchema", "drift-output-schema", true}
)

// compareSchemas compares the document's JSON Schema doc with the
// registry's reg, both raw JSON (nil means absent, read as true: accepts
// anything), and returns the findings in a deterministic order: the
// keywords of a subschema in a fixed order, properties by name, depth
// first.
//
// Texts that differ only in insignificant whitespace, member order or
// number spelling (1, 1.0, 1e0) are equal without being parsed into trees
// ([sameJSON], [sameValue]). Otherwise both are parsed and compared as
// values.
func compareSchemas(tool string, f schemaField, doc, reg []byte) []Finding {
	if sameJSON(doc, reg) || sameValue(doc, reg) {
		return nil
	}
	s := &schemaDiff{tool: tool, f: f, steps: maxSteps}
	dv, derr := parseSchema(doc)
	rv, rerr := parseSchema(reg)
	switch {
	case derr != nil:
		s.add(opaque, "", "", fmt.Sprintf("the document's schema is not readable JSON (%v); it cannot be compared", derr))
	case rerr != nil:
		s.add(opaque, "", "", fmt.Sprintf("the registry's schema is not readable JSON (%v); it cannot be compared", rerr))
	case equal(dv, rv):
		return nil // member order or number spelling only
	default:
		s.roots = [2]any{dv, rv}
		s.compare(dv, rv, "", "", 0)
	}
	return s.finish()
}

// parseSchema reads a schema; empty text is absent, read as true.
func parseSchema(raw []byte) (any, error) {
	if len(bytes.TrimLeft(raw, " \t\r\n")) == 0 {
		return true, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// sameJSON reports whether a and b are the same JSON text up to
// insignificant whitespace (outside strings). Both must be valid JSON for
// that to mean the same value; an invalid text is the reader's to report.
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	i, j := 0, 0
	inString, escaped := false, false
	for {
		if !inString {
			for i < len(a) && isSpace(a[i]) {
				i++
			}
			for j < len(b) && isSpace(b[j]) {
				j++
			}
		}
		if i == len(a) || j == len(b) {
			return i == len(a) && j == len(b)
		}
		c := a[i]
		if c != b[j] {
			return false
		}
		i++
		j++
		switch {
		case !inString:
			inString = c == '"'
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			inString = false
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// schemaDiff is one comparison of two schemas.
type schemaDiff struct {
	tool  string
	f     schemaField
	roots [2]any // the document's and the registry's whole schema, for $ref

	// seen holds the pairs of subschemas already compared that were
	// reached through a $ref on either side: a change behind a shared or
	// recursive $ref is reported once (at the first path that reaches it),
	// and recursive schemas terminate.
	seen  map[[2]uintptr]bool
	steps int // left before the comparison stops (maxSteps)

	out       []Finding
	hidden    int
	hiddenSev diag.Severity
	deep      bool // the depth limit was reported
}

func (s *schemaDiff) add(c change, ptr, prop, detail string) {
	sev := severityOf(c, s.f.output)
	if len(s.out) >= maxFindings && c&capped == 0 { // a limit is always listed
		s.hidden++
		s.hiddenSev = max(s.hiddenSev, sev)
		return
	}
	where := ""
	if prop != "" {
		where = fmt.Sprintf("property %q: ", prop)
	}
	s.out = append(s.out, Finding{
		Rule:     s.f.rule,
		Severity: sev,
		Field:    s.f.field,
		Path:     ptr,
		Message:  fmt.Sprintf("tool %q: %s: %s%s", s.tool, s.f.field, where, detail),
	})
}

func (s *schemaDiff) finish() []Finding {
	if s.hidden > 0 {
		s.out = append(s.out, Finding{
			Rule:     s.f.rule,
			Severity: s.hiddenSev,
			Field:    s.f.field,
			Message:  fmt.Sprintf("tool %q: %s: %d more differences not listed (the worst is at %s level)", s.tool, s.f.field, s.hidden, s.hiddenSev),
		})
	}
	return s.out
}

// Sides of a comparison.
const (
	docSide = 0
	regSide = 1
)

// other names the other side: "registry" for "document".
func other(side string) string {
	if side == "document" {
		return "registry"
	}
	return "document"
}

// compare compares the document's subschema d with the registry's r. ptr
// is d's JSON Pointer in the document's schema (after the document's own
// $refs), prop the readable property path ("entities[].name").
func (s *schemaDiff) compare(d, r any, ptr, prop string, depth int) {
	if d == true && r == true {
		return // the common case of two absent subschemas (items, additionalProperties)
	}
	if s.steps <= 0 {
		return
	}
	s.steps--
	if s.steps == 0 {
		s.add(capped, ptr, prop, fmt.Sprintf("the comparison reached its limit of %d pairs of subschemas at %s and stopped; what lies past it was not compared, so the schemas cannot be proven equal", maxSteps, where(ptr)))
		return
	}
	if depth > maxDepth {
		if !s.deep {
			s.deep = true
			s.add(capped, ptr, prop, fmt.Sprintf("nested more than %d levels deep (the comparison's depth limit) at %s; not compared below here, so the schemas cannot be proven equal", maxDepth, where(ptr)))
		}
		return
	}

	d, dptr, dstuck, dfollowed, did, dcap := deref(s.roots[docSide], d, ptr)
	r, _, rstuck, rfollowed, rid, rcap := deref(s.roots[regSide], r, "")
	if dcap != "" || rcap != "" {
		side, why := "document", dcap
		if dcap == "" {
			side, why = "registry", rcap
		}
		s.add(capped, ptr+"/$ref", prop, fmt.Sprintf("the %s's schema %s at %s; not compared here, so the schemas cannot be proven equal", side, why, where(ptr+"/$ref")))
		return
	}
	ptr = dptr
	if dstuck != rstuck {
		var detail string
		switch {
		case dstuck == "":
			detail = fmt.Sprintf("the registry's schema refers to %q, %s; it cannot be compared", rstuck, refWhy(rstuck))
		case rstuck == "":
			detail = fmt.Sprintf("the document's schema refers to %q, %s; it cannot be compared", dstuck, refWhy(dstuck))
		default:
			detail = fmt.Sprintf("the document's schema refers to %q and the registry's to %q, references that are never fetched or not found; they cannot be compared", dstuck, rstuck)
		}
		s.add(opaque, ptr+"/$ref", prop, detail)
		return
	}
	// The same unresolvable reference on both sides names the same thing;
	// the rest of the two subschemas is still compared.

	if dfollowed || rfollowed {
		key := [2]uintptr{identity(did), identity(rid)}
		if s.seen[key] {
			return
		}
		if s.seen == nil {
			s.seen = map[[2]uintptr]bool{}
		}
		s.seen[key] = true
	}

	if b, ok := d.(bool); ok && b {
		d = map[string]any{}
	}
	if b, ok := r.(bool); ok && b {
		r = map[string]any{}
	}
	dm, dIsObj := d.(map[string]any)
	rm, rIsObj := r.(map[string]any)
	dFalse, rFalse := d == false, r == false
	switch {
	case dFalse && rFalse:
		return
	case dFalse:
		s.add(widens, ptr, prop, "the document's schema is false (it accepts nothing here); the registry's accepts values")
		return
	case rFalse:
		s.add(narrows, ptr, prop, "the registry's schema is false (it accepts nothing here); the document's accepts values")
		return
	case !dIsObj || !rIsObj:
		if !equal(d, r) {
			s.add(opaque, ptr, prop, fmt.Sprintf("not a schema (an object or a boolean): %s in the registry, %s in the document; it cannot be compared", show(r, true), show(d, true)))
		}
		return
	}

	if s.compareType(dm, rm, ptr, prop) {
		return // disjoint types: what the keywords below constrain is moot
	}
	s.compareAllowed(dm, rm, ptr, prop)
	s.compareBounds(dm, rm, ptr, prop)
	s.compareCounts(dm, rm, ptr, prop)
	s.compareMultipleOf(dm, rm, ptr, prop)
	s.compareUniqueItems(dm, rm, ptr, prop)
	s.compareProperties(dm, rm, ptr, prop, depth)
	s.compareItems(dm, rm, ptr, prop, depth)
	for _, kw := range [...]string{"allOf", "anyOf", "oneOf"} {
		s.compareBranches(kw, dm, rm, ptr, prop, depth)
	}
	s.compareOthers(dm, rm, ptr, prop)
}

// identity names a subschema for the seen set: a map by its address (the
// parsed tree is not mutated while compared), anything else by kind.
func identity(v any) uintptr {
	switch v := v.(type) {
	case map[string]any:
		return reflect.ValueOf(v).Pointer()
	case bool:
		if v {
			return 1
		}
		return 2
	}
	return 3
}

// deref follows local $refs from v within root. It returns the subschema to
// compare (the target, with the referring object's other keywords laid over
// it, as draft 2019-09 and later apply both), its pointer, and, when the
// chain ends in a reference that cannot be followed (remote, missing,
// looping), that reference. followed reports whether any $ref was
// followed; id is a node of the parsed tree that determines out (out
// itself, unless keywords were laid over a target). limit, when not "",
// says which limit stopped the chain (maxRefHops, maxAnchorVisits): the
// reference may well resolve, so the caller must not treat it as a
// reference that cannot be followed.
func deref(root, v any, ptr string) (out any, outPtr, stuck string, followed bool, id any, limit string) {
	var visited []string
	for hop := 0; ; hop++ {
		m, ok := v.(map[string]any)
		if !ok {
			break
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			break
		}
		target, tptr, res := resolveLocal(root, ref)
		switch res {
		case refCapped:
			return v, ptr, ref, followed, v, fmt.Sprintf("refers to %q, and finding that anchor would visit more than %d values (the anchor search limit)", ref, maxAnchorVisits)
		case refMissing:
			return v, ptr, ref, followed, v, ""
		}
		if slices.Contains(visited, tptr) {
			return v, ptr, ref, followed, v, "" // a loop: it never resolves
		}
		if hop == maxRefHops {
			return v, ptr, ref, followed, v, fmt.Sprintf("has a chain of more than %d $refs (the $ref chain limit), ending in %q", maxRefHops, ref)
		}
		visited = append(visited, tptr)
		followed = true
		if hasSiblings(m) {
			if id == nil {
				id = m
			}
			target = overlay(target, m)
		}
		v, ptr = target, tptr
	}
	if id == nil {
		id = v
	}
	return v, ptr, "", followed, id, ""
}

// where renders a JSON Pointer in the document's schema for a message.
func where(ptr string) string {
	if ptr == "" {
		return "the schema's root"
	}
	return fmt.Sprintf("%q", ptr)
}

// hasSiblings reports whether m has keywords beside $ref that matter when
// comparing: definitions and inert keywords ($schema, $id, ...) do not.
func hasSiblings(m map[string]any) bool {
	for k := range m {
		if k != "$ref" && k != "$defs" && k != "definitions" && !inert[k] {
			return true
		}
	}
	return false
}

// overlay lays the keywords of m other than $ref over target.
func overlay(target any, m map[string]any) any {
	merged := map[string]any{}
	switch t := target.(type) {
	case bool:
		if !t {
			return false // false and anything accepts nothing
		}
	case map[string]any:
		for k, v := range t {
			merged[k] = v
		}
	default:
		return target
	}
	for k, v := range m {
		if k != "$ref" {
			merged[k] = v
		}
	}
	return merged
}

// Outcomes of [resolveLocal].
const (
	refResolved = iota
	refMissing  // remote, or not in the schema
	refCapped   // the anchor search reached maxAnchorVisits
)

// resolveLocal resolves a reference within the schema itself: "#", a JSON
// Pointer fragment ("#/$defs/x", "#/definitions/x", percent-encoded or not)
// or a plain-name fragment ("#x", matched against $anchor or a draft-07
// "$id": "#x"). Anything else is remote and never fetched.
func resolveLocal(root any, ref string) (any, string, int) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, "", refMissing
	}
	if u, err := url.PathUnescape(frag); err == nil {
		frag = u
	}
	if frag == "" {
		return root, "", refResolved
	}
	if !strings.HasPrefix(frag, "/") {
		budget := maxAnchorVisits
		v, p, ok := findAnchor(root, frag, "", &budget)
		switch {
		case ok:
			return v, p, refResolved
		case budget < 0:
			return nil, "", refCapped
		}
		return nil, "", refMissing
	}
	v, ok := pointerGet(root, frag)
	if !ok {
		return nil, "", refMissing
	}
	return v, frag, refResolved
}

// pointerGet returns the value at the JSON Pointer ptr in v.
func pointerGet(v any, ptr string) (any, bool) {
	if ptr == "" {
		return v, true
	}
	if ptr[0] != '/' {
		return nil, false
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) || (len(tok) > 1 && tok[0] == '0') || tok[0] == '+' {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// findAnchor looks for the subschema named name by $anchor or by a
// draft-07 "$id": "#name", visiting at most *budget values.
func findAnchor(v any, name, ptr string, budget *int) (any, string, bool) {
	*budget--
	if *budget < 0 {
		return nil, "", false
	}
	switch c := v.(type) {
	case map[string]any:
		if a, _ := c["$anchor"].(string); a == name {
			return c, ptr, true
		}
		if id, _ := c["$id"].(string); id == "#"+name {
			return c, ptr, true
		}
		for _, k := range sortedKeys(c) {
			if r, p, ok := findAnchor(c[k], name, ptr+"/"+escape(k), budget); ok {
				return r, p, true
			}
		}
	case []any:
		for i, e := range c {
			if r, p, ok := findAnchor(e, name, ptr+"/"+strconv.Itoa(i), budget); ok {
				return r, p, true
			}
		}
	}
	return nil, "", false
}

func refWhy(ref string) string {
	if strings.HasPrefix(ref, "#") {
		return "a reference it does not define (or one that loops)"
	}
	return "a remote reference that is never fetched"
}

// Types, as bits; integer is a subset of number.
const (
	tArray uint8 = 1 << iota
	tBoolean
	tInteger
	tNull
	tNumber
	tObject
	tString
	tAll = tArray | tBoolean | tInteger | tNull | tNumber | tObject | tString
)

var typeNames = map[string]uint8{
	"array": tArray, "boolean": tBoolean, "integer": tInteger, "null": tNull,
	"number": tNumber, "object": tObject, "string": tString,
}

// typeSet reads m's "type"; ok is false if it is not a known type or list
// of types.
func typeSet(m map[string]any) (set uint8, ok bool) {
	v, has := m["type"]
	if !has {
		return tAll, true
	}
	switch t := v.(type) {
	case string:
		b := typeNames[t]
		return b, b != 0
	case []any:
		for _, e := range t {
			name, _ := e.(string)
			b := typeNames[name]
			if b == 0 {
				return 0, false
			}
			set |= b
		}
		return set, set != 0
	}
	return 0, false
}

// cover is the set of types whose values a type set accepts.
func cover(set uint8) uint8 {
	if set&tNumber != 0 {
		set |= tInteger
	}
	return set
}

// compareType compares "type" and reports whether the two type sets share
// no value at all (string against integer), in which case the keywords
// below are not compared.
func (s *schemaDiff) compareType(dm, rm map[string]any, ptr, prop string) (disjoint bool) {
	dt, dok := typeSet(dm)
	rt, rok := typeSet(rm)
	if !dok || !rok {
		s.keyword("type", narrows|widens, dm, rm, ptr, prop)
		return false
	}
	var c change
	if dt&^cover(rt) != 0 {
		c |= narrows
	}
	if rt&^cover(dt) != 0 {
		c |= widens
	}
	if c != 0 {
		s.add(c, ptr+"/type", prop, fmt.Sprintf("type is %s in the registry, %s in the document", showType(rm), showType(dm)))
	}
	return cover(dt)&cover(rt) == 0
}

func showType(m map[string]any) string {
	v, ok := m["type"]
	if !ok {
		return "absent (any type)"
	}
	return show(v, false)
}

// allowed reads m's const (as a one-value enum) or enum.
func allowed(m map[string]any) (vals []any, kw string, ok bool) {
	if c, has := m["const"]; has {
		return []any{c}, "const", true
	}
	if e, has := m["enum"].([]any); has {
		return e, "enum", true
	}
	return nil, "", false
}

func (s *schemaDiff) compareAllowed(dm, rm map[string]any, ptr, prop string) {
	if _, has := dm["enum"]; has {
		if _, arr := dm["enum"].([]any); !arr {
			s.keyword("enum", narrows|widens, dm, rm, ptr, prop)
			return
		}
	}
	if _, has := rm["enum"]; has {
		if _, arr := rm["enum"].([]any); !arr {
			s.keyword("enum", narrows|widens, dm, rm, ptr, prop)
			return
		}
	}
	dv, dkw, dok := allowed(dm)
	rv, rkw, rok := allowed(rm)
	switch {
	case !dok && !rok:
	case !dok:
		s.add(narrows, ptr+"/"+rkw, prop, fmt.Sprintf("the registry's schema allows only %s (%s); the document's has no enum or const", showList(rv), rkw))
	case !rok:
		s.add(widens, ptr+"/"+dkw, prop, fmt.Sprintf("the document's schema allows only %s (%s); the registry's has no enum or const", showList(dv), dkw))
	default:
		dset, rset := canonSet(dv), canonSet(rv)
		var removed, added []any
		for _, v := range dv {
			if !rset[canon(v)] {
				removed = append(removed, v)
			}
		}
		for _, v := range rv {
			if !dset[canon(v)] {
				added = append(added, v)
			}
		}
		if len(removed) > 0 {
			s.add(narrows, ptr+"/"+dkw, prop, fmt.Sprintf("the registry no longer allows %s (%s in the registry: %s; in the document: %s)", showList(removed), rkw, showList(rv), showList(dv)))
		}
		if len(added) > 0 {
			s.add(widens, ptr+"/"+dkw, prop, fmt.Sprintf("the registry also allows %s (%s in the registry: %s; in the document: %s)", showList(added), rkw, showList(rv), showList(dv)))
		}
	}
}

// bound is a lower or upper bound on numbers.
type bound struct {
	v    float64
	excl bool
	has  bool
}

func (b bound) show(lower bool) string {
	if !b.has {
		return "none"
	}
	op := map[[2]bool]string{{true, false}: ">=", {true, true}: ">", {false, false}: "<=", {false, true}: "<"}[[2]bool{lower, b.excl}]
	return op + " " + strconv.FormatFloat(b.v, 'g', -1, 64)
}

// boundOf reads the bound of m from kw ("minimum") and its exclusive form
// ("exclusiveMinimum": a number since draft 6, a boolean modifier in draft
// 4); the tighter one wins. ok is false if a value is not a number.
func boundOf(m map[string]any, kw, exclKw string, lower bool) (b bound, ok bool) {
	if x, has := m[kw]; has {
		f, isNum := x.(float64)
		if !isNum {
			return bound{}, false
		}
		b = bound{v: f, has: true}
	}
	tighter := func(x float64) bool {
		if lower {
			return x >= b.v
		}
		return x <= b.v
	}
	switch x := m[exclKw].(type) {
	case nil:
	case bool:
		if x && b.has {
			b.excl = true
		}
	case float64:
		if !b.has || tighter(x) {
			b = bound{v: x, excl: true, has: true}
		}
	default:
		return bound{}, false
	}
	return b, true
}

func (s *schemaDiff) compareBounds(dm, rm map[string]any, ptr, prop string) {
	for _, k := range [...]struct {
		kw, excl string
		lower    bool
	}{{"minimum", "exclusiveMinimum", true}, {"maximum", "exclusiveMaximum", false}} {
		db, dok := boundOf(dm, k.kw, k.excl, k.lower)
		rb, rok := boundOf(rm, k.kw, k.excl, k.lower)
		if !dok || !rok {
			s.keyword(k.kw, narrows|widens, dm, rm, ptr, prop)
			s.keyword(k.excl, narrows|widens, dm, rm, ptr, prop)
			continue
		}
		// Make the comparison about a lower bound: an upper bound is a
		// lower bound on the negated value.
		dl, rl := db, rb
		if !k.lower {
			dl.v, rl.v = -dl.v, -rl.v
		}
		var c change
		switch {
		case !dl.has && !rl.has:
		case !dl.has:
			c = narrows
		case !rl.has:
			c = widens
		case rl.v > dl.v || (rl.v == dl.v && rl.excl && !dl.excl):
			c = narrows
		case rl.v < dl.v || (rl.v == dl.v && dl.excl && !rl.excl):
			c = widens
		}
		if c == 0 {
			continue
		}
		kw := k.kw
		if _, has := dm[kw]; !has {
			if _, has := dm[k.excl]; has {
				kw = k.excl
			} else if _, has := rm[kw]; !has {
				kw = k.excl
			}
		}
		what := "lower"
		if !k.lower {
			what = "upper"
		}
		s.add(c, ptr+"/"+kw, prop, fmt.Sprintf("the %s bound is %s in the registry, %s in the document", what, rb.show(k.lower), db.show(k.lower)))
	}
}

func (s *schemaDiff) compareCounts(dm, rm map[string]any, ptr, prop string) {
	for _, kw := range [...]string{"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"} {
		dv, dhas := dm[kw]
		rv, rhas := rm[kw]
		if !dhas && !rhas {
			continue
		}
		isMin := strings.HasPrefix(kw, "min")
		num := func(v any, has bool) (float64, bool) {
			if !has {
				if isMin {
					return 0, true
				}
				return math.Inf(1), true
			}
			f, ok := v.(float64)
			return f, ok
		}
		df, dok := num(dv, dhas)
		rf, rok := num(rv, rhas)
		if !dok || !rok {
			s.keyword(kw, narrows|widens, dm, rm, ptr, prop)
			continue
		}
		var c change
		if isMin && rf > df || !isMin && rf < df {
			c = narrows
		} else if isMin && rf < df || !isMin && rf > df {
			c = widens
		}
		if c != 0 {
			s.add(c, ptr+"/"+kw, prop, fmt.Sprintf("%s is %s in the registry, %s in the document", kw, showMaybe(rv, rhas), showMaybe(dv, dhas)))
		}
	}
}

func (s *schemaDiff) compareMultipleOf(dm, rm map[string]any, ptr, prop string) {
	dv, dhas := dm["multipleOf"]
	rv, rhas := rm["multipleOf"]
	if !dhas && !rhas {
		return
	}
	df, dok := dv.(float64)
	rf, rok := rv.(float64)
	var c change
	switch {
	case (dhas && (!dok || df <= 0)) || (rhas && (!rok || rf <= 0)):
		s.keyword("multipleOf", narrows|widens, dm, rm, ptr, prop)
		return
	case !dhas:
		c = narrows
	case !rhas:
		c = widens
	case df == rf:
	case isWhole(rf / df):
		c = narrows // every multiple of rf is a multiple of df
	case isWhole(df / rf):
		c = widens
	default:
		c = narrows | widens
	}
	if c != 0 {
		s.add(c, ptr+"/multipleOf", prop, fmt.Sprintf("multipleOf is %s in the registry, %s in the document", showMaybe(rv, rhas), showMaybe(dv, dhas)))
	}
}

func isWhole(x float64) bool {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return false
	}
	r := math.Round(x)
	return r != 0 && math.Abs(x-r) <= 1e-9*math.Abs(x)
}

func (s *schemaDiff) compareUniqueItems(dm, rm map[string]any, ptr, prop string) {
	dv, dhas := dm["uniqueItems"]
	rv, rhas := rm["uniqueItems"]
	if !dhas && !rhas {
		return
	}
	db, dok := dv.(bool)
	rb, rok := rv.(bool)
	if (dhas && !dok) || (rhas && !rok) {
		s.keyword("uniqueItems", narrows|widens, dm, rm, ptr, prop)
		return
	}
	var c change
	if rb && !db {
		c = narrows
	} else if db && !rb {
		c = widens
	}
	if c != 0 {
		s.add(c, ptr+"/uniqueItems", prop, fmt.Sprintf("uniqueItems is %s in the registry, %s in the document", showMaybe(rv, rhas), showMaybe(dv, dhas)))
	}
}

// compareProperties compares properties, required, additionalProperties
// and patternProperties.
func (s *schemaDiff) compareProperties(dm, rm map[string]any, ptr, prop string, depth int) {
	dProps, dok := objectOrAbsent(dm, "properties")
	rProps, rok := objectOrAbsent(rm, "properties")
	if !dok || !rok {
		s.keyword("properties", narrows|widens, dm, rm, ptr, prop)
		return
	}
	dReq, dok := stringsOrAbsent(dm, "required")
	rReq, rok := stringsOrAbsent(rm, "required")
	if !dok || !rok {
		s.keyword("required", narrows|widens, dm, rm, ptr, prop)
		return
	}
	dAP, dHasAP := dm["additionalProperties"]
	rAP, rHasAP := rm["additionalProperties"]
	if !dHasAP {
		dAP = true
	}
	if !rHasAP {
		rAP = true
	}

	names := make([]string, 0, len(dProps)+len(rProps)+len(dReq)+len(rReq))
	for k := range dProps {
		names = append(names, k)
	}
	for k := range rProps {
		names = append(names, k)
	}
	for k := range dReq {
		names = append(names, k)
	}
	for k := range rReq {
		names = append(names, k)
	}
	slices.Sort(names)
	names = slices.Compact(names)

	for _, name := range names {
		dp, dIn := dProps[name]
		rp, rIn := rProps[name]
		child := childProp(prop, name)
		childPtr := ptr + "/properties/" + escape(name)
		var c change
		var reqBy, declBy, rejects string // "registry", "document"
		switch {
		case rReq[name] && !dReq[name]:
			c |= narrows
			reqBy = "registry"
		case dReq[name] && !rReq[name]:
			c |= widens
			reqBy = "document"
		}
		switch {
		case dIn && rIn:
			s.compare(dp, rp, childPtr, child, depth+1)
		case dIn:
			if _, schema := rAP.(map[string]any); schema {
				s.compare(dp, rAP, childPtr, child, depth+1)
				break
			}
			declBy = "document"
			if rAP == false {
				c |= narrows
				rejects = ", whose schema rejects undeclared properties"
			} else {
				c |= widens
			}
		case rIn:
			if _, schema := dAP.(map[string]any); schema {
				s.compare(dAP, rp, childPtr, child, depth+1)
				break
			}
			declBy = "registry"
			if dAP == false {
				c |= widens
				rejects = ", whose schema rejects undeclared properties"
			} else {
				// A new optional property: the document's calls do not
				// send it, and an output the document's schema did not
				// constrain now is.
				c |= differs
			}
		}
		switch {
		case c == 0:
		case declBy == "":
			s.add(c, ptr+"/required", child, fmt.Sprintf("required by the %s, not by the %s", reqBy, other(reqBy)))
		case reqBy == "":
			s.add(c, childPtr, child, fmt.Sprintf("declared by the %s, not by the %s%s", declBy, other(declBy), rejects))
		case reqBy == declBy:
			s.add(c, childPtr, child, fmt.Sprintf("required and declared by the %s, not by the %s%s", declBy, other(declBy), rejects))
		default:
			s.add(c, childPtr, child, fmt.Sprintf("required by the %s, not by the %s; declared by the %s, not by the %s%s", reqBy, other(reqBy), declBy, other(declBy), rejects))
		}
	}

	// additionalProperties itself.
	db, dIsBool := dAP.(bool)
	rb, rIsBool := rAP.(bool)
	switch {
	case dIsBool && rIsBool:
		if db && !rb {
			s.add(narrows, ptr+"/additionalProperties", prop, "additionalProperties is false in the registry (undeclared properties are rejected); the document's schema accepts them")
		} else if !db && rb {
			s.add(widens, ptr+"/additionalProperties", prop, fmt.Sprintf("additionalProperties is %s in the registry (undeclared properties are accepted); false in the document", showMaybe(rm["additionalProperties"], rHasAP)))
		}
	default:
		s.compare(dAP, rAP, ptr+"/additionalProperties", childProp(prop, "*"), depth+1)
	}

	// patternProperties, pattern by pattern.
	dPat, dok := objectOrAbsent(dm, "patternProperties")
	rPat, rok := objectOrAbsent(rm, "patternProperties")
	if !dok || !rok {
		s.keyword("patternProperties", narrows|widens, dm, rm, ptr, prop)
		return
	}
	for _, pat := range unionKeys(dPat, rPat) {
		dp, dIn := dPat[pat]
		rp, rIn := rPat[pat]
		p := ptr + "/patternProperties/" + escape(pat)
		child := childProp(prop, "/"+pat+"/")
		switch {
		case dIn && rIn:
			s.compare(dp, rp, p, child, depth+1)
		case dIn:
			s.add(widens, p, child, fmt.Sprintf("the document's schema constrains properties matching %q; the registry's does not", pat))
		default:
			s.add(narrows, p, child, fmt.Sprintf("the registry's schema constrains properties matching %q; the document's does not", pat))
		}
	}
}

// compareItems compares what arrays hold: items, prefixItems (2020-12),
// and the draft-07 tuple form (items as an array, additionalItems), read as
// one model: a tuple of leading items and a schema for the rest.
func (s *schemaDiff) compareItems(dm, rm map[string]any, ptr, prop string, depth int) {
	dt, dtk, dr, drk, dok := itemsOf(dm)
	rt, _, rr, _, rok := itemsOf(rm)
	if !dok || !rok {
		for _, kw := range [...]string{"items", "prefixItems", "additionalItems"} {
			s.keyword(kw, narrows|widens, dm, rm, ptr, prop)
		}
		return
	}
	for i := range max(len(dt), len(rt)) {
		d, dp := dr, ptr+"/"+drk
		if i < len(dt) {
			d, dp = dt[i], ptr+"/"+dtk+"/"+strconv.Itoa(i)
		}
		r := rr
		if i < len(rt) {
			r = rt[i]
		}
		s.compare(d, r, dp, prop+"["+strconv.Itoa(i)+"]", depth+1)
	}
	s.compare(dr, rr, ptr+"/"+drk, prop+"[]", depth+1)
}

// itemsOf returns m's tuple (and its keyword) and the schema for the items
// after it (and its keyword; true when absent). ok is false on a malformed
// value.
func itemsOf(m map[string]any) (tuple []any, tupleKw string, rest any, restKw string, ok bool) {
	rest, restKw = true, "items"
	if p, has := m["prefixItems"]; has {
		t, isArr := p.([]any)
		if !isArr {
			return nil, "", nil, "", false
		}
		tuple, tupleKw = t, "prefixItems"
		if it, has := m["items"]; has {
			if _, isArr := it.([]any); isArr {
				return nil, "", nil, "", false
			}
			rest = it
		}
		return tuple, tupleKw, rest, restKw, validSchema(rest)
	}
	switch it := m["items"].(type) {
	case nil:
		if _, has := m["items"]; has {
			return nil, "", nil, "", false
		}
	case []any:
		tuple, tupleKw = it, "items"
		restKw = "additionalItems"
		if a, has := m["additionalItems"]; has {
			rest = a
		}
	default:
		rest = it
	}
	return tuple, tupleKw, rest, restKw, validSchema(rest)
}

func validSchema(v any) bool {
	switch v.(type) {
	case bool, map[string]any:
		return true
	}
	return false
}

// compareBranches compares allOf, anyOf or oneOf. Lists of the same length
// are compared branch by branch; otherwise branches are matched by value,
// and each branch only one side has is reported.
func (s *schemaDiff) compareBranches(kw string, dm, rm map[string]any, ptr, prop string, depth int) {
	dv, dhas := dm[kw]
	rv, rhas := rm[kw]
	if !dhas && !rhas {
		return
	}
	dl, dok := dv.([]any)
	rl, rok := rv.([]any)
	if (dhas && !dok) || (rhas && !rok) {
		s.keyword(kw, narrows|widens, dm, rm, ptr, prop)
		return
	}
	// A branch more in allOf narrows; a branch more in anyOf or oneOf
	// widens (oneOf's exclusivity aside).
	more, fewer := widens, narrows
	if kw == "allOf" {
		more, fewer = narrows, widens
	}
	switch {
	case !dhas:
		s.add(narrows, ptr+"/"+kw, prop, fmt.Sprintf("the registry's schema adds %s with %d branches; the document's has none", kw, len(rl)))
	case !rhas:
		s.add(widens, ptr+"/"+kw, prop, fmt.Sprintf("the document's schema has %s with %d branches; the registry's has none", kw, len(dl)))
	case len(dl) == len(rl):
		for i := range dl {
			s.compare(dl[i], rl[i], ptr+"/"+kw+"/"+strconv.Itoa(i), prop, depth+1)
		}
	default:
		dset, rset := canonSet(dl), canonSet(rl)
		for i, b := range dl {
			if !rset[canon(b)] {
				s.add(fewer, ptr+"/"+kw+"/"+strconv.Itoa(i), prop, fmt.Sprintf("%s branch %d of the document's schema is not in the registry's (%d branches in the registry, %d in the document)", kw, i, len(rl), len(dl)))
			}
		}
		for i, b := range rl {
			if !dset[canon(b)] {
				s.add(more, ptr+"/"+kw, prop, fmt.Sprintf("%s branch %d of the registry's schema is not in the document's: %s", kw, i, show(b, true)))
			}
		}
	}
}

// handled are the keywords compared by their own meaning above; every
// other keyword is compared by value in compareOthers.
var handled = map[string]bool{
	"$ref": true, "type": true, "enum": true, "const": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	"minLength": true, "maxLength": true, "minItems": true, "maxItems": true, "minProperties": true, "maxProperties": true,
	"uniqueItems": true, "properties": true, "required": true, "additionalProperties": true, "patternProperties": true,
	"items": true, "prefixItems": true, "additionalItems": true, "allOf": true, "anyOf": true, "oneOf": true,
	// Definitions are compared where they are used, through $ref; draft-07
	// "definitions" and 2020-12 "$defs" are the same thing.
	"definitions": true, "$defs": true,
}

// constraining are validation keywords compared by value: adding one
// narrows, removing one widens, changing one does either.
var constraining = map[string]bool{
	"pattern": true, "not": true, "if": true, "then": true, "else": true,
	"dependencies": true, "dependentRequired": true, "dependentSchemas": true,
	"contains": true, "minContains": true, "maxContains": true, "propertyNames": true,
	"unevaluatedProperties": true, "unevaluatedItems": true, "$dynamicRef": true, "$recursiveRef": true,
}

// inert keywords change neither what is accepted nor what a reader or a
// model is shown.
var inert = map[string]bool{
	"$schema": true, "$id": true, "id": true, "$comment": true, "$anchor": true,
	"$dynamicAnchor": true, "$recursiveAnchor": true, "$vocabulary": true,
}

// compareOthers compares every keyword not handled above, by value.
// Annotations (description, title, default, examples, format, ...) and
// unknown keywords are "differs": they do not change what is accepted
// (format is an annotation by default in 2020-12) but they change what a
// model reads.
func (s *schemaDiff) compareOthers(dm, rm map[string]any, ptr, prop string) {
	for _, kw := range unionKeys(dm, rm) {
		if handled[kw] {
			continue
		}
		switch {
		case constraining[kw]:
			s.keyword(kw, narrows|widens, dm, rm, ptr, prop)
		case inert[kw]:
			s.keyword(kw, cosmetic, dm, rm, ptr, prop)
		default:
			s.keyword(kw, differs, dm, rm, ptr, prop)
		}
	}
}

// keyword compares kw by value. changed is the change when both sides have
// it; for narrows|widens, having it on one side only is a narrowing (the
// registry's) or a widening (the document's).
func (s *schemaDiff) keyword(kw string, changed change, dm, rm map[string]any, ptr, prop string) {
	dv, dhas := dm[kw]
	rv, rhas := rm[kw]
	if !dhas && !rhas || dhas && rhas && equal(dv, rv) {
		return
	}
	c := changed
	if changed == narrows|widens {
		if !dhas {
			c = narrows
		} else if !rhas {
			c = widens
		}
	}
	var detail string
	if ds, ok := dv.(string); ok {
		if rs, ok := rv.(string); ok {
			de, re := excerpts(ds, rs)
			detail = fmt.Sprintf("%q is %q in the registry, %q in the document", kw, re, de)
		}
	}
	if detail == "" {
		detail = fmt.Sprintf("%q is %s in the registry, %s in the document", kw, showMaybe(rv, rhas), showMaybe(dv, dhas))
	}
	if c == cosmetic {
		detail += " (no effect on the comparison)"
	}
	s.add(c, ptr+"/"+escape(kw), prop, detail)
}

// objectOrAbsent returns m[kw] as an object; ok is false if it is present
// and not an object.
func objectOrAbsent(m map[string]any, kw string) (map[string]any, bool) {
	v, has := m[kw]
	if !has {
		return nil, true
	}
	o, ok := v.(map[string]any)
	return o, ok
}

// stringsOrAbsent returns m[kw] as a set of strings; ok is false if it is
// present and not an array of strings.
func stringsOrAbsent(m map[string]any, kw string) (map[string]bool, bool) {
	v, has := m[kw]
	if !has {
		return nil, true
	}
	a, ok := v.([]any)
	if !ok {
		return nil, false
	}
	set := make(map[string]bool, len(a))
	for _, e := range a {
		str, ok := e.(string)
		if !ok {
			return nil, false
		}
		set[str] = true
	}
	return set, true
}

func unionKeys(a, b map[string]any) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, dup := a[k]; !dup {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func sortedKeys(m map[string]any) []string { return unionKeys(m, nil) }

// childProp extends a readable property path: "entities" + "name" is
// "entities.name".
func childProp(prop, name string) string {
	if prop == "" {
		return name
	}
	return prop + "." + name
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escape escapes a member name as a JSON Pointer reference token.
func escape(name string) string { return pointerEscaper.Replace(name) }

// equal reports whether two parsed JSON values are equal: objects whatever
// their member order, numbers by value.
func equal(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !equal(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equal(a[i], b[i]) {
				return false
			}
		}
		return true
	case float64:
		b, ok := b.(float64)
		return ok && a == b
	case string:
		b, ok := b.(string)
		return ok && a == b
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	case nil:
		return b == nil
	}
	return false
}

// canon is the canonical JSON text of a parsed value: members sorted,
// numbers in their shortest form. Equal values have equal texts.
func canon(v any) string {
	var b strings.Builder
	writeCanon(&b, v)
	return b.String()
}

func writeCanon(b *strings.Builder, v any) {
	switch v := v.(type) {
	case map[string]any:
		b.WriteByte('{')
		for i, k := range sortedKeys(v) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(k))
			b.WriteByte(':')
			writeCanon(b, v[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanon(b, e)
		}
		b.WriteByte(']')
	case float64:
		b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	case string:
		b.WriteString(strconv.Quote(v))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	default:
		b.WriteString("null")
	}
}

func canonSet(vs []any) map[string]bool {
	set := make(map[string]bool, len(vs))
	for _, v := range vs {
		set[canon(v)] = true
	}
	return set
}

// show renders a value for a message, shortened past 60 bytes.
func show(v any, shorten bool) string {
	s := canon(v)
	if shorten && len(s) > 60 {
		cut := 57
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

func showMaybe(v any, has bool) string {
	if !has {
		return "absent"
	}
	return show(v, true)
}

// showList renders at most 10 values.
func showList(vs []any) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range vs {
		if i == 10 {
			fmt.Fprintf(&b, ", and %d more", len(vs)-10)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(show(v, true))
	}
	b.WriteByte(']')
	return b.String()
}

func isRuneStart(c byte) bool { return c&0xC0 != 0x80 }

// excerpts shortens two different strings to the part around their first
// difference, so a long description shows where it changed.
func excerpts(a, b string) (string, string) {
	const width, before = 80, 24
	if len(a) <= width && len(b) <= width {
		return a, b
	}
	k := 0
	for k < len(a) && k < len(b) && a[k] == b[k] {
		k++
	}
	start := max(0, k-before)
	// Start at a word when one starts shortly before.
	if sp := strings.LastIndexByte(a[:start], ' '); start > 0 && sp >= 0 && start-sp <= 16 {
		start = sp + 1
	}
	for start > 0 && ((start < len(a) && !isRuneStart(a[start])) || (start < len(b) && !isRuneStart(b[start]))) {
		start--
	}
	cut := func(s string) string {
		if start >= len(s) {
			return "..."
		}
		end := min(len(s), start+width)
		for end < len(s) && !isRuneStart(s[end]) {
			end--
		}
		out := s[start:end]
		if start > 0 {
			out = "..." + out
		}
		if end < len(s) {
			out += "..."
		}
		return out
	}
	return cut(a), cut(b)
}
