package mcphost

import (
	"bytes"
	"context"
	"encoding/json"
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

// listCapture records the raw result of tools/list responses. Requests are
// matched to responses by JSON-RPC id. It is safe for concurrent use.
type listCapture struct {
	mu      sync.Mutex
	pending map[jsonrpc.ID]bool
	last    []byte
}

const methodListTools = "tools/list"

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

// sent notes an outgoing message.
func (c *listCapture) sent(m jsonrpc.Message) {
	r, ok := m.(*jsonrpc.Request)
	if !ok || r.Method != methodListTools || !r.ID.IsValid() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		c.pending = map[jsonrpc.ID]bool{}
	}
	c.pending[r.ID] = true
}

// received notes an incoming message.
func (c *listCapture) received(m jsonrpc.Message) {
	r, ok := m.(*jsonrpc.Response)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
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
	return len(c.pending) > 0
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
	c.cap.sent(m)
	return c.Connection.Write(ctx, m)
}

// maxCapture bounds how much of one response body is kept while looking
// for a tools/list result (go-sdk's own default frame limit).
const maxCapture = mcp.DefaultMaxLineLength

// httpRoundTripper adds the configured headers to requests for the
// server's origin, and reads along tools/list responses for the capture.
type httpRoundTripper struct {
	base    http.RoundTripper
	origin  string // scheme://host of the configured URL
	headers map[string]string
	cap     *listCapture
}

func newHTTPClient(cfg *ServerConfig, cap *listCapture) (*http.Client, *http.Transport, error) {
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
	req = req.Clone(req.Context())
	if req.URL.Scheme+"://"+req.URL.Host == t.origin {
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	track := false
	if req.Method == http.MethodPost && req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		if mayListTools(body) {
			if m, err := jsonrpc.DecodeMessage(body); err == nil {
				if r, ok := m.(*jsonrpc.Request); ok && r.Method == methodListTools {
					t.cap.sent(m)
					track = true
				}
			}
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || !track || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		resp.Body = &sniffBody{ReadCloser: resp.Body, cap: t.cap, sse: false}
	case "text/event-stream":
		resp.Body = &sniffBody{ReadCloser: resp.Body, cap: t.cap, sse: true}
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

// sniffBody reads along a response body (JSON or server-sent events) and
// reports each JSON-RPC message in it to the capture. Every message is
// reported before the bytes that complete it are returned to the reader,
// so go-sdk cannot act on a response before the capture has it.
type sniffBody struct {
	io.ReadCloser
	cap  *listCapture
	sse  bool
	off  bool   // gave up (too large, or nothing more wanted)
	buf  []byte // JSON: the body so far; SSE: the current line
	data []byte // SSE: the current event's data
}

func (b *sniffBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.feed(p[:n])
	}
	return n, err
}

func (b *sniffBody) feed(p []byte) {
	switch {
	case b.off:
	case b.sse:
		b.feedSSE(p)
	default:
		b.feedJSON(p)
	}
}

func (b *sniffBody) deliver(msg []byte) {
	m, err := jsonrpc.DecodeMessage(msg)
	if err == nil {
		b.cap.received(m)
	}
	if !b.cap.wantsResponse() {
		b.off = true
		b.buf, b.data = nil, nil
	}
}

func (b *sniffBody) feedJSON(p []byte) {
	b.buf = append(b.buf, p...)
	if len(b.buf) > maxCapture {
		b.off, b.buf = true, nil
		return
	}
	// A JSON-RPC message ends with '}': only then can the body be whole.
	if t := bytes.TrimRight(b.buf, " \t\r\n"); len(t) > 0 && t[len(t)-1] == '}' {
		if msg := bytes.TrimSpace(b.buf); validJSON(msg) {
			b.deliver(msg)
			b.buf = nil
		}
	}
}

func (b *sniffBody) feedSSE(p []byte) {
	for len(p) > 0 && !b.off {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			b.buf = append(b.buf, p...)
			if len(b.buf) > maxCapture {
				b.off, b.buf, b.data = true, nil, nil
			}
			return
		}
		b.buf = append(b.buf, p[:i]...)
		p = p[i+1:]
		line := bytes.TrimSuffix(b.buf, []byte("\r"))
		switch {
		case len(line) == 0:
			if len(b.data) > 0 {
				b.deliver(b.data)
			}
			b.data = b.data[:0]
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if len(b.data) > 0 {
				b.data = append(b.data, '\n')
			}
			b.data = append(b.data, v...)
			if len(b.data) > maxCapture {
				b.off, b.buf, b.data = true, nil, nil
				return
			}
		}
		b.buf = b.buf[:0]
	}
}

func validJSON(b []byte) bool { return json.Valid(b) }
