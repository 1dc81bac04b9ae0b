package mcphost_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/mcphost"
	"github.com/openplaybook/openplaybook/registry"
)

// The hostile servers answer initialize and tools/list (one tool, "t")
// properly, and tools/call with exactly the bytes a test gives, "@ID@"
// replaced by the request's id.

func TestMain(m *testing.M) {
	if reply, ok := os.LookupEnv("MCPHOST_HOSTILE_REPLY"); ok {
		hostileStdio(reply)
		os.Exit(0)
	}
	if mode, ok := os.LookupEnv("MCPHOST_SCRIPT"); ok {
		scriptedStdio(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const (
	hostileInit  = `{"jsonrpc":"2.0","id":@ID@,"result":{"protocolVersion":@VERSION@,"capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"1.0.0"}}}`
	hostileTools = `{"jsonrpc":"2.0","id":@ID@,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}}`
)

// hostileAnswer returns the answer to one request line, or nil (a
// notification); calls counts tools/call requests.
func hostileAnswer(line []byte, call []byte, calls *atomic.Int64) []byte {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion json.RawMessage `json:"protocolVersion"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &req) != nil || req.ID == nil {
		return nil
	}
	var out string
	switch req.Method {
	case "initialize":
		out = strings.ReplaceAll(hostileInit, "@VERSION@", string(req.Params.ProtocolVersion))
	case "tools/list":
		out = hostileTools
	case "tools/call":
		calls.Add(1)
		out = string(call)
	default:
		out = `{"jsonrpc":"2.0","id":@ID@,"error":{"code":-32601,"message":"Method not found"}}`
	}
	return []byte(strings.ReplaceAll(out, "@ID@", string(req.ID)))
}

// hostileStdio serves stdin/stdout; reply is the tools/call answer,
// base64. Each tools/call is noted on stderr.
func hostileStdio(reply string) {
	call, err := base64.StdEncoding.DecodeString(reply)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var calls atomic.Int64
	r := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if out := hostileAnswer(line, call, &calls); out != nil {
				if calls.Load() > 0 && strings.Contains(string(line), `"tools/call"`) {
					fmt.Fprintf(os.Stderr, "tools/call number %d\n", calls.Load())
				}
				os.Stdout.Write(append(out, '\n'))
			}
		}
		if err != nil {
			return
		}
	}
}

func hostileStdioServer(t *testing.T, reply string, env map[string]string) mcphost.ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := map[string]string{"MCPHOST_HOSTILE_REPLY": base64.StdEncoding.EncodeToString([]byte(reply))}
	for k, v := range env {
		e[k] = v
	}
	return mcphost.ServerConfig{Name: "hostile", Command: exe, Env: e, Timeout: 10 * time.Second}
}

// hostileHTTPServer serves streamable HTTP, answering tools/call with
// reply as an application/json body, or (sse) as one server-sent event.
func hostileHTTPServer(t *testing.T, reply string, sse bool) (mcphost.ServerConfig, *atomic.Int64) {
	t.Helper()
	calls := &atomic.Int64{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		isCall := strings.Contains(string(body), `"tools/call"`)
		out := hostileAnswer(body, []byte(reply), calls)
		if out == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Mcp-Session-Id", "hostile-session")
		if sse && isCall {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message\nid: 1\ndata: %s\n\n", out)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return mcphost.ServerConfig{Name: "hostile", URL: ts.URL, Timeout: 10 * time.Second}, calls
}

const okResult = `{"content":[{"type":"text","text":"ok"}]}`

// hostileReplies are tools/call answers that must be refused, each with
// what the error says.
var hostileReplies = []struct{ name, reply, want string }{
	{"batch", `[{"jsonrpc":"2.0","id":@ID@,"result":` + okResult + `}]`, "JSON-RPC batch"},
	{"duplicate-result", `{"jsonrpc":"2.0","id":@ID@,"result":` + okResult + `,"result":{"content":[{"type":"text","text":"second"}]}}`, "member name twice"},
	{"Result-beside-result", `{"jsonrpc":"2.0","id":@ID@,"result":` + okResult + `,"Result":{"content":[{"type":"text","text":"other"}]}}`, `"result" and "Result", which differ only by case`},
	{"ID-beside-id", `{"jsonrpc":"2.0","id":@ID@,"ID":12345,"result":` + okResult + `}`, `"id" and "ID"`},
	{"case-variant-in-content", `{"jsonrpc":"2.0","id":@ID@,"result":{"content":[{"type":"text","text":"a","Text":"b"}]}}`, "differ only by case"},
	{"lone-surrogate", `{"jsonrpc":"2.0","id":@ID@,"result":{"content":[{"type":"text","text":"a\ud800b"}]}}`, "lone surrogate"},
	{"invalid-utf8", "{\"jsonrpc\":\"2.0\",\"id\":@ID@,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"a\xff\xfeb\"}]}}", "invalid UTF-8"},
	{"two-values", `{"jsonrpc":"2.0","id":@ID@,"result":` + okResult + `}{"jsonrpc":"2.0","id":@ID@,"result":` + okResult + `}`, "more than one JSON value"},
}

// assertBroken checks the failed call's error, then that the server is
// unhealthy and that a later call fails at once without being sent.
func assertBroken(t *testing.T, s *mcphost.Server, err error, want string, calls func() int64) {
	t.Helper()
	if err == nil {
		t.Fatal("tools/call succeeded; want a protocol error")
	}
	var e *mcphost.Error
	if !errors.As(err, &e) || e.Server != "hostile" || !strings.Contains(e.Msg, "broke the protocol") || !strings.Contains(e.Msg, want) {
		t.Fatalf("error = %v; want an *Error naming the server and %q", err, want)
	}
	if !errors.Is(err, mcphost.ErrProtocol) {
		t.Errorf("error does not wrap ErrProtocol: %v", err)
	}
	h := s.Health()
	if h == nil || !errors.Is(h, mcphost.ErrProtocol) || !strings.Contains(h.Error(), want) {
		t.Fatalf("Health() = %v; want the protocol error %q", h, want)
	}
	sent := calls()
	start := time.Now()
	_, err2 := s.Call(context.Background(), "t", nil)
	if err2 == nil || !strings.Contains(err2.Error(), "not sent: the server is unhealthy") || !strings.Contains(err2.Error(), want) || !errors.Is(err2, mcphost.ErrProtocol) {
		t.Fatalf("later call: %v; want it refused as unhealthy", err2)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("later call took %v; want it to fail at once", d)
	}
	if _, err := s.FreshTools(context.Background()); err == nil || !strings.Contains(err.Error(), "unhealthy") {
		t.Errorf("FreshTools after the violation: %v; want refused", err)
	}
	if _, err := s.Tools(context.Background()); err == nil || !strings.Contains(err.Error(), "unhealthy") {
		t.Errorf("Tools after the violation: %v; want refused", err)
	}
	if got := calls(); got != sent {
		t.Errorf("the later call reached the server (%d calls, then %d)", sent, got)
	}
}

func TestHostileStdio(t *testing.T) {
	t.Parallel()
	for _, c := range hostileReplies {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := connect(t, hostileStdioServer(t, c.reply, nil))
			tl := tools(t, s)["t"]
			live := s.RegistryTool(tl)
			_, err := live.Call(context.Background(), []byte(`{}`))
			if registry.IsDefinite(err) {
				t.Errorf("the refused answer's call is definite; the tool may have run")
			}
			assertBroken(t, s, err, c.want, func() int64 { return 0 })
			// Nothing was sent: definite.
			if _, err := live.Call(context.Background(), []byte(`{}`)); !registry.IsDefinite(err) {
				t.Errorf("call to an unhealthy server: %v; want a definite error", err)
			}
			if s.PID() != 0 {
				waitExit(t, s.PID())
			}
		})
	}
}

// stdioJSONRPCReplies are tools/call answers that are one strict JSON
// object but not a JSON-RPC 2.0 response to the call, which the stdio
// transport refuses too (go-sdk would read some of them: a fractional id
// as its integer part, a wrong version tag as an error of its own).
var stdioJSONRPCReplies = []struct{ name, reply, want string }{
	{"version-1.0", `{"jsonrpc":"1.0","id":@ID@,"result":` + okResult + `}`, `its jsonrpc member is "1.0"`},
	{"no-version", `{"id":@ID@,"result":` + okResult + `}`, `its jsonrpc member is absent`},
	{"fractional-id", `{"jsonrpc":"2.0","id":@ID@.5,"result":` + okResult + `}`, "is not an integer"},
	{"huge-id", `{"jsonrpc":"2.0","id":1e300,"result":` + okResult + `}`, "is not an integer"},
	{"bool-id", `{"jsonrpc":"2.0","id":true,"result":` + okResult + `}`, "not a string or an integer"},
	{"no-id", `{"jsonrpc":"2.0","result":` + okResult + `}`, "a response without an id"},
	{"method-number", `{"jsonrpc":"2.0","id":@ID@,"method":5}`, "its method is 5"},
	{"method-null", `{"jsonrpc":"2.0","id":@ID@,"method":null}`, "its method is null"},
	{"error-code-fraction", `{"jsonrpc":"2.0","id":@ID@,"error":{"code":1.5,"message":"x"}}`, "its error code is 1.5, not an integer"},
	{"error-message-number", `{"jsonrpc":"2.0","id":@ID@,"error":{"code":1,"message":7}}`, "its error message is 7, not a string"},
	{"error-array", `{"jsonrpc":"2.0","id":@ID@,"error":[]}`, "its error member is [], not an object"},
}

func TestHostileStdioJSONRPC(t *testing.T) {
	t.Parallel()
	for _, c := range stdioJSONRPCReplies {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := connect(t, hostileStdioServer(t, c.reply, nil))
			live := s.RegistryTool(tools(t, s)["t"])
			_, err := live.Call(context.Background(), []byte(`{}`))
			if registry.IsDefinite(err) {
				t.Errorf("the refused answer's call is definite; the tool may have run")
			}
			assertBroken(t, s, err, c.want, func() int64 { return 0 })
			if s.PID() != 0 {
				waitExit(t, s.PID())
			}
		})
	}
}

// waitExit waits for the server's process to end: the session of an
// unhealthy server is closed, and its process stopped.
func waitExit(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(b), ") Z ") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat("/proc/self"); err == nil {
		t.Errorf("the unhealthy server's process %d still runs", pid)
	}
}

func TestHostileHTTP(t *testing.T) {
	t.Parallel()
	for _, sse := range []bool{false, true} {
		for _, c := range hostileReplies {
			name := c.name + "-json"
			if sse {
				name = c.name + "-sse"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				cfg, calls := hostileHTTPServer(t, c.reply, sse)
				s := connect(t, cfg)
				_, err := s.Call(context.Background(), "t", nil)
				assertBroken(t, s, err, c.want, calls.Load)
			})
		}
	}
}

// TestHostileSecretNotEchoed: member names holding a configured secret
// are redacted in the error.
func TestHostileSecretNotEchoed(t *testing.T) {
	t.Parallel()
	const secret = "tok-Hostile-9876543210"
	reply := `{"jsonrpc":"2.0","id":@ID@,"result":{"content":[],"` + secret + `":1,"` + strings.ToUpper(secret) + `":2}}`
	s := connect(t, hostileStdioServer(t, reply, map[string]string{"API_TOKEN": secret, "API_TOKEN_UP": strings.ToUpper(secret)}))
	_, err := s.Call(context.Background(), "t", nil)
	if err == nil || !errors.Is(err, mcphost.ErrProtocol) {
		t.Fatalf("call: %v; want a protocol error", err)
	}
	for _, msg := range []string{err.Error(), s.Health().Error()} {
		if strings.Contains(strings.ToLower(msg), strings.ToLower(secret)) || !strings.Contains(msg, "[redacted]") {
			t.Errorf("message shows the secret: %s", msg)
		}
	}
}

// TestHostileAtStartup: a refused message during initialize fails
// Connect at once, with the reason.
func TestHostileAtStartup(t *testing.T) {
	t.Parallel()
	cfg, _ := hostileHTTPServerInit(t)
	start := time.Now()
	_, err := mcphost.Connect(context.Background(), cfg)
	if err == nil || !errors.Is(err, mcphost.ErrProtocol) || !strings.Contains(err.Error(), "initialize") || !strings.Contains(err.Error(), "JSON-RPC batch") {
		t.Fatalf("Connect: %v; want a protocol error at initialize", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Connect took %v; want it to fail at once", d)
	}
}

// hostileHTTPServerInit answers initialize with a batch.
func hostileHTTPServerInit(t *testing.T) (mcphost.ServerConfig, *httptest.Server) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var calls atomic.Int64
		out := hostileAnswer(body, nil, &calls)
		if out == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(append([]byte("["), out...), ']'))
	}))
	t.Cleanup(ts.Close)
	return mcphost.ServerConfig{Name: "hostile", URL: ts.URL, Timeout: 10 * time.Second}, ts
}

// TestExactNumbers: a 20-digit integer in structuredContent, and in JSON
// text content, survives exactly, over stdio and HTTP.
func TestExactNumbers(t *testing.T) {
	t.Parallel()
	const sc = `{"n": 12345678901234567890, "f":0.10000000000000000555111512312578270211815834045, "neg":-9007199254740993, "z":{"b":1,"a":2}}`
	const want = `{"n":12345678901234567890,"f":0.10000000000000000555111512312578270211815834045,"neg":-9007199254740993,"z":{"b":1,"a":2}}`
	textJSON, _ := json.Marshal("{\n  \"id\": 98765432109876543210,\n  \"ok\": true\n}")
	replies := map[string]struct{ reply, want string }{
		"structured": {`{"jsonrpc":"2.0","id":@ID@,"result":{"content":[{"type":"text","text":"x"}],"structuredContent":` + sc + `}}`, want},
		"text":       {`{"jsonrpc":"2.0","id":@ID@,"result":{"content":[{"type":"text","text":` + string(textJSON) + `}]}}`, `{"id":98765432109876543210,"ok":true}`},
	}
	for name, r := range replies {
		for _, transport := range []string{"stdio", "http"} {
			t.Run(name+"-"+transport, func(t *testing.T) {
				t.Parallel()
				var cfg mcphost.ServerConfig
				if transport == "stdio" {
					cfg = hostileStdioServer(t, r.reply, nil)
				} else {
					cfg, _ = hostileHTTPServer(t, r.reply, false)
				}
				s := connect(t, cfg)
				res, err := s.Call(context.Background(), "t", nil)
				if err != nil {
					t.Fatal(err)
				}
				got, err := mcphost.ResultJSON(res)
				if err != nil || string(got) != r.want {
					t.Fatalf("ResultJSON = %s, %v; want %s", got, err, r.want)
				}
				out, err := s.RegistryTool(tools(t, s)["t"]).Call(context.Background(), []byte(`{}`))
				if err != nil || string(out.Content) != r.want {
					t.Fatalf("registry call = %s, %v; want %s", out.Content, err, r.want)
				}
				if h := s.Health(); h != nil {
					t.Errorf("Health() = %v after valid answers", h)
				}
			})
		}
	}
}

// TestOverflowingNumberRefused: a number no float64 holds (1e400) in
// structuredContent fails the call (go-sdk cannot decode it); the server
// stays healthy.
func TestOverflowingNumberRefused(t *testing.T) {
	t.Parallel()
	s := connect(t, hostileStdioServer(t, `{"jsonrpc":"2.0","id":@ID@,"result":{"content":[],"structuredContent":{"big":1e400}}}`, nil))
	if _, err := s.Call(context.Background(), "t", nil); err == nil || errors.Is(err, mcphost.ErrProtocol) {
		t.Fatalf("call: %v; want it refused, not as a protocol error", err)
	}
	if h := s.Health(); h != nil {
		t.Fatalf("Health() = %v", h)
	}
	if _, err := s.Tools(context.Background()); err != nil {
		t.Fatalf("Tools after the refused number: %v", err)
	}
}
