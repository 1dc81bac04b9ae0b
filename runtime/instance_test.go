package runtime

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// TestDecodeInstanceMatchesLibrary holds decodeInstance to
// jsonschema.UnmarshalJSON: the same value (types included) and an error
// exactly when it errs, on hand-picked texts and on random ones.
func TestDecodeInstanceMatchesLibrary(t *testing.T) {
	texts := []string{
		`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `1.5e+10`, `1E-3`, `-12.25`, `""`,
		`{"a":1,"b":[1,2,{"c":null}],"d":"x"}`,
		` { "a" : [ 1 , 2 ] , "b" : { } } `,
		`{"esc":"a\"b\\c\/d\u0041\u00e9\ud83d\ude00\n\t"}`,
		`{"utf":"héllo wörld ✓"}`,
		"{\"bad\":\"\xff\"}", "\"\xc3\"", `"\ud800"`, `"\ud800x"`,
		`{"a":1,"a":2}`, `{"a":1}x`, `{"a":1} {}`, `[1,]`, `{"a":}`, `{"a" 1}`, `{,}`, `01`, `1.`, `.5`, `-`, `1e`, `1e+`,
		"\"a\tb\"", `"abc`, `"\`, `[`, `{`, `tru`, `nul`, `nulll`, ``, ` `, `{"a":[1,2,3]]`,
		strings.Repeat("[", 1100) + strings.Repeat("]", 1100),
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		`{"customerId":"cus_8f3kQ2","query":"late invoice","limit":10,"status":"open","tags":["vip","emea"],"since":"2026-01-02T03:04:05Z"}`,
	}
	r := rand.New(rand.NewPCG(1, 2))
	pieces := []string{`{`, `}`, `[`, `]`, `,`, `:`, `"a"`, `"b\"c"`, `"é"`, "\"\xfe\"", `1`, `-2.5e3`, `0`, `true`, `null`, ` `, `"`, `\`, `x`, `{"k":`, `[1,`}
	for range 20000 {
		var b strings.Builder
		for range 1 + r.IntN(12) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		texts = append(texts, b.String())
	}
	for _, text := range texts {
		got, gerr := decodeInstance([]byte(text))
		want, werr := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(text)))
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
			t.Fatalf("%q: error %v, the library's %v", clip(text), gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %s, the library's %s", clip(text), fmt.Sprintf("%#v", got), fmt.Sprintf("%#v", want))
		}
	}
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// TestKindStringMatchesLibrary holds kindString to the library's own
// LocalizedString with the printer schemaErr used.
func TestKindStringMatchesLibrary(t *testing.T) {
	strs := []string{"", "open", `a"b`, `it's`, "é✓", "\x00\x7f", "\xff", `back\slash`, "tab\t", "1,000", "%d %s", "'quoted'", "plain ascii ~!@#", "x\x7e", "\x1f"}
	vals := []any{nil, true, false, stdNumber("1000"), stdNumber("-1.5e3"), float64(1234567), 12345, []any{1}, map[string]any{"a": 1}}
	for _, s := range strs {
		vals = append(vals, s)
	}
	var kinds []jsonschema.ErrorKind
	for _, s := range strs {
		for _, w := range strs {
			kinds = append(kinds, &kind.Pattern{Got: s, Want: w})
		}
	}
	for i := range vals {
		kinds = append(kinds, &kind.Enum{Got: "x", Want: vals[i : i+1]})
		kinds = append(kinds, &kind.Enum{Got: "x", Want: vals[i:]})
		kinds = append(kinds, &kind.Enum{Got: "x", Want: vals[:i+1]})
	}
	kinds = append(kinds, &kind.Enum{Got: "x", Want: nil}, &kind.Enum{Got: "x", Want: []any{}}, &kind.MinLength{Got: 1000, Want: 2000})
	for _, k := range kinds {
		if got, want := kindString(k), k.LocalizedString(english); got != want {
			t.Errorf("%#v: %q, the library's %q", k, got, want)
		}
	}
}

func stdNumber(s string) any { return stdjson.Number(s) }
