package httpconn

import (
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// template is a compiled template (docs/connectors.md, "Templates"): it
// builds a value from an input value. eval returns ok false when the
// value is absent.
type template interface {
	eval(in any) (v any, ok bool, err error)
}

type (
	ptrT  []string // "$" or "$/json/pointer"
	litT  struct{ v any }
	orT   []template
	eachT struct{ src, m template }
	joinT struct {
		src template
		sep string
	}
	stringT struct{ src template }
	existsT struct{ src template }
	objT    struct {
		keys []string
		vals []template
	}
	arrT []template
)

// compile compiles the template text t; where names it in errors. A nil
// t compiles to nil.
func compile(t jsontext.Value, where string) (template, error) {
	if len(t) == 0 {
		return nil, nil
	}
	v, err := decode(t)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", where, err)
	}
	return compileValue(v, where)
}

func compileValue(v any, where string) (template, error) {
	switch v := v.(type) {
	case string:
		if v == "$" || strings.HasPrefix(v, "$/") {
			toks, err := splitPointer(v[1:])
			if err != nil {
				return nil, fmt.Errorf("%s: %v", where, err)
			}
			return ptrT(toks), nil
		}
		if strings.HasPrefix(v, "$") {
			return nil, fmt.Errorf("%s: %q starts with \"$\" but is not \"$\" or \"$/pointer\"; write {\"$const\": %q} for the literal string", where, v, v)
		}
		return litT{v}, nil
	case []any:
		out := make(arrT, len(v))
		for i, e := range v {
			t, err := compileValue(e, fmt.Sprintf("%s/%d", where, i))
			if err != nil {
				return nil, err
			}
			out[i] = t
		}
		return out, nil
	case *object:
		return compileObject(v, where)
	}
	return litT{v}, nil
}

func compileObject(o *object, where string) (template, error) {
	op := ""
	for _, k := range o.keys {
		if strings.HasPrefix(k, "$") {
			op = k
			break
		}
	}
	sub := func(key string) (template, error) {
		v, ok := o.get(key)
		if !ok {
			return nil, fmt.Errorf("%s: %q needs %q", where, op, key)
		}
		return compileValue(v, where+"/"+key)
	}
	only := func(keys ...string) error {
		for _, k := range o.keys {
			found := false
			for _, w := range keys {
				found = found || k == w
			}
			if !found {
				return fmt.Errorf("%s: member %q does not go with %q (its members are %s)", where, k, op, strings.Join(keys, ", "))
			}
		}
		return nil
	}
	switch op {
	case "":
		out := objT{}
		for _, k := range o.keys {
			t, err := compileValue(o.vals[k], where+"/"+k)
			if err != nil {
				return nil, err
			}
			out.keys = append(out.keys, k)
			out.vals = append(out.vals, t)
		}
		return out, nil
	case "$const":
		if err := only("$const"); err != nil {
			return nil, err
		}
		return litT{o.vals["$const"]}, nil
	case "$or":
		if err := only("$or"); err != nil {
			return nil, err
		}
		list, ok := o.vals["$or"].([]any)
		if !ok || len(list) == 0 {
			return nil, fmt.Errorf("%s: \"$or\" takes a non-empty array of templates", where)
		}
		out := make(orT, len(list))
		for i, e := range list {
			t, err := compileValue(e, fmt.Sprintf("%s/$or/%d", where, i))
			if err != nil {
				return nil, err
			}
			out[i] = t
		}
		return out, nil
	case "$each", "$map":
		if err := only("$each", "$map"); err != nil {
			return nil, err
		}
		op = "$each"
		src, err := sub("$each")
		if err != nil {
			return nil, err
		}
		m, err := sub("$map")
		if err != nil {
			return nil, err
		}
		return eachT{src, m}, nil
	case "$join", "$sep":
		if err := only("$join", "$sep"); err != nil {
			return nil, err
		}
		op = "$join"
		src, err := sub("$join")
		if err != nil {
			return nil, err
		}
		sep, ok := o.vals["$sep"].(string)
		if !ok {
			return nil, fmt.Errorf("%s: \"$join\" needs a string \"$sep\"", where)
		}
		return joinT{src, sep}, nil
	case "$string":
		if err := only("$string"); err != nil {
			return nil, err
		}
		src, err := sub("$string")
		return stringT{src}, err
	case "$exists":
		if err := only("$exists"); err != nil {
			return nil, err
		}
		src, err := sub("$exists")
		return existsT{src}, err
	}
	return nil, fmt.Errorf("%s: unknown template operator %q (the operators are $const, $or, $each with $map, $join with $sep, $string, $exists)", where, op)
}

func (t ptrT) eval(in any) (any, bool, error) {
	v, ok := pointer(in, t)
	return v, ok, nil
}

