package mcphost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/internal/tracectx"
)

// Server is a live session with one MCP server. Its methods are safe for
// concurrent use.
type Server struct {
	name string
	cfg  ServerConfig
	red  redactor

	cs    *mcp.ClientSession
	proc  *process        // stdio servers; nil for HTTP
	httpT *http.Transport // HTTP servers; nil for stdio
	cap   *listCapture
	guard *wireGuard // the first protocol violation

	// ready is closed when Connect returns; ok says it succeeded.
	ready chan struct{}
	ok    bool

	// listMu serializes listings (the capture relies on it) and guards
	// the cache.
	listMu   sync.Mutex
	cached   []Tool
	cachedAt uint64 // the epoch the cached listing began at
	hasCache bool
	rawPages map[*mcp.ListToolsResult][]byte

	// fresh coalesces the listings [Server.FreshTools] asks for.
	fresh freshListings

	mu      sync.Mutex
	epoch   uint64        // list_changed notifications received
	changed chan struct{} // closed at the next one

	connecting bool // in Connect: failures show the server's stderr

	closeOnce sync.Once
	closeErr  error
}

// Connect starts (stdio) or reaches (HTTP) the server cfg describes,
// initializes an MCP session and lists its tools, all within cfg.Timeout
// (default 10 s) and ctx. The listing is kept: [Server.Tools] returns it
// until the server says its tool list changed.
//
// A server that cannot be reached, exits, writes anything but JSON-RPC
// messages to stdout, or does not answer in time is reported as an
// [*Error] with the last lines of its stderr, and a started process is
// killed: Connect never leaves one behind when it fails. Servers that
// exit or write non-JSON are reported as soon as that happens, without
// waiting for the timeout.
func Connect(ctx context.Context, cfg ServerConfig) (*Server, error) {
	cfg.Env = cloneMap(cfg.Env)
	cfg.Headers = cloneMap(cfg.Headers)
	cfg.Args = append([]string(nil), cfg.Args...)
	s := &Server{
		name:    cfg.Name,
		cfg:     cfg,
		red:     redactor{secrets: cfg.secrets(), url: cfg.URL, issued: &issued{}},
		cap:     &listCapture{},
		changed: make(chan struct{}),
		ready:   make(chan struct{}),

		connecting: true,
	}
	s.guard = &wireGuard{red: s.red, onFail: s.closeBroken}
	defer close(s.ready)
	if err := cfg.check(); err != nil {
		return nil, s.newError("config", err.Error(), err)
	}

	timeout := cfg.timeout()
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, timeout, errTimeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var transport mcp.Transport
	if cfg.Command != "" {
		p, err := startProcess(&s.cfg)
		if err != nil {
			return nil, s.newError("start", err.Error(), err)
		}
		s.proc = p
		stop := p.watch(ctx, cancel)
		defer stop()
		transport = &captureTransport{inner: p.transport(s.guard), cap: s.cap}
	} else {
		client, base, err := newHTTPClient(&s.cfg, s.cap, s.guard)
		if err != nil {
			return nil, s.newError("config", err.Error(), err)
		}
		s.httpT = base
		st := &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: client}
		if cfg.OAuth != nil {
			if st.OAuthHandler, err = oauthHandler(cfg.Name, cfg.OAuth, s.red.issued); err != nil {
				return nil, s.newError("config", err.Error(), err)
			}
		}
		transport = st
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "openplaybook", Version: clientVersion()}, &mcp.ClientOptions{
		// No roots, sampling or elicitation: this client only lists and
		// calls tools.
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { s.noteChanged() },
	})
	client.AddSendingMiddleware(s.rawListSchemas)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		e := s.failure(ctx, "initialize", err)
		s.abort()
		return nil, e
	}
	s.cs = cs
	if _, err := s.list(ctx); err != nil {
		var e *Error
		if !errors.As(err, &e) {
			e = s.failure(ctx, "tools/list", err)
		}
		s.abort()
		return nil, e
	}
	s.connecting = false
	s.ok = true
	return s, nil
}

