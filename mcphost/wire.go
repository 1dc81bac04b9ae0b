package mcphost

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Why strict: go-sdk reads a server's messages leniently. It accepts a
// JSON-RPC batch (an array of messages), keeps the last of duplicate
// member names, and some of its (and this package's) decoding matches
// member names without regard to case, so {"result":A,"Result":B} may
// read as A or as B depending on the reader; invalid UTF-8 and lone
// surrogate escapes become U+FFFD. A message that two readers can read
// differently is refused instead: every message a server sends is checked
// here before go-sdk decodes it, and a server that sends one such message
// is a server that breaks the protocol: it is marked unhealthy and its
// session is closed.

// ErrProtocol is wrapped by the errors of a server that sent a message
// this package refuses (see [Server.Health]).
var ErrProtocol = errors.New("MCP protocol error")

// protocolError is the first refused message of a server.
type protocolError struct {
	what string // what was wrong, redacted
}

func (e *protocolError) Error() string { return "the server broke the protocol: " + e.what }
func (e *protocolError) Unwrap() error { return ErrProtocol }

// errNotSent marks a call refused before anything was sent.
var errNotSent = errors.New("not sent")

// wireGuard records the first protocol violation of a server. It is safe
// for concurrent use.
type wireGuard struct {
	red    redactor
	onFail func() // called once, in its own goroutine, at the first violation

	mu  sync.Mutex
	err *protocolError
}

// violation returns the first violation, or nil.
func (g *wireGuard) violation() *protocolError {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// fail records a violation (the first one is kept) and returns the
// recorded one.
func (g *wireGuard) fail(what string) *protocolError {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		g.err = &protocolError{what: g.red.redact(what)}
		if g.onFail != nil {
			go g.onFail()
		}
	}
	return g.err
}

// check checks one message; a refused one is recorded and returned.
func (g *wireGuard) check(msg []byte) error {
	if what := checkMessage(msg, g.red); what != "" {
		return g.fail(what)
	}
	return nil
}

// checkMessage says what makes msg (one stdio line, one HTTP response
// body, one SSE event's data) other than one strictly readable JSON
// object, or "": a batch, not JSON, not one value, invalid UTF-8, a lone
// surrogate escape, a member name twice in an object, or two names in an
// object that differ only by case. Member names in the answer are
// redacted with red and cut short. It is one pass over msg.
func checkMessage(msg []byte, red redactor) string {
	msg = bytes.TrimLeft(msg, " \t\r\n")
	if len(msg) == 0 {
		return "it sent an empty message"
	}
	switch msg[0] {
	case '{':
	case '[':
		return "it sent a JSON-RPC batch (a JSON array); batches are refused"
	default:
		return "it sent a message that is not a JSON object"
	}
	d := jsontext.NewDecoder(bytes.NewReader(msg))
	var frames []nameSet // one per open object; nil for an open array
	for {
		tok, err := d.ReadToken()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return ""
			}
			return describeSyntax(err, d.StackDepth() == 0)
		}
		switch k := tok.Kind(); k {
		case '{':
			frames = append(frames, nameSet{isObject: true})
		case '[':
			frames = append(frames, nameSet{})
		case '}', ']':
			frames = frames[:len(frames)-1]
		case '"':
			// A string is a name when the object it is in has an odd count
			// of names and values (this one included).
			depth := d.StackDepth()
			if kind, n := d.StackIndex(depth); kind == '{' && n%2 == 1 {
				f := &frames[len(frames)-1]
				if other, clash := f.add(tok.String()); clash {
					return fmt.Sprintf("it sent an object with member names %s and %s, which differ only by case (readers that ignore case take either)",
						quoteBytes([]byte(red.redact(other))), quoteBytes([]byte(red.redact(tok.String()))))
				}
			}
		}
		if d.StackDepth() == 0 {
			// The message is complete: anything after it but blanks is
			// a second value.
			if _, err := d.ReadToken(); !errors.Is(err, io.EOF) {
				return "it sent more than one JSON value in one message"
			}
			return ""
		}
	}
}

