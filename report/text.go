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

// snippetReach is how many bytes of a line [snippet] reads before the
// column at most: enough for snippetWidth whole characters of up to
// [utf8.UTFMax] bytes, however the line is written. It never reads more
// than snippetWidth+1 characters after the column, so the cost of a
// snippet is bounded, whatever the length of the line.
const snippetReach = (snippetWidth + 1) * utf8.UTFMax

// writeText renders diagnostics for a terminal:
//
//	examples/x.json:12:7: error: unknown member "nxt" in step "a" [unknown-member]
//	   12 |       "nxt": "b",
//	      |       ^
//
// then one summary line ("1 error, 0 warnings"). Nothing at all is written
// when diags is empty. A message's detail lines (each after "\n\t") are
// shown each on a line of its own, indented by four spaces, before the
// snippet.
//
// The snippet never shows a credential: every character of one (see
// [sources.masks]) is shown as '*', so the caret still lines up.
func writeText(b *bytes.Buffer, src *sources, diags []diag.Diagnostic) {
	if len(diags) == 0 {
		return
	}
	for _, d := range diags {
		// Detail lines of a message (each after "\n\t", as an MCP
		// server's last stderr lines are) are shown each on a line of its
		// own, indented under the diagnostic, so none can pass for a
		// diagnostic of its own. Any other line break is shown as U+FFFD.
		parts := strings.Split(d.Message, "\n\t")
		file, msg := shown(d.File), shown(parts[0])
		if d.Line > 0 {
			fmt.Fprintf(b, "%s:%d:%d: %s: %s [%s]\n", file, d.Line, d.Column, d.Severity, msg, d.Rule)
		} else {
			fmt.Fprintf(b, "%s: %s: %s [%s]\n", file, d.Severity, msg, d.Rule)
		}
		for _, l := range parts[1:] {
			fmt.Fprintf(b, "    %s\n", shown(l))
		}
		if d.Line <= 0 {
			continue
		}
		line, start, ok := src.line(d.File, d.Line)
		if !ok {
			continue
		}
		masks := src.masks(d.File, start, start+len(line))
		if strings.HasSuffix(d.Rule, "credential") && d.Column >= 1 && d.Column <= len(line)+1 {
			// A credential diagnostic points at a value that may be one
			// only by where it stands (a GITHUB_TOKEN holding plain text):
			// everything from the column to the end of the line is hidden.
			masks = withSpan(masks, span{start + d.Column - 1, start + len(line)})
		}
		text, caret := snippet(line, d.Column, masks, start)
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
	if ' ' <= r && r < 0x7f {
		return false // printable ASCII, most of any line
	}
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

// cell is one character of a line: line[off:off+n].
type cell struct{ off, n int }

// snippet returns the line as shown and the padding that puts a caret
// under byte column col (1-based). Tabs are kept, in the line and in the
// padding, so the caret lines up whatever the tab width. Bytes that are
// not UTF-8, control characters, line and paragraph separators and
// bidirectional formatting characters are shown as U+FFFD, so that a
// document cannot drive the terminal or make the snippet read differently
// from the bytes. Each character that overlaps one of masks (sorted, apart,
// in offsets of the file, where the line starts at base) is shown as '*'.
// A line longer than snippetWidth characters is cut to a window around
// the column.
//
// It reads at most [snippetReach] bytes before the column (and the rest
// of the character there) and snippetWidth+1 characters after it, never
// the whole line, and shows exactly what reading the whole line would.
func snippet(line []byte, col int, masks []span, base int) (text, pad string) {
	at := min(max(col-1, 0), len(line)) // byte offset of the caret
	lo := runeStart(line, max(at-snippetReach, 0))
	// The characters from lo on, as far as snippetWidth+1 after the
	// caret's: enough to place the window as if the whole line were read.
	// (When lo > 0, at least snippetWidth+1 whole characters come before
	// the caret's, so the window starts after lo and is cut there too.)
	cells := make([]cell, 0, snippetReach+utf8.UTFMax+snippetWidth)
	k := -1 // index of the character under the caret
	for off := lo; off < len(line) && (k < 0 || len(cells) <= k+snippetWidth); {
		_, n := utf8.DecodeRune(line[off:])
		if k < 0 && at < off+n {
			k = len(cells)
		}
		cells = append(cells, cell{off, n})
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
	}
	if start > 0 {
		pre = "..."
	}
	if end < len(cells) {
		post = "..."
	}
	var t, p strings.Builder
	t.WriteString(pre)
	p.WriteString(strings.Repeat(" ", len(pre)))
	if start < end {
		masks = masksFrom(masks, base+cells[start].off)
	}
	for i := start; i < end; i++ {
		c := cells[i]
		for len(masks) > 0 && masks[0].end <= base+c.off {
			masks = masks[1:]
		}
		r, _ := utf8.DecodeRune(line[c.off:])
		switch {
		case len(masks) > 0 && masks[0].start < base+c.off+c.n:
			t.WriteByte('*')
			r = '*'
		case r == utf8.RuneError && c.n == 1, hidden(r):
			t.WriteString("\uFFFD")
		default:
			t.Write(line[c.off : c.off+c.n])
		}
		if i < k {
			if r == '\t' {
				p.WriteByte('\t')
			} else {
				p.WriteByte(' ')
			}
		}
	}
	t.WriteString(post)
	return t.String(), p.String()
}

// runeStart returns where the character holding byte p of line starts,
// as decoding line from its start finds the characters (p itself when p
// is past the end). Decoding never takes a byte that can start a
// character (see [utf8.RuneStart]) as part of another one, so this looks
// back over at most [utf8.UTFMax]-1 continuation bytes.
func runeStart(line []byte, p int) int {
	if p >= len(line) {
		return p
	}
	for i := p; i >= 0 && i > p-utf8.UTFMax; i-- {
		if utf8.RuneStart(line[i]) {
			if _, n := utf8.DecodeRune(line[i:]); i+n > p {
				return i
			}
			return p // the bytes after that character stand alone
		}
	}
	return p
}
