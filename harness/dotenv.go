package harness

import (
	"bytes"
	"fmt"
	"strings"
)

// DotenvError is a malformed line of a dotenv file. Its message names the
// file, the line and what is wrong, and at most the variable's name: never
// any part of a value.
type DotenvError struct {
	File   string
	Line   int // 1-based
	Column int // 1-based byte column
	Msg    string
}

func (e *DotenvError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// ParseDotenv reads a dotenv file's content. file names it in errors. The
// syntax, one entry a line:
//
//	# a comment line; blank lines are skipped
//	NAME=value                 # unquoted: blanks around it trimmed; " #" starts a comment
//	export NAME=value          # "export " is allowed and ignored
//	NAME='single quoted'       # taken literally
//	NAME="double quoted\n"     # escapes \n \r \t \" \\ \$; other backslashes are kept
//	NAME=                      # empty
//
// NAME is ^[A-Za-z_][A-Za-z0-9_]*$. A quoted value ends on its line (there
// are no multi-line values); after the closing quote only blanks and a
// comment may follow. $VAR and ${VAR} are not expanded. A line that does
// not fit, a name defined twice in one file, and content past [MaxSize]
// are errors; every error is returned, each a *[DotenvError], and the
// values of the well-formed lines are returned with them. A UTF-8 byte
// order mark and "\r\n" line ends are accepted.
func ParseDotenv(file string, src []byte) (map[string]string, []*DotenvError) {
	vals := map[string]string{}
	var errs []*DotenvError
	if len(src) > MaxSize {
		return vals, []*DotenvError{{File: file, Line: 1, Column: 1, Msg: fmt.Sprintf("the file is larger than the limit of %d bytes (1 MiB)", MaxSize)}}
	}
	src = bytes.TrimPrefix(src, []byte("\xEF\xBB\xBF"))
	firstLine := map[string]int{}
	for i, raw := range strings.Split(string(src), "\n") {
		lineNo := i + 1
		line := strings.TrimSuffix(raw, "\r")
		fail := func(col int, format string, args ...any) {
			errs = append(errs, &DotenvError{File: file, Line: lineNo, Column: col, Msg: fmt.Sprintf(format, args...)})
		}
		body := strings.TrimLeft(line, " \t")
		col := len(line) - len(body) + 1
		if body == "" || body[0] == '#' {
			continue
		}
		if rest, ok := strings.CutPrefix(body, "export"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			trimmed := strings.TrimLeft(rest, " \t")
			col += len(body) - len(trimmed)
			body = trimmed
		}
		eq := strings.IndexByte(body, '=')
		if eq < 0 {
			fail(col, "expected NAME=value")
			continue
		}
		name := strings.TrimRight(body[:eq], " \t")
		if !envName.MatchString(name) {
			if len(name) <= 64 && !strings.ContainsAny(name, "\"'") && credentialIn(name) == "" {
				fail(col, "%q is not a variable name (^[A-Za-z_][A-Za-z0-9_]*$)", name)
			} else {
				fail(col, "expected NAME=value with NAME a variable name (^[A-Za-z_][A-Za-z0-9_]*$)")
			}
			continue
		}
		rest := body[eq+1:]
		vrest := strings.TrimLeft(rest, " \t")
		vcol := col + eq + 1 + len(rest) - len(vrest)
		val, msg, mcol := dotenvValue(vrest)
		if msg != "" {
			fail(vcol+mcol, "%s (in the value of %s)", msg, name)
			continue
		}
		if first, dup := firstLine[name]; dup {
			fail(col, "%s is defined twice in this file (first on line %d)", name, first)
			continue
		}
		firstLine[name] = lineNo
		vals[name] = val
	}
	return vals, errs
}

// dotenvValue reads the value part of a line (leading blanks removed). On
// error it returns a message that never quotes the value and the 0-based
// offset of the problem in s.
func dotenvValue(s string) (val, msg string, off int) {
	if s == "" {
		return "", "", 0
	}
	switch s[0] {
	case '\'':
		end := strings.IndexByte(s[1:], '\'')
		if end < 0 {
			return "", "the single quote is not closed on this line", 0
		}
		if m, o := afterQuote(s[end+2:]); m != "" {
			return "", m, end + 2 + o
		}
		return s[1 : end+1], "", 0
	case '"':
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			c := s[i]
			switch {
			case c == '"':
				if m, o := afterQuote(s[i+1:]); m != "" {
					return "", m, i + 1 + o
				}
				return b.String(), "", 0
			case c == '\\' && i+1 < len(s):
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				case 'r':
					b.WriteByte('\r')
				case 't':
					b.WriteByte('\t')
				case '"', '\\', '$':
					b.WriteByte(s[i])
				default:
					b.WriteByte('\\')
					b.WriteByte(s[i])
				}
			default:
				b.WriteByte(c)
			}
		}
		return "", "the double quote is not closed on this line", 0
	}
	v := s
	for i := 1; i < len(v); i++ {
		if v[i] == '#' && (v[i-1] == ' ' || v[i-1] == '\t') {
			v = v[:i]
			break
		}
	}
	return strings.TrimRight(v, " \t"), "", 0
}

// afterQuote checks what follows a closing quote: blanks, then nothing or
// a comment.
func afterQuote(s string) (string, int) {
	t := strings.TrimLeft(s, " \t")
	if t == "" || t[0] == '#' {
		return "", 0
	}
	return "unexpected text after the closing quote", len(s) - len(t)
}
