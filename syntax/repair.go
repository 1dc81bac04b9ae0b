package syntax

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// repair finds, outside strings, the departures from JSON that a lenient
// reader would accept (a byte order mark, comments, trailing commas, NaN
// and Infinity), reports each, and returns a copy of src with each one
// overwritten by spaces of the same length (non-finite numbers by 0), so
// offsets do not move and the rest of the document is still read. It
// returns src itself when there is nothing to repair. Strings are skipped
// exactly as JSON defines them, so nothing inside a string is touched.
func (p *parser) repair(src []byte) []byte {
	var out []byte
	blank := func(from, to int) {
		if out == nil {
			out = slices.Clone(src)
		}
		for i := from; i < to; i++ {
			if out[i] != '\n' {
				out[i] = ' '
			}
		}
	}
	i := 0
	if len(src) >= 3 && src[0] == 0xEF && src[1] == 0xBB && src[2] == 0xBF {
		p.errorf(0, "", RuleByteOrderMark, "document starts with a UTF-8 byte order mark; remove it (RFC 8259 section 8.1)")
		blank(0, 3)
		i = 3
	}
	lastComma := -1 // offset of a ',' not yet followed by a value
	for i < len(src) {
		c := src[i]
		switch {
		case c == '"':
			i = skipString(src, i)
			lastComma = -1
			continue
		case c == '/' && i+1 < len(src) && (src[i+1] == '/' || src[i+1] == '*'):
			end := len(src)
			if src[i+1] == '/' {
				if j := slices.Index(src[i:], '\n'); j >= 0 {
					end = i + j
				}
			} else if j := bytes.Index(src[i+2:], []byte("*/")); j >= 0 {
				end = i + 2 + j + 2
			}
			p.errorf(i, "", RuleComment, "comments are not allowed in JSON; remove it or move the note into a \"description\" or \"purpose\"")
			blank(i, end)
			i = end
			continue
		case c == ',':
			lastComma = i
		case c == ']' || c == '}':
			if lastComma >= 0 {
				p.errorf(lastComma, "", RuleTrailingComma, "trailing comma before %q; remove the comma", string(c))
				blank(lastComma, lastComma+1)
			}
			lastComma = -1
		case isSpace(c):
		case c != 'N' && c != 'I' && c != '-' && c != '+':
			lastComma = -1
		default:
			lastComma = -1
			for _, word := range nonFinite {
				if bytes.HasPrefix(src[i:], []byte(word)) && !isWordByte(src, i+len(word)) && !isWordByte(src, i-1) {
					p.errorf(i, "", RuleNonFinite, "%s is not a JSON number; JSON has no NaN or Infinity, use a finite number or null", word)
					blank(i, i+len(word))
					zero := i
					if word[0] == '-' || word[0] == '+' {
						zero++
					}
					out[zero] = '0'
					i += len(word) - 1
					break
				}
			}
		}
		i++
	}
	if out == nil {
		return src
	}
	return out
}

var nonFinite = []string{"-Infinity", "+Infinity", "Infinity", "-NaN", "+NaN", "NaN"}

func isWordByte(src []byte, i int) bool {
	if i < 0 || i >= len(src) {
		return false
	}
	c := src[i]
	return c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// skipString returns the offset just past the string starting at src[i]
// (a '"'), or len(src) when it is not closed.
func skipString(src []byte, i int) int {
	for i++; i < len(src); i++ {
		switch src[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		case '\n':
			return i // a raw newline ends a (broken) string for our purposes
		}
	}
	return len(src)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *parser) skipSpace(off int) int {
	for off < len(p.src) && isSpace(p.src[off]) {
		off++
	}
	return off
}

// unquote returns the value of the raw string token at off, reporting
// invalid UTF-8 (bytes or lone surrogate escapes) and over-long strings.
// Invalid sequences read as U+FFFD.
//
// copied is false when the value is the source's bytes between the quotes
// (s then shares them), true when it is an unescaped copy.
func (p *parser) unquote(raw []byte, off int) (s string, copied bool) {
	if len(raw) >= 2 && len(raw)-2 <= p.lim.MaxString && simpleString(raw[1:len(raw)-1]) {
		// No escape, no control character, valid UTF-8: the value is the
		// source's bytes between the quotes (the tokenizer has checked the
		// rest), shared, not copied.
		return p.t.text(off+1, off+len(raw)-1), false
	}
	var err error
	p.unq, err = jsontext.AppendUnquote(p.unq[:0], raw)
	if err != nil {
		bad := off
		if j := firstInvalid(raw); j >= 0 {
			bad = off + j
		}
		what := "holds bytes that are not UTF-8"
		if strings.Contains(err.Error(), "surrogate") {
			what = "has an escape that encodes a lone UTF-16 surrogate"
		}
		p.errorf(bad, p.pointer(), RuleInvalidUTF8,
			"string %s; JSON text must be valid UTF-8 (RFC 8259 section 8.1), read here as U+FFFD", what)
	}
	if len(p.unq) > p.lim.MaxString {
		p.errorf(off, p.pointer(), RuleLimit, "string is %d bytes long; the limit is %d bytes", len(p.unq), p.lim.MaxString)
		return string(p.unq[:p.lim.MaxString]), true
	}
	return p.intern(p.unq), true
}

// firstInvalid returns the index in raw of the first byte that is not
// valid UTF-8, or of the first \u escape of a surrogate, or -1.
func firstInvalid(raw []byte) int {
	for i := 0; i < len(raw); {
		r, size := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		if r == '\\' && i+5 < len(raw) && raw[i+1] == 'u' && (raw[i+2] == 'd' || raw[i+2] == 'D') && strings.ContainsRune("89abcdefABCDEF", rune(raw[i+3])) {
			return i
		}
		if r == '\\' {
			size = 2
		}
		i += size
	}
	return -1
}

// syntaxError records a fatal syntax error and stops the read.
func (p *parser) syntaxError(err error) {
	p.stopped = true
	var serr *jsontext.SyntacticError
	switch {
	case errors.As(err, &serr):
		msg := serr.Err.Error()
		if errors.Is(serr.Err, io.ErrUnexpectedEOF) {
			msg = "unexpected end of document; a value, ']' or '}' is missing"
		}
		off := int(serr.ByteOffset)
		p.errorf(off, string(serr.JSONPointer), RuleSyntax, "%s", explainSyntax(msg, p.src, off))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		p.errorf(len(p.src), "", RuleSyntax, "unexpected end of document; a value, ']' or '}' is missing")
	default:
		p.errorf(0, "", RuleSyntax, "%s", strings.TrimPrefix(err.Error(), "jsontext: "))
	}
}

// explainSyntax adds to the tokenizer's message what would be valid.
func explainSyntax(msg string, src []byte, off int) string {
	msg = strings.TrimPrefix(msg, "jsontext: ")
	if off < len(src) {
		switch c := src[off]; {
		case c == '\'':
			return msg + "; JSON strings use double quotes"
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_':
			return msg + "; member names and strings must be double-quoted, and the only bare words are true, false and null"
		}
	}
	return msg
}

func sortErrors(errs []Error) {
	slices.SortStableFunc(errs, func(a, b Error) int { return a.Offset - b.Offset })
}

// simpleString reports whether a string token's content needs no
// unescaping: valid UTF-8 without control characters, '\\' or '"'.
func simpleString(b []byte) bool {
	ascii := true
	for _, c := range b {
		if c < 0x20 || c == '\\' || c == '"' {
			return false
		}
		if c >= 0x80 {
			ascii = false
		}
	}
	return ascii || utf8.Valid(b)
}
