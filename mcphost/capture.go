package mcphost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Why capture: go-sdk decodes a tools/list result into [mcp.Tool], whose
// Annotations.ReadOnlyHint (and IdempotentHint) is a plain bool, so an
// absent readOnlyHint and an explicit false decode alike; and schemas
// decode to map[string]any, losing member order and number spelling. So
// the raw result of each tools/list request is kept as it came off the
// wire, next to go-sdk's decoding: stdio by wrapping the connection,
// streamable HTTP by reading along the response body (wrapping that
// connection would hide go-sdk's unexported session hooks from it).

// listCapture records the raw result of tools/list responses, and of the
// tools/call responses that [Server.Call] asks for (through a rawSlot in
// the request's context). Requests are matched to responses by JSON-RPC
// id. It is safe for concurrent use.
type listCapture struct {
	mu      sync.Mutex
	pending map[jsonrpc.ID]bool
	last    []byte
	calls   map[jsonrpc.ID]*rawSlot
}

const (
	methodListTools = "tools/list"
	methodCallTool  = "tools/call"
)

// rawSlot receives the raw result of one tools/call request.
type rawSlot struct {
	mu     sync.Mutex
	raw    []byte
	id     jsonrpc.ID
	hasID  bool
	filled bool
}

func (r *rawSlot) get() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.raw
}

type rawSlotKey struct{}

// withRawSlot returns ctx carrying slot: a tools/call request sent with
// it has its raw result put there.
func withRawSlot(ctx context.Context, slot *rawSlot) context.Context {
	return context.WithValue(ctx, rawSlotKey{}, slot)
}

func rawSlotFrom(ctx context.Context) *rawSlot {
	if ctx == nil {
		return nil
	}
	s, _ := ctx.Value(rawSlotKey{}).(*rawSlot)
	return s
}

// reset forgets pending requests and captured results; call it before a
// tools/list request whose result is wanted.
func (c *listCapture) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = map[jsonrpc.ID]bool{}
	c.last = nil
}

// take returns the raw result of the last tools/list response since
// reset, or nil.
func (c *listCapture) take() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.last
	c.last = nil
	return l
}

// peek is what take returns, without taking it.
func (c *listCapture) peek() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// forget stops waiting for slot's response.
func (c *listCapture) forget(slot *rawSlot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.hasID && c.calls[slot.id] == slot {
		delete(c.calls, slot.id)
	}
}

// sent notes an outgoing message, sent with ctx.
func (c *listCapture) sent(ctx context.Context, m jsonrpc.Message) {
	r, ok := m.(*jsonrpc.Request)
	if !ok || !r.ID.IsValid() {
		return
	}
	switch r.Method {
	case methodListTools:
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.pending == nil {
			c.pending = map[jsonrpc.ID]bool{}
		}
		c.pending[r.ID] = true
	case methodCallTool:
		slot := rawSlotFrom(ctx)
		if slot == nil {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		slot.mu.Lock()
		defer slot.mu.Unlock()
		if slot.filled {
			return
		}
		if c.calls == nil {
			c.calls = map[jsonrpc.ID]*rawSlot{}
		}
		if slot.hasID {
			delete(c.calls, slot.id) // a retry under a new id
		}
		slot.id, slot.hasID = r.ID, true
		c.calls[r.ID] = slot
	}
}

// received notes an incoming message.
func (c *listCapture) received(m jsonrpc.Message) {
	r, ok := m.(*jsonrpc.Response)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if slot := c.calls[r.ID]; slot != nil {
		delete(c.calls, r.ID)
		slot.mu.Lock()
		if r.Error == nil {
			slot.raw = bytes.Clone(r.Result)
		}
		slot.filled = true
		slot.mu.Unlock()
		return
	}
	if !c.pending[r.ID] {
		return
	}
	delete(c.pending, r.ID)
	if r.Error == nil {
		c.last = bytes.Clone(r.Result)
	}
}

// wantsResponse reports whether a tools/list response is outstanding.
func (c *listCapture) wantsResponse() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) > 0 || len(c.calls) > 0
}