// closeBroken closes the session of a server that broke the protocol
// (once Connect is done: a failing Connect tears down by itself).
func (s *Server) closeBroken() {
	<-s.ready
	if s.ok {
		_ = s.Close()
	}
}

// Health returns nil while the server has kept to the protocol. Once it
// has sent a message that this package refuses (a JSON-RPC batch, a
// member name twice or in two cases in one object, invalid UTF-8, a lone
// surrogate escape, anything but one JSON object; see the package doc),
// Health returns an [*Error] (Op "protocol") saying what it was, wrapping
// [ErrProtocol]: the call that was waiting failed, the session has been
// closed, and every later call, listing or Current fails at once with
// that reason, sending nothing.
func (s *Server) Health() error {
	if v := s.guard.violation(); v != nil {
		return s.newError("protocol", v.what, v)
	}
	return nil
}

// unhealthy returns the error of operation op refused, unsent, because
// the server broke the protocol earlier; nil while it has not.
func (s *Server) unhealthy(op string) *Error {
	v := s.guard.violation()
	if v == nil {
		return nil
	}
	return s.newError(op, "not sent: the server is unhealthy, as it broke the protocol earlier: "+v.what, errors.Join(errNotSent, v))
}

// errTimeout is the cause of a start-up or listing that ran out of time.
var errTimeout = errors.New("timeout")

// Name returns the server's logical name.
func (s *Server) Name() string { return s.name }

// PID returns the process id of a stdio server, 0 for an HTTP server.
func (s *Server) PID() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.pid()
}

// InitializeResult returns what the server said about itself when the
// session began (its name, version, protocol version and capabilities).
func (s *Server) InitializeResult() *mcp.InitializeResult { return s.cs.InitializeResult() }

// Changed returns a channel that is closed when the server next sends
// notifications/tools/list_changed. Call it again for the one after.
// A notification also invalidates the listing [Server.Tools] keeps.
//
// It is not an error for a server never to notify: servers that do not
// declare the tools.listChanged capability are re-listed on every call
// to Tools instead.
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Epoch returns how many notifications/tools/list_changed the server has
// sent in this session.
func (s *Server) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

func (s *Server) noteChanged() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch++
	close(s.changed)
	s.changed = make(chan struct{})
}

// Tools returns every tool the server lists, in its order, following
// tools/list pagination to the end. The listing from Connect (or the last
// call) is returned again as long as the server has declared
// tools.listChanged and sent no notifications/tools/list_changed since it
// began; otherwise the server is asked again, within cfg.Timeout and ctx.
//
// The returned slice is the caller's; the Tools in it share their
// Upstream and Definition contents with the cache and must not be
// modified.
func (s *Server) Tools(ctx context.Context) ([]Tool, error) {
	tools, err := s.tools(ctx)
	if err != nil {
		return nil, err
	}
	return append([]Tool(nil), tools...), nil
}

// tools is [Server.Tools] without the copy: the slice may be the cache's,
// and must not be modified.
func (s *Server) tools(ctx context.Context) ([]Tool, error) {
	if e := s.unhealthy("tools/list"); e != nil {
		return nil, e
	}
	s.listMu.Lock()
	fresh := s.hasCache && s.cachedAt == s.Epoch() && s.notifies()
	cached := s.cached
	s.listMu.Unlock()
	if fresh {
		return cached, nil
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.cfg.timeout(), errTimeout)
	defer cancel()
	tools, err := s.list(ctx)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			e = s.failure(ctx, "tools/list", err)
		}
		return nil, e
	}
	return tools, nil
}

// rawListSchemas is the client's sending middleware: a tools/list
// result's schemas become the server's text ([keepRawSchemas]) before
// go-sdk filters the tools and caches the result (protocol 2026-07-28
// and later: it keeps the last listing's tools for lookups), so neither
// go-sdk nor this package keeps a decoded tree per schema.
func (s *Server) rawListSchemas(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.ListToolsResult); ok && err == nil && method == methodListTools {
			keepRawSchemas(r, s.cap.peek())
		}
		return res, err
	}
}

