package mcphost_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openplaybook/openplaybook/mcphost"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
)

func noop(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
}

func newSDKServer(opts *mcp.ServerOptions) *mcp.Server {
	return mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1.0.0"}, opts)
}

var objectSchema = json.RawMessage(`{"type":"object"}`)

// recorder wraps an HTTP handler and records the JSON-RPC methods posted
// to it and whether each request carried the expected header.
type recorder struct {
	h      http.Handler
	header string // "Name: value" every request must carry

	mu      sync.Mutex
	methods []string
	missing int
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.header != "" {
		k, v, _ := strings.Cut(r.header, ": ")
		if req.Header.Get(k) != v {
			r.mu.Lock()
			r.missing++
			r.mu.Unlock()
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	}
	if req.Method == http.MethodPost {
		body, _ := io.ReadAll(req.Body)
		var m struct{ Method string }
		json.Unmarshal(body, &m)
		r.mu.Lock()
		r.methods = append(r.methods, m.Method)
		r.mu.Unlock()
		req.Body = io.NopCloser(strings.NewReader(string(body)))
	}
	r.h.ServeHTTP(w, req)
}

func (r *recorder) count(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.methods {
		if m == method {
			n++
		}
	}
	return n
}

func serve(t *testing.T, server *mcp.Server, header string) (string, *recorder) {
	t.Helper()
	rec := &recorder{h: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil), header: header}
	ts := httptest.NewServer(rec)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts.URL, rec
}

