package redact

import (
	"math/bits"
	"slices"
	"strings"
	"sync/atomic"
)

// matcher finds the shapes of [redactShapes] in a text read as tokens
// ([tokensAt]). Each shape is a bit-parallel shift-and automaton: bit j of
// its state is set where the text read so far ends with a reading of the
// shape's first j+1 positions.
type matcher struct {
	shapes   []compiled
	starters [256][]int32 // byte -> the shapes whose first position accepts it
	// pairs[c] holds d when some shape may start with a reading of c as
	// itself followed by d ([compiled.second]): where no match is under
	// way, a byte that is neither that nor the start of an escape is
	// passed over at the cost of one lookup.
	pairs [256][4]uint64
}

// compiled is one shape's tables.
type compiled struct {
	m, w int      // positions, words of state
	mask []uint64 // byte*w + word: the positions that accept the byte
	// second: the characters that may follow a first byte read as one
	// character: a byte position 1 accepts, or one that starts an escape
	// or a line break.
	second *[256]bool
}

// accepts reports whether position j of the shape accepts byte c.
func (p *compiled) accepts(j int, c byte) bool {
	return p.mask[int(c)*p.w+j>>6]>>(j&63)&1 != 0
}

func newMatcher(shapes []shape) *matcher {
	if len(shapes) == 0 {
		return nil
	}
	m := &matcher{shapes: make([]compiled, len(shapes))}
	for i, sh := range shapes {
		p := compiled{m: len(sh), w: (len(sh) + 63) / 64}
		p.mask = make([]uint64, 256*p.w)
		for j, set := range sh {
			for c := range 256 {
				if set[c>>6]>>(c&63)&1 != 0 {
					p.mask[c*p.w+j>>6] |= 1 << (j & 63)
				}
			}
		}
		p.second = new([256]bool)
		for _, c := range []byte("%\\+\r\n") {
			p.second[c] = true
		}
		for c := range 256 {
			if p.accepts(1, byte(c)) {
				p.second[c] = true
			}
			if p.accepts(0, byte(c)) {
				m.starters[c] = append(m.starters[c], int32(i))
			}
		}
		for c := range 256 {
			if !p.accepts(0, byte(c)) {
				continue
			}
			for d := range 256 {
				if p.second[d] {
					m.pairs[c][d>>6] |= 1 << (d & 63)
				}
			}
		}
		m.shapes[i] = p
	}
	return m
}

// progress is the state of one shape while a text is read: the state
// vectors as of the previous byte, and the states that tokens begun
// earlier reach at the bytes ahead.
type progress struct {
	active bool
	prevD  []uint64 // ends of tokens at the previous byte
	prevP  []uint64 // prevD and the carries: what the next reading continues
	c1, c2 []uint64 // carried over a CR, over an LF and the blanks after it
	ahead  []uint64 // maxToken slots of w words: states reached at byte q+k
	pend   uint32   // which slots of ahead are not zero (maxToken bits)
}

func newProgress(w int) *progress {
	b := make([]uint64, (4+maxToken)*w)
	return &progress{prevD: b[:w], prevP: b[w : 2*w], c1: b[2*w : 3*w], c2: b[3*w : 4*w], ahead: b[4*w:]}
}

