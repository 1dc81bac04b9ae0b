package providers_test

// The contract test decodes form bodies (Stripe-style bracket keys, as
// httpconn sends them: a[b]=1, a[0]=x) with the body schema's types;
// kin-openapi's own form decoder does not read bracketed arrays.

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
)

// bracketForm decodes a form body written the way Stripe-style form APIs
// read nested members (a[b]=1, a[0]=x, a[]=x) into the JSON value the body
// schema describes, converting scalars by the schema's types.
func bracketForm(body io.Reader, _ http.Header, schema *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	vals, err := url.ParseQuery(string(b))
	if err != nil {
		return nil, err
	}
	root := map[string]any{}
	for key, vs := range vals {
		toks := splitKey(key)
		for _, v := range vs {
			setPath(root, toks, v)
		}
	}
	return coerce(normalize(root), schema), nil
}

var keyTok = regexp.MustCompile(`\[([^\]]*)\]`)

func splitKey(k string) []string {
	i := 0
	for i < len(k) && k[i] != '[' {
		i++
	}
	toks := []string{k[:i]}
	for _, m := range keyTok.FindAllStringSubmatch(k[i:], -1) {
		toks = append(toks, m[1])
	}
	return toks
}

// setPath stores v under toks; "" (a[]) appends.
func setPath(m map[string]any, toks []string, v string) {
	if len(toks) == 1 {
		m[toks[0]] = v
		return
	}
	child, _ := m[toks[0]].(map[string]any)
	if child == nil {
		child = map[string]any{}
		m[toks[0]] = child
	}
	if toks[1] == "" {
		toks = append([]string{toks[0], strconv.Itoa(len(child))}, toks[2:]...)
	}
	setPath(child, toks[1:], v)
}

// normalize turns maps whose keys are 0..n-1 into arrays.
func normalize(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	for k, e := range m {
		m[k] = normalize(e)
	}
	arr := make([]any, len(m))
	for k, e := range m {
		i, err := strconv.Atoi(k)
		if err != nil || i < 0 || i >= len(m) {
			return m
		}
		arr[i] = e
	}
	if len(m) == 0 {
		return m
	}
	return arr
}

func coerce(v any, s *openapi3.SchemaRef) any {
	if s == nil || s.Value == nil {
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = coerce(e, s.Value.Properties[k])
		}
	case []any:
		for i, e := range x {
			x[i] = coerce(e, s.Value.Items)
		}
	case string:
		switch {
		case s.Value.Type.Is("integer"):
			if n, err := strconv.ParseInt(x, 10, 64); err == nil {
				return n
			}
		case s.Value.Type.Is("number"):
			if n, err := strconv.ParseFloat(x, 64); err == nil {
				return n
			}
		case s.Value.Type.Is("boolean"):
			if b, err := strconv.ParseBool(x); err == nil {
				return b
			}
		}
	}
	return v
}

func init() {
	openapi3filter.RegisterBodyDecoder("application/x-www-form-urlencoded", bracketForm)
}
