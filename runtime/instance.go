package runtime

import (
	"bytes"
	stdjson "encoding/json"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// decodeInstance decodes a JSON text into the value model the schema
// library validates (map[string]any, []any, encoding/json's Number,
// string, bool, nil): the value [jsonschema.UnmarshalJSON] returns, and
// its error when the text is not one JSON value.
//
// The texts the call path validates are known to be valid JSON (canonical
// arguments, a result that passed IsValid), for which
// jsonschema.UnmarshalJSON costs an encoding/json Decoder and its buffer
// every time: about half of a typical decision. This reads such a text
// directly. Whatever it does not read the simple way (a string with an
// escape is unquoted by encoding/json itself; invalid UTF-8, deep nesting,
// anything unexpected) makes it hand the whole text to
// jsonschema.UnmarshalJSON, so the value and the error are that
// function's in every case (TestDecodeInstanceMatchesLibrary).
func decodeInstance(b []byte) (any, error) {
	d := instDecoder{b: b}
	v, ok := d.value(0)
	if ok {
		d.space()
		if d.i == len(d.b) {
			return v, nil
		}
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// maxInstanceDepth is the nesting decodeInstance reads itself; deeper
// texts go to the library (encoding/json's own limit is 10,000).
const maxInstanceDepth = 1000

type instDecoder struct {
	b []byte
	i int
}

func (d *instDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// value reads one value; ok is false when it gives up (the caller then
// asks the library).
func (d *instDecoder) value(depth int) (any, bool) {
	if depth > maxInstanceDepth {
		return nil, false
	}
	d.space()
	if d.i >= len(d.b) {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		d.i++
		m := map[string]any{}
		d.space()
		if d.i < len(d.b) && d.b[d.i] == '}' {
			d.i++
			return m, true
		}
		for {
			d.space()
			k, ok := d.str()
			if !ok {
				return nil, false
			}
			d.space()
			if d.i >= len(d.b) || d.b[d.i] != ':' {
				return nil, false
			}
			d.i++
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			m[k] = v
			more, ok := d.next('}')
			if !ok {
				return nil, false
			}
			if !more {
				return m, true
			}
		}
	case c == '[':
		d.i++
		a := []any{}
		d.space()
		if d.i < len(d.b) && d.b[d.i] == ']' {
			d.i++
			return a, true
		}
		for {
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			a = append(a, v)
			more, ok := d.next(']')
			if !ok {
				return nil, false
			}
			if !more {
				return a, true
			}
		}
	case c == '"':
		return d.str()
	case c == 't':
		return true, d.lit("true")
	case c == 'f':
		return false, d.lit("false")
	case c == 'n':
		return nil, d.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return d.num()
	}
	return nil, false
}

// next reads what follows a member or an element: ',' (more is true),
// or end, which closes the object or array; anything else fails.
func (d *instDecoder) next(end byte) (more, ok bool) {
	d.space()
	if d.i >= len(d.b) {
		return false, false
	}
	switch d.b[d.i] {
	case ',':
		d.i++
		return true, true
	case end:
		d.i++
		return false, true
	}
	return false, false
}

func (d *instDecoder) lit(s string) bool {
	if !bytes.HasPrefix(d.b[d.i:], []byte(s)) {
		return false
	}
	d.i += len(s)
	return true
}

// str reads a string. One without escapes or control characters, in
// valid UTF-8, is its bytes; any other is unquoted by encoding/json.
func (d *instDecoder) str() (string, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return "", false
	}
	start := d.i + 1
	ascii, simple := true, true
	j := start
	for ; j < len(d.b); j++ {
		c := d.b[j]
		if c == '"' {
			break
		}
		switch {
		case c == '\\':
			simple = false
			j++ // the escaped byte cannot end the string
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	if j >= len(d.b) {
		return "", false
	}
	raw := d.b[start:j]
	d.i = j + 1
	if simple && (ascii || utf8.Valid(raw)) {
		return string(raw), true
	}
	var s string
	if stdjson.Unmarshal(d.b[start-1:j+1], &s) != nil {
		return "", false
	}
	return s, true
}

// num reads a number as encoding/json's Number (UseNumber): its literal.
func (d *instDecoder) num() (any, bool) {
	start := d.i
	j := d.i
	if j < len(d.b) && d.b[j] == '-' {
		j++
	}
	digits := func() int {
		k := j
		for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' {
			j++
		}
		return j - k
	}
	switch n := digits(); {
	case n == 0:
		return nil, false
	case n > 1 && d.b[j-n] == '0':
		return nil, false // a leading zero
	}
	if j < len(d.b) && d.b[j] == '.' {
		j++
		if digits() == 0 {
			return nil, false
		}
	}
	if j < len(d.b) && (d.b[j] == 'e' || d.b[j] == 'E') {
		j++
		if j < len(d.b) && (d.b[j] == '+' || d.b[j] == '-') {
			j++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	d.i = j
	return stdjson.Number(d.b[start:j]), true
}
