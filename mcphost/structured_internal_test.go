package mcphost

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// structuredContentSlow is structuredContent without its fast path: the
// decoding it had before one.
func structuredContentSlow(raw []byte) (json.RawMessage, error) {
	d := jsontext.NewDecoder(bytes.NewReader(raw))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, errors.New("the result is not a JSON object")
	}
	for d.PeekKind() == '"' {
		name, err := d.ReadToken()
		if err != nil {
			return nil, err
		}
		if name.String() != "structuredContent" {
			if err := d.SkipValue(); err != nil {
				return nil, err
			}
			continue
		}
		v, err := d.ReadValue()
		if err != nil {
			return nil, err
		}
		if v.Kind() == 'n' {
			return nil, nil
		}
		v = v.Clone()
		if err := v.Compact(); err != nil {
			return nil, err
		}
		return json.RawMessage(v), nil
	}
	return nil, nil
}

// TestStructuredContentFastPath holds structuredContent to the decoding
// without its fast path, on results with and without the member, valid
// and not.
func TestStructuredContentFastPath(t *testing.T) {
	texts := []string{
		`{}`, `{"content":[{"type":"text","text":"Echo: hi"}]}`, `{"content":[],"structuredContent":{"a":1}}`,
		`{"structuredContent":null}`, `{"structured\u0043ontent":{"b":2}}`, `{"content":[{"text":"structuredContent"}]}`,
		`{"a":1,"a":2}`, "{\"a\":\"\xff\"}", `{"a":1`, `{"a":1}x`, `[]`, ` {}`, `{"a":"\ud800"}`, `{"a":{"structuredContent":1}}`, ``,
	}
	r := rand.New(rand.NewPCG(3, 4))
	pieces := []string{`{`, `}`, `[`, `]`, `,`, `:`, `"a"`, `"structuredContent"`, `"x\"y"`, `1`, `null`, ` `, "\"\xfe\"", `"content"`}
	for range 20000 {
		var b strings.Builder
		b.WriteString(`{`)
		for range r.IntN(10) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		texts = append(texts, b.String())
	}
	for _, text := range texts {
		got, gerr := structuredContent([]byte(text))
		want, werr := structuredContentSlow([]byte(text))
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() || !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			t.Fatalf("%q: %q, %v; without the fast path %q, %v", text, got, gerr, want, werr)
		}
	}
}