// isBlank reports whether c indents a continued line.
func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// redact replaces every match in t, and returns t itself when there is
// none.
func (m *matcher) redact(t string) string {
	var (
		prog   = make([]*progress, len(m.shapes))
		active []int32
		toks   [maxReadings]reading
		spans  [][2]int
		found  map[[2]int]bool
		maxW   int
	)
	for i := range m.shapes {
		maxW = max(maxW, m.shapes[i].w)
	}
	x := make([]uint64, maxW)
	push := func(i int32, q int, tok *reading) {
		p := &m.shapes[i]
		st := prog[i]
		if st == nil {
			st = newProgress(p.w)
			prog[i] = st
		}
		x := x[:p.w]
		copy(x, st.prevP) // zero unless active
		for k := range tok.nb {
			shift(x)
			if k == 0 {
				x[0] |= 1 // a match may start at a reading
			}
			row := p.mask[int(tok.b[k])*p.w:][:p.w]
			nz := false
			for j := range x {
				x[j] &= row[j]
				nz = nz || x[j] != 0
			}
			if !nz {
				return
			}
		}
		end := q + tok.n
		slot := (end - 1) % maxToken
		a := st.ahead[slot*p.w:][:p.w]
		for j := range x {
			a[j] |= x[j]
		}
		st.pend |= 1 << slot
		if !st.active {
			st.active = true
			active = append(active, i)
		}
		if x[(p.m-1)>>6]>>((p.m-1)&63)&1 != 0 {
			if found == nil {
				found = map[[2]int]bool{}
			}
			if k := [2]int{end, int(i)}; !found[k] {
				found[k] = true
				spans = append(spans, [2]int{m.matchStart(p, t, end), end})
			}
		}
	}
	for q := 0; q < len(t); q++ {
		if len(active) == 0 {
			switch c := t[q]; c {
			case '%', '\\', '+':
			default:
				if q+1 >= len(t) || m.pairs[c][t[q+1]>>6]>>(t[q+1]&63)&1 == 0 {
					continue // no match is under way, and none starts here
				}
			}
		}
		nt := tokensAt(t, q, &toks)
		for k := range nt {
			tok := &toks[k]
			for _, i := range active {
				push(i, q, tok)
			}
			if tok.nb == 1 && q+tok.n >= len(t) {
				continue // every shape is at least 4 long: one byte is not a match
			}
			for _, i := range m.starters[tok.b[0]] {
				if st := prog[i]; (st == nil || !st.active) && (tok.nb > 1 || m.shapes[i].second[t[q+tok.n]]) {
					push(i, q, tok)
				}
			}
		}
		c := t[q]
		slot := q % maxToken
		kept := active[:0]
		for _, i := range active {
			p, st := &m.shapes[i], prog[i]
			d := st.ahead[slot*p.w:][:p.w]
			nz := false
			for j := range d {
				var c1, c2 uint64
				switch {
				case c == '\r':
					c1 = st.prevD[j]
				case c == '\n':
					c2 = st.prevD[j] | st.c1[j]
				case isBlank(c):
					c2 = st.c2[j]
				}
				st.c1[j], st.c2[j] = c1, c2
				st.prevD[j] = d[j]
				st.prevP[j] = d[j] | c1 | c2
				nz = nz || st.prevP[j] != 0
				d[j] = 0
			}
			st.pend &^= 1 << slot
			if nz || st.pend != 0 {
				kept = append(kept, i)
			} else {
				st.active = false
			}
		}
		active = kept
	}
	if len(spans) == 0 {
		return t
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	merged := spans[:1]
	for _, sp := range spans[1:] {
		if last := &merged[len(merged)-1]; sp[0] < last[1] {
			last[1] = max(last[1], sp[1])
		} else {
			merged = append(merged, sp)
		}
	}
	var b strings.Builder
	b.Grow(len(t))
	prev := 0
	for _, sp := range merged {
		b.WriteString(t[prev:sp[0]])
		b.WriteString(Redacted)
		for _, r := range []byte(t[sp[0]:sp[1]]) {
			if r == '\n' || r == '\r' {
				b.WriteByte(r)
			}
		}
		prev = sp[1]
	}
	b.WriteString(t[prev:])
	return b.String()
}

// shift moves every state one position on (bit j to bit j+1).
func shift(x []uint64) {
	for j := len(x) - 1; j > 0; j-- {
		x[j] = x[j]<<1 | x[j-1]>>63
	}
	x[0] <<= 1
}

// matchStart returns where the earliest reading of shape p that ends at
// end starts: it reads t backwards from end with the same tokens and line
// breaks as the forward pass, the state being how many of the shape's last
// positions have been read (bit j: j positions).
func (m *matcher) matchStart(p *compiled, t string, end int) int {
	w := (p.m + 1 + 63) / 64
	ring := make([]uint64, (maxToken+1)*w) // E at r, slot r%(maxToken+1)
	at := func(r int) []uint64 { return ring[(r%(maxToken+1))*w:][:w] }
	buf := make([]uint64, 5*w)
	r1, bl1, lf1 := buf[:w], buf[w:2*w], buf[2*w:3*w] // R, blanks, LF at q+1
	x, rq := buf[3*w:4*w], buf[4*w:]
	mid := func(v []uint64, j int) uint64 { // v[j] without bits 0 and m
		v2 := v[j]
		if j == 0 {
			v2 &^= 1
		}
		if j == p.m>>6 {
			v2 &^= 1 << (p.m & 63)
		}
		return v2
	}
	at(end)[0] = 1
	start := -1
	var toks [maxReadings]reading
	empty := 0
	for q := end - 1; q >= 0 && empty < maxToken; q-- {
		clear(rq)
		nt := tokensAt(t, q, &toks)
		for k := range nt {
			tok := &toks[k]
			r := q + tok.n
			if r > end {
				continue
			}
			copy(x, at(r))
			for bi := tok.nb - 1; bi >= 0; bi-- {
				backStep(p, x, tok.b[bi])
				if bi > 0 { // a reading starts at a reading, not inside one
					x[p.m>>6] &^= 1 << (p.m & 63)
				}
			}
			for j := range rq {
				rq[j] |= x[j]
			}
		}
		if rq[p.m>>6]>>(p.m&63)&1 != 0 {
			start = q
			rq[p.m>>6] &^= 1 << (p.m & 63)
		}
		c := t[q]
		e := at(q)
		nz := false
		for j := range e {
			var bl, lf, cr uint64
			switch {
			case isBlank(c):
				bl = mid(r1, j) | bl1[j]
			case c == '\n':
				lf = mid(r1, j) | bl1[j]
			case c == '\r':
				cr = mid(r1, j) | lf1[j]
			}
			e[j] = rq[j] | lf | cr
			r1[j], bl1[j], lf1[j] = rq[j], bl, lf
			nz = nz || e[j] != 0 || bl != 0
		}
		if nz {
			empty = 0
		} else {
			empty++
		}
	}
	if start < 0 { // cannot happen: the forward pass found a reading
		startMisses.Add(1)
		start = max(0, end-p.m*maxToken)
	}
	return start
}

// startMisses counts the matches [matcher.matchStart] found no start for
// (and redacted from as far back as the shape could reach): none, unless
// the forward and backward readings disagree. The tests read it.
var startMisses atomic.Int64

// backStep moves each state j of x to j+1 where the shape's position
// m-1-j accepts c, and drops it elsewhere.
func backStep(p *compiled, x []uint64, c byte) {
	var y [8]uint64
	out := y[:0]
	if len(x) > len(y) {
		out = make([]uint64, 0, len(x))
	}
	out = out[:len(x)]
	clear(out)
	for wi, word := range x {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			word &= word - 1
			j := wi<<6 | b
			if j < p.m && p.accepts(p.m-1-j, c) {
				out[(j+1)>>6] |= 1 << ((j + 1) & 63)
			}
		}
	}
	copy(x, out)
}