// connected is the listing Connect made, shared with the cache (it must
// not be modified), as long as no notifications/tools/list_changed came
// since it began; otherwise it is [Server.tools]. ConnectAll asks for it
// right after Connect, so a server that does not announce changes is not
// listed twice in a row.
func (s *Server) connected(ctx context.Context) ([]Tool, error) {
	if e := s.unhealthy("tools/list"); e != nil {
		return nil, e
	}
	s.listMu.Lock()
	ok := s.hasCache && s.cachedAt == s.Epoch()
	cached := s.cached
	s.listMu.Unlock()
	if ok {
		return cached, nil
	}
	return s.tools(ctx)
}

// notifies reports whether the server declared that it sends
// notifications/tools/list_changed.
func (s *Server) notifies() bool {
	r := s.cs.InitializeResult()
	return r != nil && r.Capabilities != nil && r.Capabilities.Tools != nil && r.Capabilities.Tools.ListChanged
}

// maxPages bounds a listing, against a server whose cursors never end.
const maxPages = 10000

// list lists all pages and replaces the cache.
func (s *Server) list(ctx context.Context) ([]Tool, error) {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	if e := s.unhealthy("tools/list"); e != nil {
		return nil, e
	}
	epoch := s.Epoch()

	var (
		tools    []Tool
		index    = map[string]int{} // upstream name -> index in tools
		cursor   string
		cursors  = map[string]bool{}
		rawPages = map[*mcp.ListToolsResult][]byte{}
	)
	for page := 0; ; page++ {
		if page == maxPages {
			return nil, s.newError("tools/list", fmt.Sprintf("the server's pagination did not end after %d pages", maxPages), nil)
		}
		s.cap.reset()
		res, err := s.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		raw := s.cap.take()
		if err != nil && raw != nil && ctx.Err() == nil {
			// The server answered, but go-sdk could not decode the result
			// (one malformed tool fails the whole page there): decode it
			// tool by tool, and report the malformed ones.
			if r, ok := decodePage(raw); ok {
				res, err = r, nil
			}
		}
		if err != nil {
			if isMethodNotFound(err) && !s.hasToolsCapability() {
				// A server without tools.
				break
			}
			return nil, err
		}
		if raw == nil {
			// go-sdk may answer from its own cache (protocol 2026-07-28
			// results with a ttlMs): use what was captured for that result.
			raw = s.rawPages[res]
		}
		if raw != nil && res.TTLMs > 0 {
			// Kept only for a result go-sdk may answer from its cache
			// again: one with a positive ttlMs.
			rawPages[res] = raw
		}
		for _, t := range s.pageTools(res, raw) {
			if i, dup := index[t.Upstream.Name]; dup && t.Upstream.Name != "" {
				const p = "the server lists this tool name more than once"
				if tools[i].Problem == "" {
					tools[i].Problem = p
				}
				if t.Problem == "" {
					t.Problem = p
				}
			} else {
				index[t.Upstream.Name] = len(tools)
			}
			tools = append(tools, t)
		}
		if res.NextCursor == "" {
			break
		}
		if cursors[res.NextCursor] {
			return nil, s.newError("tools/list", "the server's pagination repeats a cursor", nil)
		}
		cursors[res.NextCursor] = true
		cursor = res.NextCursor
	}
	s.cached = tools
	s.cachedAt = epoch
	s.hasCache = true
	s.rawPages = rawPages
	return tools, nil
}

func (s *Server) hasToolsCapability() bool {
	r := s.cs.InitializeResult()
	return r != nil && r.Capabilities != nil && r.Capabilities.Tools != nil
}

func isMethodNotFound(err error) bool {
	var we *jsonrpc.Error
	return errors.As(err, &we) && we.Code == jsonrpc.CodeMethodNotFound
}

