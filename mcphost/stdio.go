package mcphost

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioTransport is the MCP stdio transport over a server process's
// stdout and stdin: newline-delimited JSON-RPC 2.0 messages (MCP
// specification, "Transports", stdio). It takes the place of go-sdk's
// IOTransport so that one strict reader both checks a message (see
// wireGuard) and decodes it: what go-sdk acts on is exactly what was
// checked, read once, without a second, more lenient parser. Messages
// it writes are go-sdk's own encoding (jsonrpc.EncodeMessage).
type stdioTransport struct {
	r     io.ReadCloser
	w     io.WriteCloser
	guard *wireGuard
}

// Connect implements [mcp.Transport].
func (t *stdioTransport) Connect(context.Context) (mcp.Connection, error) {
	return newStdioConn(t.r, t.w, t.guard), nil
}

func newStdioConn(r io.ReadCloser, w io.WriteCloser, guard *wireGuard) *stdioConn {
	return &stdioConn{r: r, w: w, guard: guard, buf: make([]byte, 0, minStdioBuffer), writing: make(chan struct{}, 1)}
}

// minStdioBuffer is the read buffer a connection starts with (and goes
// back to after a long message); it grows to hold the longest message,
// up to maxCapture.
const minStdioBuffer = 16 << 10

// stdioConn is one stdio session's [mcp.Connection]. Read is called from
// one goroutine at a time (go-sdk's reader); Write is safe for concurrent
// use. Close unblocks a Read waiting on the pipe.
type stdioConn struct {
	r     io.ReadCloser
	w     io.WriteCloser
	guard *wireGuard

	buf     []byte // read from r, not handed on yet from start
	start   int
	scanned int   // bytes from start known to hold no newline
	rerr    error // r's error, returned once buf is used up

	writing   chan struct{} // holds a token while a line is written
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Read returns the next message: each non-blank line must pass the
// wireGuard's check and be a JSON-RPC 2.0 request, notification or
// response (decodeMessage). A line that is not is a protocol violation:
// it is recorded (see [Server.Health]) and returned as the error, which
// ends go-sdk's reading and fails the pending calls. At the end of the
// stream, or after Close, it returns io.EOF.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for {
		line, err := c.nextLine()
		if err != nil {
			if c.closed.Load() || errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := c.guard.check(line); err != nil {
			return nil, err
		}
		msg, err := decodeMessage(line)
		if err != nil {
			return nil, c.guard.fail("it sent a message that is not JSON-RPC 2.0: " + err.Error())
		}
		return msg, nil
	}
}

// nextLine returns the next line, its newline included (the last one
// may have none), valid until the next call. A line whose message (the
// line without its "\n" or "\r\n") is longer than maxCapture is a
// violation, also the last line of the stream. Each byte is searched for
// the newline once (scanned), so a long line that arrives a few bytes at
// a time costs time in proportion to its length, not its square. A
// partial line left when the connection is closed (by Close) is not a
// message: the server did not finish it.
func (c *stdioConn) nextLine() ([]byte, error) {
	for {
		if i := bytes.IndexByte(c.buf[c.start+c.scanned:], '\n'); i >= 0 {
			line := c.buf[c.start : c.start+c.scanned+i+1]
			c.start += c.scanned + i + 1
			c.scanned = 0
			if messageLen(line) > maxCapture {
				return nil, c.tooLong()
			}
			return line, nil
		}
		c.scanned = len(c.buf) - c.start
		if c.rerr != nil {
			if c.start < len(c.buf) && !c.closed.Load() {
				line := c.buf[c.start:]
				c.start, c.scanned = len(c.buf), 0
				if messageLen(line) > maxCapture {
					return nil, c.tooLong()
				}
				return line, nil
			}
			return nil, c.rerr
		}
		rest := len(c.buf) - c.start
		if rest > maxCapture+1 {
			// Not even a "\r" before the newline to come would leave a
			// message within the limit.
			return nil, c.tooLong()
		}
		switch {
		case rest == 0 && cap(c.buf) > 4*minStdioBuffer:
			c.buf = make([]byte, 0, minStdioBuffer) // after a long message
		case cap(c.buf)-rest < minStdioBuffer/4:
			grown := make([]byte, rest, 2*cap(c.buf)+minStdioBuffer)
			copy(grown, c.buf[c.start:])
			c.buf = grown
		case c.start > 0:
			c.buf = c.buf[:copy(c.buf, c.buf[c.start:])]
		}
		c.start = 0
		n, err := c.r.Read(c.buf[len(c.buf):cap(c.buf)])
		c.buf = c.buf[:len(c.buf)+n]
		if err != nil {
			c.rerr = err
		}
	}
}

