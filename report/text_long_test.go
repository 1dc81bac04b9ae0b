package report

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openplaybook/openplaybook/diag"
)

// oneLine returns a minified one-line document of about size bytes, with
// ASCII, two-byte and four-byte characters and tabs in its one string, and
// n diagnostics spread evenly along the line.
func oneLine(size, n int) (File, []diag.Diagnostic) {
	const head, tail = `{"openplaybook":"1.6","manifest":{"description":"`, `"}}`
	const unit = "refund the charge, caf\u00e9 \U0001F600\tthen wait; "
	body := strings.Repeat(unit, max(size-len(head)-len(tail), 0)/len(unit))
	src := head + body + tail
	ds := make([]diag.Diagnostic, n)
	for i := range ds {
		ds[i] = diag.Diagnostic{
			File: "min.json", Line: 1, Column: 1 + i*len(src)/n,
			Severity: diag.Error, Rule: "r", Message: fmt.Sprintf("problem %d", i),
		}
	}
	return File{Name: "min.json", Src: []byte(src)}, ds
}

// TestTextLongLineBounded renders 1,000 diagnostics on a 1 MB one-line
// document: each diagnostic may only cost a bounded window of its line,
// never the whole line, so both the output and the memory allocated to
// make it are bounded by the number of diagnostics, not by their number
// times the length of the line. (Time is left to BenchmarkTextLongLine.)
func TestTextLongLineBounded(t *testing.T) {
	f, ds := oneLine(1<<20, 1000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out := render(t, "text", []File{f}, ds)
	runtime.ReadMemStats(&after)

	// Per diagnostic: its header line, and two snippet lines of at most
	// snippetWidth characters of up to 4 bytes, with "..." on each side.
	const perDiag = 64 + 2*(16+4*snippetWidth+6)
	if len(out) > len(ds)*perDiag {
		t.Errorf("output is %d bytes for %d diagnostics, want at most %d", len(out), len(ds), len(ds)*perDiag)
	}
	if got := strings.Count(out, "\n"); got != 3*len(ds)+1 {
		t.Errorf("output has %d lines, want %d", got, 3*len(ds)+1)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	if limit := uint64(16*len(out) + 2*len(f.Src)); alloc > limit {
		t.Errorf("rendering allocated %d bytes, want at most %d: the cost grows with the length of the line", alloc, limit)
	}
}

// BenchmarkTextLongLine renders diagnostics on minified one-line
// documents: few diagnostics on a huge line, and many on a long one.
func BenchmarkTextLongLine(b *testing.B) {
	for _, bc := range []struct {
		name    string
		size, n int
	}{
		{"16MiB-10diags", 16 << 20, 10},
		{"50KB-5000diags", 50_000, 5000},
	} {
		f, ds := oneLine(bc.size, bc.n)
		files := []File{f}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var sb strings.Builder
				if err := Write(&sb, "text", files, ds, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// snippetWholeLine is the snippet of the text format as it was before
// [snippet] read a bounded window: it reads the whole line. It is the
// reference [snippet] must agree with.
func snippetWholeLine(line []byte, col int) (text, pad string) {
	at := min(max(col-1, 0), len(line))
	var cells []string
	k := -1
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

// TestSnippetWindowAgrees: reading a window of the line shows exactly
// what reading the whole line did, for lines of every length around the
// cut, of characters of every width, with bytes that are not UTF-8 (runs
// of continuation bytes, cut sequences), at every column.
func TestSnippetWindowAgrees(t *testing.T) {
	pieces := []string{"a", "\t", "\u00e9", "\u20ac", "\U0001F600", "\xff", "\x80", "\x80\x80\x80\x80", "\xe2\x82", "\xf0\x9f\x98", "\x1b", "\u202e"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		var b strings.Builder
		n := rng.IntN(3 * snippetReach)
		for b.Len() < n {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		line := []byte(b.String())
		for _, col := range []int{0, 1, 2, rng.IntN(len(line) + 2), len(line) / 2, len(line) - snippetReach, len(line) - 3, len(line), len(line) + 1, len(line) + 9} {
			text, pad := snippet(line, col, nil, 0)
			wantText, wantPad := snippetWholeLine(line, col)
			if text != wantText || pad != wantPad {
				t.Fatalf("snippet(%q, %d)\n = %q, %q\nwant %q, %q", line, col, text, pad, wantText, wantPad)
			}
		}
	}
}