// captureTransport wraps a stdio transport's connection so that it
// reports messages to a listCapture.
type captureTransport struct {
	inner mcp.Transport
	cap   *listCapture
}

func (t *captureTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &captureConn{Connection: conn, cap: t.cap}, nil
}

type captureConn struct {
	mcp.Connection
	cap *listCapture
}

func (c *captureConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err == nil && m != nil {
		c.cap.received(m)
	}
	return m, err
}

func (c *captureConn) Write(ctx context.Context, m jsonrpc.Message) error {
	c.cap.sent(ctx, m)
	return c.Connection.Write(ctx, m)
}

// maxCapture bounds one message from a server (go-sdk's own default
// frame limit, for stdio lines and SSE events alike).
const maxCapture = mcp.DefaultMaxLineLength

// httpRoundTripper adds the configured headers to requests for the
// server's origin, checks every message of a successful response (see
// wireGuard) before go-sdk reads it, and reads along tools/list and
// tools/call responses for the capture.
type httpRoundTripper struct {
	base    http.RoundTripper
	origin  string // scheme://host of the configured URL
	headers map[string]string
	cap     *listCapture
	guard   *wireGuard
}

func newHTTPClient(cfg *ServerConfig, cap *listCapture, guard *wireGuard) (*http.Client, *http.Transport, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, nil, err
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	rt := &httpRoundTripper{
		base:    base,
		origin:  u.Scheme + "://" + u.Host,
		headers: cfg.Headers,
		cap:     cap,
		guard:   guard,
	}
	client := &http.Client{
		Transport: rt,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			return fmt.Errorf("the server redirected to %s; redirects are refused so that headers are not sent elsewhere", redactURL(req.URL.String()))
		},
	}
	return client, base, nil
}