// messageLen is the length of the message on line: without its "\n" or
// "\r\n".
func messageLen(line []byte) int {
	n := len(line)
	if n > 0 && line[n-1] == '\n' {
		n--
		if n > 0 && line[n-1] == '\r' {
			n--
		}
	}
	return n
}

// tooLong records a message over maxCapture as a violation, which ends
// the stream.
func (c *stdioConn) tooLong() error {
	c.rerr = c.guard.fail(fmt.Sprintf("it sent a message longer than %d bytes", maxCapture))
	c.buf, c.start, c.scanned = nil, 0, 0
	return c.rerr
}

// Write sends msg as one line. It returns when the line is written or
// when ctx is done, whichever is first: a server that does not read its
// stdin (the pipe is full) cannot hold a call past its deadline, nor the
// session's Close. A line whose writing began is written whole, in the
// background if ctx ended first, so that the stream stays readable (the
// request may then reach the server after its call failed: the outcome of
// such a call is unknown, as of any call that got no answer). Lines are
// written one at a time; a Write waiting for another ends with ctx too,
// having written nothing.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("marshaling message: %v", err)
	}
	data = append(data, '\n')
	select {
	case c.writing <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	w, ok := c.w.(deadlineWriter)
	if !ok || ctx.Done() == nil {
		// Nothing can end the write early (a server's stdin is an
		// *os.File pipe, which has deadlines).
		_, err := c.w.Write(data)
		<-c.writing
		return err
	}
	// The pipe's write deadline interrupts a write still blocked when ctx
	// ends; the rest of the line is then written in the background.
	var mu sync.Mutex
	finished, interrupted := false, false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			interrupted = true
			_ = w.SetWriteDeadline(time.Unix(1, 0))
		}
	})
	n, err := c.w.Write(data)
	mu.Lock()
	finished = true
	mu.Unlock()
	stop()
	if interrupted {
		_ = w.SetWriteDeadline(time.Time{})
		if n < len(data) && errors.Is(err, os.ErrDeadlineExceeded) {
			rest := data[n:]
			go func() {
				_, _ = c.w.Write(rest)
				<-c.writing
			}()
			return notReading(ctx)
		}
	}
	<-c.writing
	return err
}

// deadlineWriter is a pipe whose writes a deadline can interrupt (an
// *os.File pipe).
type deadlineWriter interface {
	SetWriteDeadline(time.Time) error
}

func notReading(ctx context.Context) error {
	return fmt.Errorf("the server is not reading its stdin: %w", ctx.Err())
}

// Close closes both pipes (not the process).
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.closeErr = errors.Join(c.r.Close(), c.w.Close())
	})
	return c.closeErr
}

// SessionID implements [mcp.Connection]: stdio has no session id.
func (c *stdioConn) SessionID() string { return "" }

// wireMessage is a JSON-RPC 2.0 message as it is read, each member as
// written (nil when absent), so that each is checked here and an error
// names the member.
type wireMessage struct {
	JSONRPC jsontext.Value `json:"jsonrpc"`
	ID      jsontext.Value `json:"id"`
	Method  jsontext.Value `json:"method"`
	Params  jsontext.Value `json:"params"`
	Result  jsontext.Value `json:"result"`
	Error   jsontext.Value `json:"error"`
}

type wireError struct {
	Code    jsontext.Value `json:"code"`
	Message jsontext.Value `json:"message"`
	Data    jsontext.Value `json:"data"`
}

