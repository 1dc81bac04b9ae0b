package harness

import (
	"fmt"
	"regexp"
	"strings"
)

// Secret references: ${secret:NAME} in a value stands for the value of the
// named secret, resolved by [Secrets] when the runtime needs it. "$${" is a
// literal "${". Any other "${" is an error, so that a typo (${secrets:X},
// ${X}, ${secret:X) never reaches a server as literal text.

// secretNamePattern is the syntax of a secret name: an environment variable
// name.
const secretNamePattern = `^[A-Za-z_][A-Za-z0-9_]*$`

var secretName = regexp.MustCompile(secretNamePattern)

// refSpan is one reference in a string: s[start:end] is "${secret:name}".
type refSpan struct {
	start, end int
	name       string
}

// refError is a malformed "${" at byte offset off of the string.
type refError struct {
	off int
	msg string
}

// scanRefs finds the secret references of s. It reports the first
// malformed "${" and stops there.
func scanRefs(s string) ([]refSpan, *refError) {
	var refs []refSpan
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '$')
		if j < 0 {
			break
		}
		i += j
		if strings.HasPrefix(s[i:], "$${") {
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return refs, &refError{i, "\"${\" is not closed by \"}\"; write ${secret:NAME}, or $${ for a literal ${"}
		}
		inner := s[i+2 : i+end]
		name, ok := strings.CutPrefix(inner, "secret:")
		if !ok {
			return refs, &refError{i, fmt.Sprintf("only ${secret:NAME} is expanded, not ${%s}; write $${ for a literal ${", clip(inner))}
		}
		if !secretName.MatchString(name) {
			return refs, &refError{i, fmt.Sprintf("%q is not a secret name (letters, digits and _, not starting with a digit)", clip(name))}
		}
		refs = append(refs, refSpan{start: i, end: i + end + 1, name: name})
		i += end + 1
	}
	return refs, nil
}

// clip shortens s for a message. Only names and malformed reference text
// are ever clipped into messages, never secret values.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// blankRefs returns s with each well-formed reference replaced by spaces,
// for the credential heuristics to look at the literal text only.
func blankRefs(s string) string {
	refs, _ := scanRefs(s)
	if len(refs) == 0 {
		return s
	}
	b := []byte(s)
	for _, r := range refs {
		for i := r.start; i < r.end; i++ {
			b[i] = ' '
		}
	}
	return string(b)
}

// expandRefs replaces each reference in s by lookup(name) and each "$${"
// by "${". s must be well formed (see [scanRefs]).
func expandRefs(s string, lookup func(name string) (string, error)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	refs, rerr := scanRefs(s)
	if rerr != nil {
		return "", fmt.Errorf("harness: malformed secret reference: %s", rerr.msg)
	}
	var b strings.Builder
	prev := 0
	unescape := func(t string) { b.WriteString(strings.ReplaceAll(t, "$${", "${")) }
	for _, r := range refs {
		unescape(s[prev:r.start])
		v, err := lookup(r.name)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
		prev = r.end
	}
	unescape(s[prev:])
	return b.String(), nil
}