func (t *httpRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if v := t.guard.violation(); v != nil {
		// Nothing more is sent to a server that broke the protocol.
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, v
	}
	req = req.Clone(req.Context())
	if req.URL.Scheme+"://"+req.URL.Host == t.origin {
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	if req.Method == http.MethodPost && req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		// Only a tools/list request, or a tools/call whose raw result
		// [Server.Call] asked for, is decoded again here (not every
		// tools/call with its arguments).
		if rawSlotFrom(req.Context()) != nil || mayListTools(body) {
			if m, err := jsonrpc.DecodeMessage(body); err == nil {
				t.cap.sent(req.Context(), m)
			}
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		// go-sdk reads an error status's body only for a JSON-RPC error
		// to show, and fails the call in any case.
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		resp.Body = &gateBody{ReadCloser: resp.Body, cap: t.cap, guard: t.guard, sse: false}
	case "text/event-stream":
		resp.Body = &gateBody{ReadCloser: resp.Body, cap: t.cap, guard: t.guard, sse: true}
	}
	return resp, nil
}

// mayListTools reports whether a request body may be a tools/list
// request, so that other requests (tools/call with its arguments) are not
// decoded a second time here. Without a backslash in the body every JSON
// string is spelled literally, so a tools/list method shows as the bytes
// "tools/list"; with one, the method may be escaped ("tools\/list"), and
// the body is decoded to know.
func mayListTools(body []byte) bool {
	return bytes.Contains(body, []byte(`"`+methodListTools+`"`)) || bytes.IndexByte(body, '\\') >= 0
}

// gateBody stands between a response body (JSON or server-sent events)
// and go-sdk. It hands on a JSON body only once all of it is read and
// checked, and an event stream one whole event at a time, each checked
// (as go-sdk reads it: the data lines joined) before any of its bytes are
// handed on; a refused message ends the body with the violation as its
// read error. Each message is reported to the capture before go-sdk can
// act on it.
type gateBody struct {
	io.ReadCloser
	cap   *listCapture
	guard *wireGuard
	sse   bool

	out  []byte // checked bytes to hand on, from off
	off  int
	err  error // to return once out is handed on
	rbuf []byte

	// SSE
	line    []byte // the current line, incomplete
	event   []byte // the current event's bytes so far
	data    []byte // its data lines, joined
	hasData bool
	name    string // its event name
}

func (b *gateBody) Read(p []byte) (int, error) {
	for b.off == len(b.out) {
		b.out, b.off = b.out[:0], 0
		if b.err != nil {
			return 0, b.err
		}
		if !b.sse {
			b.readJSON()
			continue
		}
		if b.rbuf == nil {
			b.rbuf = make([]byte, 32<<10)
		}
		n, err := b.ReadCloser.Read(b.rbuf)
		b.feedSSE(b.rbuf[:n])
		if err != nil && b.err == nil {
			if errors.Is(err, io.EOF) && len(b.line) > 0 {
				b.sseLine(b.line) // a last line without a newline
				b.line = nil
			}
			if errors.Is(err, io.EOF) && b.err == nil && (len(b.event) > 0) {
				b.endEvent() // go-sdk dispatches an unterminated last event
			}
			if b.err == nil {
				b.err = err
			}
		}
	}
	n := copy(p, b.out[b.off:])
	b.off += n
	return n, nil
}

// readJSON reads, checks and reports the whole body.
func (b *gateBody) readJSON() {
	body, err := io.ReadAll(io.LimitReader(b.ReadCloser, maxCapture+1))
	switch {
	case err != nil:
		b.err = err
	case len(body) > maxCapture:
		b.err = b.guard.fail(fmt.Sprintf("it sent a response body longer than %d bytes", maxCapture))
	default:
		if err := b.guard.check(body); err != nil {
			b.err = err
			return
		}
		b.deliver(body)
		b.out, b.err = body, io.EOF
	}
}

func (b *gateBody) deliver(msg []byte) {
	if !b.cap.wantsResponse() {
		return
	}
	if m, err := jsonrpc.DecodeMessage(msg); err == nil {
		b.cap.received(m)
	}
}

func (b *gateBody) feedSSE(p []byte) {
	for len(p) > 0 && b.err == nil {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			b.line = append(b.line, p...)
			if len(b.line)+len(b.event) > maxCapture {
				b.err = b.guard.fail(fmt.Sprintf("it sent an event longer than %d bytes", maxCapture))
			}
			return
		}
		b.line = append(b.line, p[:i+1]...)
		p = p[i+1:]
		b.sseLine(b.line)
		b.line = b.line[:0]
	}
}

// sseLine takes one line of the stream (as go-sdk's scanner reads it).
func (b *gateBody) sseLine(raw []byte) {
	b.event = append(b.event, raw...)
	if len(b.event) > maxCapture {
		b.err = b.guard.fail(fmt.Sprintf("it sent an event longer than %d bytes", maxCapture))
		return
	}
	line := bytes.TrimRight(raw, "\r\n")
	if len(line) == 0 {
		b.endEvent()
		return
	}
	key, val, found := bytes.Cut(line, []byte{':'})
	if !found {
		return // go-sdk refuses the stream
	}
	switch string(key) {
	case "event":
		b.name = string(bytes.TrimSpace(val))
	case "data":
		if b.hasData {
			b.data = append(b.data, '\n')
		}
		b.data = append(b.data, bytes.TrimSpace(val)...)
		b.hasData = true
	}
}

// endEvent checks the event just ended and hands it on.
func (b *gateBody) endEvent() {
	if len(b.data) > 0 && (b.name == "" || b.name == "message") {
		// go-sdk decodes this event's data as a message.
		if err := b.guard.check(b.data); err != nil {
			b.err = err
			return
		}
		b.deliver(b.data)
	}
	b.out = append(b.out, b.event...)
	b.event, b.data, b.hasData, b.name = b.event[:0], b.data[:0], false, ""
}