// pageTools maps one page. With the raw page, its tools are walked in
// order and matched to go-sdk's decoding (which may have left some out);
// without it, go-sdk's decoding is all there is.
func (s *Server) pageTools(res *mcp.ListToolsResult, raw []byte) []Tool {
	var page wirePage
	if raw == nil || jsonv2.Unmarshal(raw, &page) != nil {
		out := make([]Tool, 0, len(res.Tools))
		for _, up := range res.Tools {
			out = append(out, s.tool(up, nil, ""))
		}
		return out
	}
	out := make([]Tool, 0, len(page.Tools))
	j := 0
	for _, rt := range page.Tools {
		var w wireTool
		wok := jsonv2.Unmarshal(rt, &w) == nil
		if j < len(res.Tools) && wok && res.Tools[j].Name == w.Name {
			out = append(out, s.tool(res.Tools[j], &w, ""))
			j++
			continue
		}
		if j < len(res.Tools) && !wok {
			// Unreadable raw form (a duplicate member, say): go-sdk's
			// decoding of the same entry is used.
			if up := res.Tools[j]; up != nil {
				out = append(out, s.tool(up, nil, ""))
				j++
				continue
			}
		}
		// go-sdk left this entry out of its result (see its
		// filterValidTools), or could not decode it: report it rather than
		// drop it.
		problem := "go-sdk (the MCP client library) refused this tool's listing, for example for invalid x-mcp-header annotations in its inputSchema"
		up := &mcp.Tool{}
		if err := json.Unmarshal(rt, up); err != nil {
			up = &mcp.Tool{Name: w.Name}
			problem = "the tool's listing does not follow the MCP schema: " + err.Error()
		}
		var wp *wireTool
		if wok {
			wp = &w
		}
		out = append(out, s.tool(up, wp, problem))
	}
	return out
}

