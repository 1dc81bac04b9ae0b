package httpconn

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// The values templates read and build: nil (JSON null), bool, number
// (the JSON text of a number, kept exact: 64-bit ids survive), string,
// *object (members in order) and []any.

type number string

type object struct {
	keys []string
	vals map[string]any
}

func newObject() *object { return &object{vals: map[string]any{}} }

func (o *object) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// maxDepth bounds the nesting of a decoded answer: deeper is bad input.
const maxDepth = 256

// decode reads one JSON value. Duplicate member names, invalid UTF-8 and
// nesting deeper than maxDepth are errors (an answer a reader could take
// two ways is refused).
func decode(b []byte) (any, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("there is text after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *jsontext.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("the JSON value is nested more than %d deep", maxDepth)
	}
	if dec.PeekKind() == '0' {
		raw, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		return number(raw), nil
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '{':
		o := newObject()
		for dec.PeekKind() != '}' {
			kt, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			key := kt.String() // the token is valid until the next read
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			o.set(key, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return o, nil
	case '[':
		a := []any{}
		for dec.PeekKind() != ']' {
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return a, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// encode writes v as JSON text.
func encode(v any) (jsontext.Value, error) {
	var sb strings.Builder
	enc := jsontext.NewEncoder(&sb)
	if err := encodeValue(enc, v); err != nil {
		return nil, err
	}
	return jsontext.Value(strings.TrimSpace(sb.String())), nil
}

func encodeValue(enc *jsontext.Encoder, v any) error {
	switch v := v.(type) {
	case nil:
		return enc.WriteToken(jsontext.Null)
	case bool:
		return enc.WriteToken(jsontext.Bool(v))
	case number:
		return enc.WriteValue(jsontext.Value(v))
	case string:
		return enc.WriteToken(jsontext.String(v))
	case *object:
		if err := enc.WriteToken(jsontext.BeginObject); err != nil {
			return err
		}
		for _, k := range v.keys {
			if err := enc.WriteToken(jsontext.String(k)); err != nil {
				return err
			}
			if err := encodeValue(enc, v.vals[k]); err != nil {
				return err
			}
		}
		return enc.WriteToken(jsontext.EndObject)
	case []any:
		if err := enc.WriteToken(jsontext.BeginArray); err != nil {
			return err
		}
		for _, e := range v {
			if err := encodeValue(enc, e); err != nil {
				return err
			}
		}
		return enc.WriteToken(jsontext.EndArray)
	}
	return fmt.Errorf("cannot encode a %T", v)
}

// scalarString is a scalar's text for a path, query or header: a string
// as is, a number in its JSON form, a boolean as true or false.
func scalarString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case number:
		return string(v), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

// pointer resolves an RFC 6901 JSON Pointer already split into its
// unescaped tokens.
func pointer(v any, toks []string) (any, bool) {
	for _, t := range toks {
		switch c := v.(type) {
		case *object:
			var ok bool
			if v, ok = c.get(t); !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) || (len(t) > 1 && t[0] == '0') || t[0] == '+' {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// splitPointer splits a JSON Pointer ("" or "/a/b~1c") into its tokens.
func splitPointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("JSON Pointer %q must start with \"/\" (RFC 6901)", p)
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(t, "~0", ""), "~1", ""), "~") {
			return nil, fmt.Errorf("JSON Pointer %q has a \"~\" not followed by 0 or 1", p)
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}