// describeSyntax says what a jsontext error means, without the message's
// text.
func describeSyntax(err error, top bool) string {
	var se *jsontext.SyntacticError
	off := ""
	if errors.As(err, &se) {
		off = fmt.Sprintf(" (at byte %d)", se.ByteOffset)
	}
	s := err.Error()
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		return "it sent an object with a member name twice" + off
	case strings.Contains(s, "surrogate"):
		return "it sent a string with a lone surrogate escape such as \\ud800" + off
	case strings.Contains(s, "UTF-8"):
		return "it sent invalid UTF-8" + off
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "it sent an incomplete JSON value"
	default:
		return "it sent invalid JSON" + off
	}
}

// nameSet holds the member names of one object, folded, to find names
// that differ only by case. Small objects are searched linearly.
type nameSet struct {
	isObject bool
	names    []string          // original names, while few
	folded   map[string]string // folded -> original, once many
}

const linearNames = 16

// add adds name and reports another name of the set that it equals
// without regard to case.
func (s *nameSet) add(name string) (string, bool) {
	if s.folded == nil && len(s.names) < linearNames {
		for _, o := range s.names {
			if o != name && foldEqual(o, name) {
				return o, true
			}
		}
		s.names = append(s.names, name)
		return "", false
	}
	if s.folded == nil {
		s.folded = make(map[string]string, 2*linearNames)
		for _, o := range s.names {
			s.folded[fold(o)] = o
		}
		s.names = nil
	}
	f := fold(name)
	if o, ok := s.folded[f]; ok && o != name {
		return o, true
	}
	s.folded[f] = name
	return "", false
}

// foldRune returns the smallest rune that r equals under Unicode simple
// case folding: two names are case variants when their runes fold alike
// (this is coarser than any case-insensitive matching a JSON decoder
// does: "K", "k" and the Kelvin sign all fold to "K").
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		}
		return r
	}
	min := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < min {
			min = f
		}
	}
	return min
}

func fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

func foldEqual(a, b string) bool {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb && foldRune(ra) != foldRune(rb) {
			return false
		}
		a, b = a[na:], b[nb:]
	}
	return a == "" && b == ""
}

// lineGate sits between a stdio server's stdout and go-sdk: it hands on
// one whole line at a time, and only a line that checkMessage accepts (or
// a blank one). At a refused line it returns the violation as its read
// error, which ends go-sdk's reading and fails the pending calls.
type lineGate struct {
	r     io.ReadCloser
	guard *wireGuard

	buf  []byte // read from r, not yet split into lines
	line []byte // the current line, incomplete
	out  []byte // checked bytes to hand on, from off
	off  int
	err  error // to return once out is handed on
	rbuf []byte
}

func newLineGate(r io.ReadCloser, g *wireGuard) *lineGate {
	return &lineGate{r: r, guard: g, rbuf: make([]byte, 64<<10)}
}

func (g *lineGate) Close() error { return g.r.Close() }

func (g *lineGate) Read(p []byte) (int, error) {
	for g.off == len(g.out) {
		g.out, g.off = g.out[:0], 0
		if g.err != nil {
			return 0, g.err
		}
		n, err := g.r.Read(g.rbuf)
		g.take(g.rbuf[:n])
		if err != nil && g.err == nil {
			if len(g.line) > 0 {
				// A last line without a newline is still a message to go-sdk.
				g.pass(g.line)
				g.line = nil
			}
			if g.err == nil {
				g.err = err
			}
		}
	}
	n := copy(p, g.out[g.off:])
	g.off += n
	return n, nil
}

// take splits p into lines, checking each whole one.
func (g *lineGate) take(p []byte) {
	for len(p) > 0 && g.err == nil {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			g.line = append(g.line, p...)
			if len(g.line) > maxCapture {
				g.err = g.guard.fail(fmt.Sprintf("it sent a message longer than %d bytes", maxCapture))
				g.line = nil
			}
			return
		}
		var line []byte
		if len(g.line) == 0 {
			line = p[:i+1]
		} else {
			g.line = append(g.line, p[:i+1]...)
			line = g.line
		}
		p = p[i+1:]
		g.pass(line)
		g.line = g.line[:0]
	}
}

// pass checks one line and queues it to hand on.
func (g *lineGate) pass(line []byte) {
	if len(bytes.TrimSpace(line)) == 0 {
		g.out = append(g.out, line...)
		return
	}
	if err := g.guard.check(line); err != nil {
		g.err = err
		return
	}
	g.out = append(g.out, line...)
}
