package httpconn

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// FuzzTemplate: any template text and any answer, compiled and evaluated,
// give a value or an error, never a panic or a hang.
func FuzzTemplate(f *testing.F) {
	f.Add([]byte(`{"a": "$/x", "b": {"$each": "$/l", "$map": {"n": "$/n"}}, "c": {"$or": ["$/y", {"$const": 1}]}}`), []byte(`{"x": 1, "l": [{"n": 2}, {}], "y": null}`))
	f.Add([]byte(`{"$join": "$/l", "$sep": ","}`), []byte(`{"l": ["a", 1, true]}`))
	f.Add([]byte(`{"$string": "$/n"}`), []byte(`{"n": 12345678901234567890}`))
	f.Add([]byte(`"$/a~1b/0"`), []byte(`{"a/b": [[]]}`))
	f.Fuzz(func(t *testing.T, tmpl, in []byte) {
		tp, err := compile(jsontext.Value(tmpl), "fuzz")
		if err != nil || tp == nil {
			return
		}
		v, err := decode(in)
		if err != nil {
			return
		}
		out, ok, err := evalTop(tp, v)
		if err != nil || !ok {
			return
		}
		if _, err := encode(out); err != nil {
			t.Fatalf("a value built from decoded JSON does not encode: %v", err)
		}
		_ = pointers(tp, "")
	})
}
