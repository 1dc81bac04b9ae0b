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

// MaxDepth is the deepest nesting of objects and arrays a message may
// have: 10000, the limit of the JSON decoders that read messages here and
// in go-sdk (jsontext and encoding/json refuse 10001). A deeper message
// is refused as such, "nested deeper than 10000 levels", before a decoder
// reports it as invalid JSON.
const MaxDepth = 10000

// checkMessage says what makes msg (one stdio line, one HTTP response
// body, one SSE event's data) other than one strictly readable JSON
// object, or "": a batch, not JSON, not one value, invalid UTF-8, a lone
// surrogate escape, a member name twice in an object, two names in an
// object that differ only by case, or nesting deeper than [MaxDepth]. Member names in the answer are
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
	c := checkers.Get().(*checker)
	defer c.release()
	return c.check(msg, red)
}

// checker is the reusable state of checkMessage.
type checker struct {
	rd     bytes.Reader
	dec    *jsontext.Decoder
	arena  []byte    // the unquoted names of the open objects
	spans  [][2]int  // their names in arena, while few
	frames []nameSet // one per open object or array
}

var checkers = sync.Pool{New: func() any {
	c := &checker{}
	c.dec = jsontext.NewDecoder(&c.rd)
	return c
}}

// maxPooledArena bounds the name arena a pooled checker keeps.
const maxPooledArena = 64 << 10

func (c *checker) release() {
	c.rd.Reset(nil)
	c.dec.Reset(&c.rd)
	if cap(c.arena) > maxPooledArena {
		c.arena = nil
	}
	for i := range c.frames {
		c.frames[i] = nameSet{}
	}
	c.arena, c.frames, c.spans = c.arena[:0], c.frames[:0], c.spans[:0]
	checkers.Put(c)
}

func (c *checker) check(msg []byte, red redactor) string {
	c.rd.Reset(msg)
	c.dec.Reset(&c.rd)
	d := c.dec
	for {
		// The next string is a name when the innermost object has an even
		// count of names and values so far.
		depth := d.StackDepth()
		if kind, n := d.StackIndex(depth); kind == '{' && n%2 == 0 && d.PeekKind() == '"' {
			raw, err := d.ReadValue()
			if err != nil {
				return describeSyntax(err)
			}
			start := len(c.arena)
			c.arena, err = jsontext.AppendUnquote(c.arena, raw)
			if err != nil {
				return describeSyntax(err)
			}
			f := &c.frames[len(c.frames)-1]
			if other, clash := c.add(f, start); clash {
				return fmt.Sprintf("it sent an object with member names %s and %s, which differ only by case (readers that ignore case take either)",
					quoteBytes([]byte(red.redact(other))), quoteBytes([]byte(red.redact(string(c.arena[start:])))))
			}
			continue
		}
		if depth >= MaxDepth {
			if k := d.PeekKind(); k == '{' || k == '[' {
				return fmt.Sprintf("it sent JSON nested deeper than %d levels, the most a message may have (at byte %d)", MaxDepth, d.InputOffset())
			}
		}
		tok, err := d.ReadToken()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return ""
			}
			return describeSyntax(err)
		}
		switch tok.Kind() {
		case '{', '[':
			c.frames = append(c.frames, nameSet{start: len(c.arena), spans: len(c.spans)})
		case '}', ']':
			f := c.frames[len(c.frames)-1]
			c.arena, c.spans = c.arena[:f.start], c.spans[:f.spans] // its names are done with
			c.frames[len(c.frames)-1] = nameSet{}
			c.frames = c.frames[:len(c.frames)-1]
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
func describeSyntax(err error) string {
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

// nameSet holds where the member names of one object are: from start in
// the checker's arena, and (while few) from spans in its spans; once
// many, by folded name.
type nameSet struct {
	start, spans int
	folded       map[string]string // folded -> original
}

const linearNames = 16

// add adds the name arena[from:] to f, the innermost object, and reports
// another name of f that it equals without regard to case.
func (c *checker) add(f *nameSet, from int) (string, bool) {
	arena := c.arena
	name := arena[from:]
	if f.folded == nil && len(c.spans)-f.spans < linearNames {
		for _, sp := range c.spans[f.spans:] {
			if o := arena[sp[0]:sp[1]]; foldEqual(o, name) && !bytes.Equal(o, name) {
				return string(o), true
			}
		}
		c.spans = append(c.spans, [2]int{from, len(arena)})
		return "", false
	}
	if f.folded == nil {
		f.folded = make(map[string]string, 2*linearNames)
		for _, sp := range c.spans[f.spans:] {
			o := arena[sp[0]:sp[1]]
			f.folded[fold(o)] = string(o)
		}
		c.spans = c.spans[:f.spans]
	}
	k := fold(name)
	if o, ok := f.folded[k]; ok && o != string(name) {
		return o, true
	}
	f.folded[k] = string(name)
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

func fold(s []byte) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range string(s) {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

func foldEqual(a, b []byte) bool {
	for len(a) > 0 && len(b) > 0 {
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if ra != rb && foldRune(ra) != foldRune(rb) {
			return false
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) == 0 && len(b) == 0
}

// CheckMessage says what makes msg (one JSON-RPC message as a peer sent
// it: a stdio line, an HTTP request or response body) other than one
// strictly readable JSON object, or "" when it is one: a batch, not JSON,
// more than one value, invalid UTF-8, a lone surrogate escape, a member
// name given twice in an object, two names in an object that differ
// only by case, or nesting deeper than [MaxDepth]. The answer begins "it sent" and names the peer's member
// names cut short. The MCP gateway (package serve) applies the same
// rules to what an agent sends as the client applies to servers.
func CheckMessage(msg []byte) string { return checkMessage(msg, redactor{}) }
