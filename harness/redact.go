package harness

import "github.com/openplaybook/openplaybook/internal/redact"

// Redacted is what [Redactor] writes in place of a secret value.
const Redacted = redact.Redacted

// MinRedactLen is the shortest value [Redactor] replaces, in bytes.
// Shorter values ("1", "yes", "abc") occur in ordinary text so often that
// replacing them would garble every output while protecting nothing a
// guess could not find; a secret that short is not a secret. A preflight
// may warn about such values; Redactor leaves them alone. The same
// measure applies to the encoded forms Redactor looks for.
const MinRedactLen = redact.MinLen

// Redactor returns a function that replaces every occurrence of each of
// values in a text with [Redacted]. Values shorter than [MinRedactLen]
// bytes are ignored. The function is safe for concurrent use, and reads
// the text once, without backtracking.
//
// Each value is looked for as is, as its hex encoding (either case) and
// as its base64 encoding (either alphabet, padded or not, also inside a
// longer base64 text), each byte of which may be written literally, as
// %XX in either case, as '+' for a space, or as a JSON escape (also one
// escaped once or twice over), chosen byte by byte; a match may run
// across line breaks, which are kept. See docs/harness.md ("What is never
// printed") for the details and for what is not caught. Redaction is a
// safety net, not a guarantee.
func Redactor(values []string) func(string) string { return redact.New(values) }
