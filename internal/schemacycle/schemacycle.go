// Package schemacycle finds reference cycles in a compiled JSON Schema
// that make validation loop: a chain of in-place applicators ($ref,
// $dynamicRef, $recursiveRef, allOf, anyOf, oneOf, not, if, then, else,
// dependentSchemas) that leads from a schema back to itself without any
// keyword moving to a part of the instance (properties, items, ...).
//
// github.com/santhosh-tekuri/jsonschema/v6 compiles such a schema and
// only reports the cycle when an instance reaches it, so a schema that
// loops would fail its first call instead of its import. [Find] looks for
// it once, after compiling.
package schemacycle

import (
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Step is one edge of a cycle: the schema at From applies the schema at To
// to the same value through Keyword ("$ref", "allOf/0", "then", ...).
// From and To are the schemas' locations (URL#pointer) as the library
// gives them.
type Step struct {
	From, Keyword, To string
}

// Find returns the first cycle of in-place applicators reachable from s,
// or nil when there is none. The cycle's last step leads back to the
// schema its first step starts from.
func Find(s *jsonschema.Schema) []Step {
	f := finder{state: map[*jsonschema.Schema]int{}}
	f.reach(s)
	return f.cycle
}

type edge struct {
	kw string
	to *jsonschema.Schema
}

type finder struct {
	state map[*jsonschema.Schema]int // 0 unseen, 1 on the in-place path, 2 done
	path  []Step
	seen  map[*jsonschema.Schema]bool
	cycle []Step
}

// reach visits every schema reachable from s and checks the in-place
// graph from each of them.
func (f *finder) reach(root *jsonschema.Schema) {
	f.seen = map[*jsonschema.Schema]bool{}
	stack := []*jsonschema.Schema{root}
	for len(stack) > 0 && f.cycle == nil {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if s == nil || f.seen[s] {
			continue
		}
		f.seen[s] = true
		if f.state[s] == 0 {
			f.inPlace(s)
		}
		for _, e := range inPlace(s) {
			stack = append(stack, e.to)
		}
		stack = append(stack, children(s)...)
	}
}

// inPlace is a depth-first search over in-place edges that records the
// first cycle found.
func (f *finder) inPlace(s *jsonschema.Schema) {
	f.state[s] = 1
	for _, e := range inPlace(s) {
		if f.cycle != nil {
			return
		}
		f.path = append(f.path, Step{From: s.Location, Keyword: e.kw, To: e.to.Location})
		switch f.state[e.to] {
		case 0:
			f.inPlace(e.to)
		case 1:
			// The cycle is the part of the path from e.to onwards.
			i := slices.IndexFunc(f.path, func(st Step) bool { return st.From == e.to.Location })
			f.cycle = slices.Clone(f.path[max(i, 0):])
			return
		}
		f.path = f.path[:len(f.path)-1]
	}
	f.state[s] = 2
}

func add(es []edge, kw string, s *jsonschema.Schema) []edge {
	if s != nil && s.Bool == nil {
		es = append(es, edge{kw, s})
	}
	return es
}

func addAll(es []edge, kw string, ss []*jsonschema.Schema) []edge {
	for i, s := range ss {
		es = add(es, kw+"/"+itoa(i), s)
	}
	return es
}

func addMap[K comparable](es []edge, kw string, m map[K]*jsonschema.Schema, name func(K) string) []edge {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b K) int { return strings.Compare(name(a), name(b)) })
	for _, k := range keys {
		es = add(es, kw+"/"+name(k), m[k])
	}
	return es
}

// inPlace returns the subschemas s applies to the value s itself applies
// to, in keyword order.
func inPlace(s *jsonschema.Schema) []edge {
	var es []edge
	es = add(es, "$ref", s.Ref)
	es = add(es, "$recursiveRef", s.RecursiveRef)
	if s.DynamicRef != nil {
		es = add(es, "$dynamicRef", s.DynamicRef.Ref)
	}
	es = addAll(es, "allOf", s.AllOf)
	es = addAll(es, "anyOf", s.AnyOf)
	es = addAll(es, "oneOf", s.OneOf)
	es = add(es, "not", s.Not)
	es = add(es, "if", s.If)
	es = add(es, "then", s.Then)
	es = add(es, "else", s.Else)
	es = addMap(es, "dependentSchemas", s.DependentSchemas, func(k string) string { return k })
	deps := map[string]*jsonschema.Schema{}
	for k, v := range s.Dependencies {
		if d, ok := v.(*jsonschema.Schema); ok {
			deps[k] = d
		}
	}
	es = addMap(es, "dependencies", deps, func(k string) string { return k })
	return es
}

// children returns the subschemas s applies to parts of its value (and
// propertyNames, which applies to names): reaching them consumes input.
func children(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains,
		s.Items2020, s.UnevaluatedItems, s.ContentSchema}
	for _, p := range s.Properties {
		out = append(out, p)
	}
	for _, p := range s.PatternProperties {
		out = append(out, p)
	}
	for _, v := range []any{s.AdditionalProperties, s.AdditionalItems, s.Items} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			out = append(out, v)
		case []*jsonschema.Schema:
			out = append(out, v...)
		}
	}
	out = append(out, s.PrefixItems...)
	// Map order is random: visit in location order, so that of several
	// cycles the same one is found every time.
	slices.SortFunc(out, func(a, b *jsonschema.Schema) int {
		switch {
		case a == nil || b == nil:
			return boolCmp(a == nil, b == nil)
		}
		return strings.Compare(a.Location, b.Location)
	})
	return out
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// Pointer returns the JSON Pointer part of a schema location
// ("mem://x/schema.json#/$defs/a" gives "/$defs/a"; "" is the root).
func Pointer(location string) string {
	_, frag, _ := strings.Cut(location, "#")
	return frag
}