// decodePage decodes a raw tools/list result tool by tool, leaving out
// the tools that do not decode (pageTools reports them).
func decodePage(raw []byte) (*mcp.ListToolsResult, bool) {
	var page struct {
		Tools      []json.RawMessage `json:"tools"`
		NextCursor string            `json:"nextCursor"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return nil, false
	}
	res := &mcp.ListToolsResult{NextCursor: page.NextCursor, Tools: []*mcp.Tool{}}
	for _, rt := range page.Tools {
		var t mcp.Tool
		if string(rt) != "null" && json.Unmarshal(rt, &t) == nil {
			res.Tools = append(res.Tools, &t)
		}
	}
	return res, true
}

func (s *Server) tool(up *mcp.Tool, w *wireTool, problem string) Tool {
	name := ComposeName(s.name, up.Name)
	if p := nameProblem(s.name, up.Name); p != "" {
		problem = p
	}
	kept := rawSchemas(up, w) // before definition: it may share w's bytes with up
	return Tool{Upstream: kept, Name: name, Definition: definition(name, up, w), Problem: problem}
}

// Call calls the upstream tool tool (the server's name for it, not the
// composed mcp.<server>.<tool>) with args, which must marshal to a JSON
// object (a map[string]any, a json.RawMessage or jsontext.Value holding
// an object); nil means {}. It waits as long as ctx allows.
//
// A tool that ran and failed is not an error here: the result's IsError
// says so, with the tool's message in its Content. An error means the
// call could not be made or answered (an unknown tool, invalid
// arguments, a server that died; the latter with its last stderr lines).
//
// The result's StructuredContent, when the server sent one, is a
// [json.RawMessage] holding the server's JSON text (whitespace removed),
// not go-sdk's map[string]any, so that its numbers keep their exact value.
// A server that broke the protocol (see [Server.Health]) is not called:
// the error then wraps [ErrProtocol].
func (s *Server) Call(ctx context.Context, tool string, args any) (*mcp.CallToolResult, error) {
	switch a := args.(type) {
	case json.RawMessage:
		if len(a) == 0 {
			args = nil
		}
	case []byte:
		if len(a) == 0 {
			args = nil
		} else {
			args = json.RawMessage(a)
		}
	}
	op := "tools/call " + quoteName(tool)
	if e := s.unhealthy(op); e != nil {
		return nil, e
	}
	// The result's raw form, as the server sent it, for structuredContent
	// (go-sdk decodes it into float64 numbers).
	slot := &rawSlot{}
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	// The W3C trace context of the call's span, when tracing is on (the
	// runtime's execute_tool span): _meta.traceparent and tracestate.
	if m := tracectx.InjectMeta(ctx, nil); m != nil {
		params.Meta = m
	}
	res, err := s.cs.CallTool(withRawSlot(ctx, slot), params)
	s.cap.forget(slot)
	if err != nil {
		return nil, s.failure(ctx, op, err)
	}
	if raw := slot.get(); raw != nil && res != nil {
		sc, err := structuredContent(raw)
		if err != nil {
			return nil, s.newError(op, "the result cannot be read: "+err.Error(), err)
		}
		if sc != nil {
			res.StructuredContent = sc
		}
	}
	return res, nil
}

// structuredContent returns the structuredContent member of a raw
// tools/call result, compacted but otherwise as the server wrote it (its
// numbers spelled as sent, its members in order); nil when absent or null.
func structuredContent(raw []byte) (json.RawMessage, error) {
	if len(raw) > 0 && raw[0] == '{' && bytes.IndexByte(raw, '\\') < 0 &&
		!bytes.Contains(raw, []byte(`"structuredContent"`)) && jsontext.Value(raw).IsValid() {
		// No member can be named structuredContent (a name spelled with
		// an escape has a backslash), and the decoding below would find
		// nothing wrong: it would skip every member and return this.
		return nil, nil
	}
	return decodeStructuredContent(raw)
}

// decodeStructuredContent is structuredContent without its fast path:
// the member found by decoding the whole result.
func decodeStructuredContent(raw []byte) (json.RawMessage, error) {
	d := jsontext.NewDecoder(bytes.NewReader(raw))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, errors.New("the result is not a JSON object")
	}
	for d.PeekKind() == '"' {
		name, err := d.ReadToken()
		if err != nil {
			return nil, err
		}
		if name.String() != "structuredContent" {
			if err := d.SkipValue(); err != nil {
				return nil, err
			}
			continue
		}
		v, err := d.ReadValue()
		if err != nil {
			return nil, err
		}
		if v.Kind() == 'n' {
			return nil, nil
		}
		v = v.Clone()
		if err := v.Compact(); err != nil {
			return nil, err
		}
		return json.RawMessage(v), nil
	}
	return nil, nil
}

// Close ends the session and, for a stdio server, its process: stdin is
// closed, then the server gets 1 s to exit, then SIGTERM and 1 s more,
// then SIGKILL; the rest of its process group is killed in any case. For a
// stdio server, what is still in flight after 1 s (a call not answered,
// a write the server does not read) is cut off: its pipes are closed. It
// is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		var err error
		if s.proc != nil {
			// go-sdk ends the session once what is in flight is done; a
			// server that does not read its stdin can hold a write of it
			// (an answer to its own request) forever. After closeGrace
			// the pipes are closed under the session, which fails those
			// writes.
			closed := make(chan struct{})
			go func() {
				_ = s.cs.Close()
				close(closed)
			}()
			select {
			case <-closed:
			case <-time.After(closeGrace):
				s.proc.stdin.Close()
				s.proc.stdout.Close()
				<-closed
			}
			s.proc.stop()
			// The session's close error is the pipes closing.
		} else {
			err = s.cs.Close()
		}
		if s.httpT != nil {
			s.httpT.CloseIdleConnections()
		}
		if err != nil && !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(err, ErrProtocol) {
			s.closeErr = s.newError("close", err.Error(), err)
		}
	})
	return s.closeErr
}

// abort tears down a failed start: the session if any, the process at
// once.
func (s *Server) abort() {
	if s.cs != nil {
		_ = s.cs.Close()
	}
	if s.proc != nil {
		s.proc.stdin.Close()
		s.proc.stdout.Close()
		s.proc.kill()
	}
	if s.httpT != nil {
		s.httpT.CloseIdleConnections()
	}
}

// failure describes err from operation op, with what is known about the
// server: non-JSON on stdout, its exit, a timeout, its last stderr lines.
func (s *Server) failure(ctx context.Context, op string, err error) *Error {
	var msg string
	cause := context.Cause(ctx)
	if s.proc != nil {
		if !s.proc.exited() && (errors.Is(cause, errServerExited) || connectionEnded(err)) {
			// The server's stdout ended: give it a moment to exit, so its
			// status and last stderr lines are complete.
			select {
			case <-s.proc.done:
			case <-time.After(exitGrace):
			}
		}
		if bad := s.proc.stdout.nonJSON(); len(bad) > 0 {
			msg = "server wrote non-JSON to stdout: " + quoteBytes([]byte(s.red.redact(string(bad))))
		} else if v := s.guard.violation(); v != nil {
			msg = v.Error()
		} else if s.proc.exited() {
			msg = "server exited (" + s.proc.exitDescription() + ")"
		}
	}
	if v := s.guard.violation(); v != nil {
		if msg == "" {
			msg = v.Error()
		}
		err = errors.Join(v, err)
	}
	if msg == "" {
		switch {
		case errors.Is(cause, errTimeout):
			msg = "no answer within " + s.cfg.timeout().String()
		case ctx.Err() != nil && cause != nil && !errors.Is(cause, errServerExited) && !errors.Is(cause, errNonJSON):
			msg = cause.Error()
		default:
			msg = err.Error()
		}
	}
	e := s.newError(op, msg, err)
	if s.proc != nil && (s.connecting || s.proc.exited() || errors.Is(cause, errTimeout) || s.proc.stdout.nonJSON() != nil || s.guard.violation() != nil) {
		e.Stderr = s.red.redact(s.proc.stderrTail())
	}
	return e
}

// connectionEnded reports whether err says the connection closed.
func connectionEnded(err error) bool {
	return errors.Is(err, mcp.ErrConnectionClosed) || strings.Contains(err.Error(), "EOF")
}

func (s *Server) newError(op, msg string, err error) *Error {
	return &Error{Server: s.name, Op: op, Msg: s.red.redact(msg), err: err}
}

// Error is how this package reports a server that failed: it could not
// start, initialize, list or be called.
//
// Its text never holds a value of [ServerConfig.Env] or
// [ServerConfig.Headers] (values of 6 bytes or more are replaced with
// "[redacted]", also in the server's stderr), nor the user information
// or query of the URL.
type Error struct {
	// Server is the logical server name.
	Server string
	// Op is what failed: "config", "start", "initialize", "tools/list",
	// "tools/call \"<tool>\"", "close", or "protocol" (from
	// [Server.Health]).
	Op string
	// Msg says what went wrong.
	Msg string
	// Stderr is the last lines (up to 20, from the last 4 KiB) of a stdio
	// server's stderr, cleaned of control characters; "" if none.
	Stderr string

	err error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mcp server %q: %s: %s", e.Server, e.Op, e.Msg)
	if e.Stderr != "" {
		b.WriteString("; its stderr ends:")
		for _, l := range strings.Split(e.Stderr, "\n") {
			b.WriteString("\n\t")
			b.WriteString(l)
		}
	}
	return b.String()
}

// Unwrap returns the underlying error, for [errors.Is] and [errors.As]
// (context.DeadlineExceeded, exec.ErrNotFound, a *jsonrpc.Error). Its
// text is not redacted: show the Error, not it.
func (e *Error) Unwrap() error { return e.err }

// quoteBytes quotes at most maxShown bytes of b (cut on a rune boundary)
// for a message.
func quoteBytes(b []byte) string {
	if len(b) <= maxShown {
		return quoteName(string(b))
	}
	n := maxShown
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return quoteName(string(b[:n])) + "..."
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func clientVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}