func TestPagination(t *testing.T) {
	t.Parallel()
	server := newSDKServer(&mcp.ServerOptions{PageSize: 3})
	var want []string
	for i := range 10 {
		name := fmt.Sprintf("tool_%02d", i)
		want = append(want, name)
		server.AddTool(&mcp.Tool{Name: name, Description: "tool " + name, InputSchema: objectSchema}, noop)
	}
	url, rec := serve(t, server, "")
	s := connect(t, mcphost.ServerConfig{Name: "paged", URL: url})
	list, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tl := range list {
		got = append(got, tl.Upstream.Name)
		if tl.Definition.Description != "tool "+tl.Upstream.Name || tl.Problem != "" {
			t.Errorf("%s: description %q, problem %q", tl.Name, tl.Definition.Description, tl.Problem)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("tools = %v, want %v", got, want)
	}
	// 10 tools in pages of 3: four tools/list requests.
	if n := rec.count("tools/list"); n != 4 {
		t.Errorf("%d tools/list requests, want 4", n)
	}
}

func TestHTTP(t *testing.T) {
	t.Parallel()
	server := newSDKServer(nil)
	yes := true
	server.AddTool(&mcp.Tool{Name: "lookup", Description: "Looks up.", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, noop)
	server.AddTool(&mcp.Tool{Name: "wipe", Description: "Wipes.", InputSchema: objectSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, noop)
	server.AddTool(&mcp.Tool{Name: "plain", Description: "No annotations.", InputSchema: objectSchema}, noop)
	const secret = "s3cret-token-value"
	url, rec := serve(t, server, "Authorization: Bearer "+secret)

	s := connect(t, mcphost.ServerConfig{Name: "web", URL: url, Headers: map[string]string{"Authorization": "Bearer " + secret}})
	got := tools(t, s)
	for name, w := range map[string]string{
		"lookup": "riskClass=read sideEffecting=false requiresApproval=unknown",
		"wipe":   "riskClass=unknown sideEffecting=true requiresApproval=unknown",
		"plain":  "riskClass=unknown sideEffecting=unknown requiresApproval=unknown",
	} {
		if r := risk(got[name]); r != w {
			t.Errorf("%s: %s, want %s", name, r, w)
		}
	}
	if s := string(got["lookup"].Definition.InputSchema); s != `{"type":"object","properties":{"q":{"type":"string"}}}` {
		t.Errorf("lookup InputSchema = %s, want the server's bytes", s)
	}
	if got["lookup"].Name != "mcp.web.lookup" {
		t.Errorf("Name = %q", got["lookup"].Name)
	}
	res, err := s.Call(context.Background(), "lookup", map[string]any{"q": "x"})
	if err != nil || resultText(t, res) != "ok" {
		t.Fatalf("Call: %v %+v", err, res)
	}
	if rec.missing != 0 {
		t.Errorf("%d requests without the configured header", rec.missing)
	}

	// A tool added at run time: list_changed reaches the client, and the
	// next Tools lists again.
	ch := s.Changed()
	server.AddTool(&mcp.Tool{Name: "added", Description: "Added later.", InputSchema: objectSchema}, noop)
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no list_changed notification within 5s")
	}
	if _, ok := tools(t, s)["added"]; !ok {
		t.Errorf("the added tool is not listed after list_changed")
	}
}

func TestHTTPWrongHeader(t *testing.T) {
	t.Parallel()
	server := newSDKServer(nil)
	url, _ := serve(t, server, "Authorization: Bearer right-token")
	const secret = "wrong-token-123456"
	start := time.Now()
	_, err := mcphost.Connect(context.Background(), mcphost.ServerConfig{Name: "web", URL: url + "?key=query-secret-999", Headers: map[string]string{"Authorization": "Bearer " + secret}, Timeout: 3 * time.Second})
	if err == nil {
		t.Fatal("no error")
	}
	t.Logf("error after %v: %v", time.Since(start), err)
	for _, leak := range []string{secret, "query-secret-999"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error shows a secret: %v", err)
		}
	}
}

func TestUnreachableURL(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close() // nothing listens there now
	start := time.Now()
	_, err := mcphost.Connect(context.Background(), mcphost.ServerConfig{Name: "gone", URL: url, Timeout: 3 * time.Second})
	if err == nil {
		t.Fatal("no error")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	t.Logf("%v", err)
}

func TestNamesThatCannotRoundTrip(t *testing.T) {
	t.Parallel()
	server := newSDKServer(nil)
	long := strings.Repeat("a", 128-len("mcp.odd.")+1)
	fits := strings.Repeat("b", 128-len("mcp.odd."))
	for _, n := range []string{"bad name", "x/y", "日本", "dotted.ok", ".lead", "a..b", long, fits, "fine-name_1"} {
		server.AddTool(&mcp.Tool{Name: n, Description: "d", InputSchema: objectSchema}, noop)
	}
	url, _ := serve(t, server, "")
	s := connect(t, mcphost.ServerConfig{Name: "odd", URL: url})
	got := tools(t, s)
	want := map[string]string{
		"bad name":    "contains whitespace",
		"x/y":         "contains '/'",
		"日本":          "non-ASCII",
		".lead":       "starts or ends with a dot",
		"a..b":        "empty segment",
		long:          "longer than 128 bytes",
		"dotted.ok":   "",
		fits:          "",
		"fine-name_1": "",
	}
	if len(got) != len(want) {
		t.Errorf("%d tools listed, want %d (none dropped)", len(got), len(want))
	}
	for up, w := range want {
		tl, ok := got[up]
		if !ok {
			t.Errorf("%q was dropped", up)
			continue
		}
		if tl.Name != "mcp.odd."+up || tl.Definition.Name != tl.Name {
			t.Errorf("%q: Name %q: mangled", up, tl.Name)
		}
		switch {
		case w == "" && tl.Problem != "":
			t.Errorf("%q: unexpected problem %q", up, tl.Problem)
		case w != "" && !strings.Contains(tl.Problem, w):
			t.Errorf("%q: problem %q, want it to say %q", up, tl.Problem, w)
		}
	}
	t.Logf("%s", got["日本"].Problem)
}

func TestServeHTTPHelper(t *testing.T) {
	t.Parallel()
	server := newSDKServer(nil)
	server.AddTool(&mcp.Tool{Name: "one", Description: "d", InputSchema: objectSchema}, noop)
	s := connect(t, mcphost.ServerConfig{Name: "h", URL: mcptest.ServeHTTP(t, server)})
	if len(tools(t, s)) != 1 {
		t.Error("want one tool")
	}
}
