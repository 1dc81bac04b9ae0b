package cli

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// A pending call's arguments are shown whole and escaped: a bidi override
// cannot make "refund 1000 to evil" read as something else, a carriage
// return cannot rewrite the line, and a long body is never cut.
func TestWriteArgumentsEscapesAndNeverCuts(t *testing.T) {
	long := strings.Repeat("0123456789", 150) + "END"
	args, err := json.Marshal(map[string]any{
		"to":     "ops@example.com\u202e@evil.example",
		"amount": 1000,
		"body":   "line one\nline two\r\u2066hidden\u2069\n\tindented",
		"note":   long,
		"meta":   map[string]any{"k": "v\u200b"},
	}, json.Deterministic(true))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	writeArguments(&b, jsontext.Value(args))
	got := b.String()
	for _, want := range []string{
		"  arguments:\n",
		`    to: "ops@example.com\u202e@evil.example"` + "\n",
		"    amount: 1000\n",
		"    body: (string, 40 bytes, 3 lines)\n      | line one\n      | line two\\u000d\\u2066hidden\\u2069\n      | \\tindented\n",
		"    note: (string, 1503 bytes, 1 line)\n      | " + long + "\n",
		`    meta: {"k":"v\u200b"}` + "\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	for _, r := range got {
		if r == '\u202e' || r == '\u2066' || r == '\r' || r == '\u200b' {
			t.Errorf("unescaped %U in:\n%s", r, got)
		}
	}
}
