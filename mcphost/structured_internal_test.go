package mcphost

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

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
		want, werr := decodeStructuredContent([]byte(text))
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() || !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			t.Fatalf("%q: %q, %v; without the fast path %q, %v", text, got, gerr, want, werr)
		}
	}
}
