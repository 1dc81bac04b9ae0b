package report

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/openplaybook/openplaybook/diag"
)

// snippetWidth is the most characters of a source line the text format
// shows; a longer line is cut to a window around the column, with "..."
// where it was cut.
const snippetWidth = 100

// writeText renders diagnostics for a terminal:
//
//	examples/x.json:12:7: error: unknown member "nxt" in step "a" [unknown-member]
//	   12 |       "nxt": "b",
//	      |       ^
//
// then one summary line ("1 error, 0 warnings"). Nothing at all is written
// when diags is empty.
func writeText(b *bytes.Buffer, src *sources, diags []diag.Diagnostic) {
	if len(diags) == 0 {
		return
	}
	for _, d := range diags {
		file, msg := shown(d.File), shown(d.Message)
		if d.Line > 0 {
			fmt.Fprintf(b, "%s:%d:%d: %s: %s [%s]\n", file, d.Line, d.Column, d.Severity, msg, d.Rule)
		} else {
			fmt.Fprintf(b, "%s: %s: %s [%s]\n", file, d.Severity, msg, d.Rule)
			continue
		}
		line, ok := src.line(d.File, d.Line)
		if !ok {
			continue
		}
		text, caret := snippet(line, d.Column)
		num := strconv.Itoa(d.Line)
		fmt.Fprintf(b, " %s | %s\n", num, text)
		fmt.Fprintf(b, " %s | %s^\n", strings.Repeat(" ", len(num)), caret)
	}
	b.WriteString(summary(diags))
	b.WriteByte('\n')
}

// hidden reports whether r is shown as U+FFFD in the text format: a
// control character (tab aside), a line or paragraph separator, or a
// bidirectional formatting character.
func hidden(r rune) bool {
	return r != '\t' && (unicode.IsControl(r) || unicode.In(r, unicode.Bidi_Control, unicode.Zl, unicode.Zp))
}

// shown returns s with every hidden character, and every byte that is not
// UTF-8, replaced by U+FFFD, so a file name or message cannot drive the
// terminal or span lines.
func shown(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r == utf8.RuneError || hidden(r) }) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if hidden(r) {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// snippet returns the line as shown and the padding that puts a caret
// under byte column col (1-based). Tabs are kept, in the line and in the
// padding, so the caret lines up whatever the tab width. Bytes that are
// not UTF-8, control characters, line and paragraph separators and
// bidirectional formatting characters are shown as U+FFFD, so that a document cannot drive the terminal or
// make the snippet read differently from the bytes. A line longer than
// snippetWidth characters is cut to a window around the column.
func snippet(line []byte, col int) (text, pad string) {
	at := min(max(col-1, 0), len(line)) // byte offset of the caret
	var cells []string                  // the characters of the line, as shown
	k := -1                             // index of the character under the caret
	for off := 0; off < len(line); {
		r, n := utf8.DecodeRune(line[off:])
		if k < 0 && at < off+n {
			k = len(cells)
		}
		s := string(r)
		switch {
		case r == '\t':
		case r == utf8.RuneError && n == 1, hidden(r):
			s = "\uFFFD"
		}
		cells = append(cells, s)
		off += n
	}
	if k < 0 {
		k = len(cells)
	}
	start, end := 0, len(cells)
	var pre, post string
	if len(cells) > snippetWidth {
		start = min(max(k-snippetWidth/2, 0), len(cells)-snippetWidth)
		end = start + snippetWidth
		if start > 0 {
			pre = "..."
		}
		if end < len(cells) {
			post = "..."
		}
	}
	var t, p strings.Builder
	t.WriteString(pre)
	p.WriteString(strings.Repeat(" ", len(pre)))
	for i := start; i < end; i++ {
		t.WriteString(cells[i])
		if i < k {
			if cells[i] == "\t" {
				p.WriteByte('\t')
			} else {
				p.WriteByte(' ')
			}
		}
	}
	t.WriteString(post)
	return t.String(), p.String()
}
