package harness

import (
	"cmp"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
)

// Redacted is what [Redactor] writes in place of a secret value.
const Redacted = "[redacted]"

// MinRedactLen is the shortest value [Redactor] replaces, in bytes.
// Shorter values ("1", "yes", "abc") occur in ordinary text so often that
// replacing them would garble every output while protecting nothing a
// guess could not find; a secret that short is not a secret. A preflight
// may warn about such values; Redactor leaves them alone.
const MinRedactLen = 4

// Redactor returns a function that replaces every occurrence of each of
// values in a text with [Redacted]. Besides each value as is, it replaces
// the forms a value commonly takes in output: its JSON string encoding
// (without the quotes) and its URL query encoding, when they differ.
// Longer values are replaced first, so a value that contains another is
// replaced whole. Values shorter than [MinRedactLen] bytes are ignored.
// The function is safe for concurrent use.
//
// Redaction is a safety net, not a guarantee: a value split across two
// writes, or transformed otherwise (base64, hashed, truncated), passes.
func Redactor(values []string) func(string) string {
	seen := map[string]bool{}
	var forms []string
	add := func(f string) {
		if len(f) >= MinRedactLen && !seen[f] {
			seen[f] = true
			forms = append(forms, f)
		}
	}
	for _, v := range values {
		if len(v) < MinRedactLen {
			continue
		}
		add(v)
		if b, err := json.Marshal(v); err == nil {
			add(string(b[1 : len(b)-1]))
		}
		add(url.QueryEscape(v))
		add(url.PathEscape(v))
	}
	if len(forms) == 0 {
		return func(s string) string { return s }
	}
	slices.SortFunc(forms, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Redacted)
	}
	r := strings.NewReplacer(pairs...)
	return r.Replace
}