// decodeMessage reads one message that passed checkMessage (one JSON
// object, valid UTF-8, member names unique even without regard to case)
// as go-sdk's jsonrpc.DecodeMessage would, more strictly: "jsonrpc" must
// be "2.0"; the id is absent, null, a string or an integer (go-sdk
// truncates a fractional number; here it is an error); with a "method"
// member (a string) it is a request (or a notification, without an id),
// else a response, which needs an id; its "error", when not null, is an
// object with an integer "code" and a string "message". JSON-RPC 2.0
// specification, sections 4 and 5.
func decodeMessage(line []byte) (jsonrpc.Message, error) {
	var w wireMessage
	if err := jsonv2.Unmarshal(line, &w); err != nil {
		return nil, errors.New("it is not a JSON object")
	}
	if s, ok := stringOf(w.JSONRPC); !ok || s != "2.0" {
		return nil, fmt.Errorf("its jsonrpc member is %s, not \"2.0\"", shown(w.JSONRPC))
	}
	id, err := decodeID(w.ID)
	if err != nil {
		return nil, err
	}
	if w.Method != nil {
		method, ok := stringOf(w.Method)
		if !ok {
			return nil, fmt.Errorf("its method is %s, not a string", shown(w.Method))
		}
		return &jsonrpc.Request{ID: id, Method: method, Params: raw(w.Params)}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("a response without an id")
	}
	r := &jsonrpc.Response{ID: id, Result: raw(w.Result)}
	if w.Error != nil && w.Error.Kind() != 'n' {
		var we wireError
		if w.Error.Kind() != '{' || jsonv2.Unmarshal(w.Error, &we) != nil {
			return nil, fmt.Errorf("its error member is %s, not an object", shown(w.Error))
		}
		code, err := strconv.ParseInt(string(we.Code), 10, 64)
		if we.Code.Kind() != '0' || err != nil {
			return nil, fmt.Errorf("its error code is %s, not an integer", shown(we.Code))
		}
		msg, ok := stringOf(we.Message)
		if !ok && we.Message != nil {
			return nil, fmt.Errorf("its error message is %s, not a string", shown(we.Message))
		}
		r.Error = &jsonrpc.Error{Code: code, Message: msg, Data: raw(we.Data)}
	}
	return r, nil
}

// stringOf returns the string v holds, when v is a JSON string.
func stringOf(v jsontext.Value) (string, bool) {
	var s string
	if v.Kind() != '"' || jsonv2.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// shown is v as an error shows it: "absent", its text when it is at most
// maxShownValue bytes, else only its kind and size. A value is shown
// whole or not at all, so that the redactor, which sees the whole error,
// finds any secret in it: a secret cut short would not match.
func shown(v jsontext.Value) string {
	switch {
	case v == nil:
		return "absent"
	case len(v) <= maxShownValue:
		return string(v)
	}
	kind := map[jsontext.Kind]string{'"': "a string", '{': "an object", '[': "an array", '0': "a number"}[v.Kind()]
	return fmt.Sprintf("%s of %d bytes", cmp.Or(kind, "a value"), len(v))
}

// maxShownValue bounds a value an error shows.
const maxShownValue = 40

func raw(v jsontext.Value) json.RawMessage {
	if v == nil {
		return nil
	}
	return json.RawMessage(v)
}

// maxExactID bounds a numeric id: the integers a float64 holds exactly,
// as go-sdk reads ids.
const maxExactID = 1 << 53

// decodeID reads a request id: absent or null is no id.
func decodeID(v jsontext.Value) (jsonrpc.ID, error) {
	if len(v) == 0 || v.Kind() == 'n' {
		return jsonrpc.ID{}, nil
	}
	switch v.Kind() {
	case '"':
		var s string
		if err := jsonv2.Unmarshal(v, &s); err != nil {
			return jsonrpc.ID{}, err
		}
		return jsonrpc.MakeID(s)
	case '0':
		if !bytes.ContainsAny(v, ".eE") {
			// An integer literal: exactly, or not at all.
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n < -maxExactID || n > maxExactID {
				return jsonrpc.ID{}, fmt.Errorf("its id %s is not an integer within ±2^53", v)
			}
			return jsonrpc.MakeID(float64(n))
		}
		var f float64
		if err := jsonv2.Unmarshal(v, &f); err != nil {
			return jsonrpc.ID{}, err
		}
		if f != math.Trunc(f) || math.Abs(f) > maxExactID {
			return jsonrpc.ID{}, fmt.Errorf("its id %s is not an integer within ±2^53", v)
		}
		return jsonrpc.MakeID(f)
	}
	return jsonrpc.ID{}, fmt.Errorf("its id is %s, not a string or an integer", v)
}
