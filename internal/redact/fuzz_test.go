package redact

import (
	"strings"
	"testing"
)

// FuzzRedactHostile: for any value and text, redaction neither panics
// nor leaves the value in the text (as it was, or planted in it);
// values with line breaks or NUL are left out (a kept line break and the
// text after it may spell such a value's tail by chance).
func FuzzRedactHostile(f *testing.F) {
	f.Add("sk_live_ab%2Fcd", "x sk_live_ab%252Fcd \\\\u0073k y")
	f.Add("a\\\"b\\c", "\\\\\\\"a\\\\\\\"b\\\\\\\\c")
	f.Add("\xff\xfe\xfdzz", "%FF%fe\\u00fdzz")
	f.Fuzz(func(t *testing.T, secret, text string) {
		if strings.ContainsAny(secret, "\r\n\x00") || len(secret) < MinLen || len(secret) > 64 || len(text) > 4096 {
			return
		}
		r := New([]string{secret})
		out := r(text)
		if strings.Contains(strings.ReplaceAll(out, Redacted, "\x00"), secret) {
			t.Fatalf("secret %q left in %q", secret, out)
		}
		out2 := r(text + secret + text)
		if strings.Contains(strings.ReplaceAll(out2, Redacted, "\x00"), secret) {
			t.Fatalf("planted secret %q left in %q", secret, out2)
		}
	})
}