func (t litT) eval(any) (any, bool, error) { return t.v, true, nil }

func (t orT) eval(in any) (any, bool, error) {
	for _, e := range t {
		v, ok, err := e.eval(in)
		if err != nil {
			return nil, false, err
		}
		if ok && v != nil {
			return v, true, nil
		}
	}
	return nil, false, nil
}

func (t eachT) eval(in any) (any, bool, error) {
	v, ok, err := t.src.eval(in)
	if err != nil || !ok || v == nil {
		return nil, false, err
	}
	list, isList := v.([]any)
	if !isList {
		return nil, false, fmt.Errorf("\"$each\" expected an array, found %s", kindOf(v))
	}
	out := make([]any, 0, len(list))
	for _, e := range list {
		mv, ok, err := t.m.eval(e)
		if err != nil {
			return nil, false, err
		}
		if ok {
			out = append(out, mv)
		}
	}
	return out, true, nil
}

func (t joinT) eval(in any) (any, bool, error) {
	v, ok, err := t.src.eval(in)
	if err != nil || !ok || v == nil {
		return nil, false, err
	}
	list, isList := v.([]any)
	if !isList {
		return nil, false, fmt.Errorf("\"$join\" expected an array, found %s", kindOf(v))
	}
	parts := make([]string, len(list))
	for i, e := range list {
		s, ok := scalarString(e)
		if !ok {
			return nil, false, fmt.Errorf("\"$join\" expected scalars, found %s", kindOf(e))
		}
		parts[i] = s
	}
	return strings.Join(parts, t.sep), true, nil
}

func (t stringT) eval(in any) (any, bool, error) {
	v, ok, err := t.src.eval(in)
	if err != nil || !ok || v == nil {
		return nil, false, err
	}
	s, isScalar := scalarString(v)
	if !isScalar {
		return nil, false, fmt.Errorf("\"$string\" expected a scalar, found %s", kindOf(v))
	}
	return s, true, nil
}

func (t existsT) eval(in any) (any, bool, error) {
	v, ok, err := t.src.eval(in)
	if err != nil {
		return nil, false, err
	}
	return ok && v != nil, true, nil
}

// eval of an object leaves out members that are absent, and members that
// are null unless the template says null literally. An object template
// with members none of which is present is absent itself (an optional
// filter object whose arguments were all left out); see [evalTop].
func (t objT) eval(in any) (any, bool, error) {
	out := newObject()
	for i, k := range t.keys {
		v, ok, err := t.vals[i].eval(in)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", k, err)
		}
		if !ok {
			continue
		}
		if _, lit := t.vals[i].(litT); v == nil && !lit {
			continue
		}
		out.set(k, v)
	}
	if len(t.keys) > 0 && len(out.keys) == 0 {
		return nil, false, nil
	}
	return out, true, nil
}

// evalTop evaluates a whole body or result template: an object template
// that came out absent is the empty object there.
func evalTop(t template, in any) (any, bool, error) {
	v, ok, err := t.eval(in)
	if _, isObj := t.(objT); err == nil && !ok && isObj {
		return newObject(), true, nil
	}
	return v, ok, err
}

func (t arrT) eval(in any) (any, bool, error) {
	out := make([]any, 0, len(t))
	for _, e := range t {
		v, ok, err := e.eval(in)
		if err != nil {
			return nil, false, err
		}
		if ok {
			out = append(out, v)
		}
	}
	return out, true, nil
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case number:
		return "a number"
	case string:
		return "a string"
	case *object:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// pointers returns every JSON Pointer a template reads, relative to its
// input; an $each's map pointers are prefixed by the array's pointer and
// "/*" (used by the contract tests to check a result template against the
// documented answer).
func pointers(t template, prefix string) []string {
	var out []string
	switch t := t.(type) {
	case ptrT:
		p := prefix
		for _, tok := range t {
			p += "/" + strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
		}
		out = append(out, p)
	case orT:
		for _, e := range t {
			out = append(out, pointers(e, prefix)...)
		}
	case eachT:
		src := pointers(t.src, prefix)
		out = append(out, src...)
		base := prefix
		if len(src) == 1 {
			base = src[0]
		}
		out = append(out, pointers(t.m, base+"/*")...)
	case joinT:
		out = append(out, pointers(t.src, prefix)...)
	case stringT:
		out = append(out, pointers(t.src, prefix)...)
	case existsT:
		out = append(out, pointers(t.src, prefix)...)
	case objT:
		for _, v := range t.vals {
			out = append(out, pointers(v, prefix)...)
		}
	case arrT:
		for _, v := range t {
			out = append(out, pointers(v, prefix)...)
		}
	}
	return out
}
