package mcphost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/mcphost"
)

// spacedSchema is sent as sentSchema (go-sdk's server compacts it), its
// members in their order: a decoded tree re-encoded would sort them.
const (
	spacedSchema = `{"type": "object", "required": ["id"], "properties": {"id": {"type": "string", "maxLength": 64}}}`
	sentSchema   = `{"type":"object","required":["id"],"properties":{"id":{"type":"string","maxLength":64}}}`
)

// A listed tool keeps its schemas as the server's text, the same bytes
// in its definition and in Upstream (a json.RawMessage, not go-sdk's
// decoded tree), and a tool that go-sdk answers again from its own cache
// (a result with ttlMs) is mapped from the same text: its readOnlyHint
// false is still known (go-sdk's decoding cannot tell false from absent).
func TestListedSchemasStayText(t *testing.T) {
	t.Parallel()
	for _, ttl := range []int{0, 60_000} {
		server := newSDKServer(&mcp.ServerOptions{SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.TTLMs = ttl }})
		server.AddTool(&mcp.Tool{Name: "lookup", InputSchema: json.RawMessage(spacedSchema), OutputSchema: json.RawMessage(spacedSchema),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: false, DestructiveHint: new(bool)}}, noop)
		// Stateless: go-sdk's client then speaks protocol 2026-07-28,
		// whose results it caches for their ttlMs.
		rec := &recorder{h: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})}
		ts := httptest.NewServer(rec)
		t.Cleanup(ts.Close)
		s := connect(t, mcphost.ServerConfig{Name: "raw", URL: ts.URL})
		if v := s.InitializeResult().ProtocolVersion; v != "2026-07-28" {
			t.Fatalf("protocol %s, want 2026-07-28", v)
		}
		for round := range 2 {
			list, err := s.FreshTools(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 {
				t.Fatalf("ttl %d: %d tools", ttl, len(list))
			}
			tl := list[0]
			d := tl.Definition
			if string(d.InputSchema) != sentSchema || string(d.OutputSchema) != sentSchema {
				t.Errorf("ttl %d, round %d: definition schemas %s, %s; want the server's text", ttl, round, d.InputSchema, d.OutputSchema)
			}
			in, ok := tl.Upstream.InputSchema.(json.RawMessage)
			out, ok2 := tl.Upstream.OutputSchema.(json.RawMessage)
			if !ok || !ok2 {
				t.Fatalf("ttl %d, round %d: Upstream schemas are %T and %T, want json.RawMessage", ttl, round, tl.Upstream.InputSchema, tl.Upstream.OutputSchema)
			}
			if !bytes.Equal(in, d.InputSchema) || &in[0] != &d.InputSchema[0] || &out[0] != &d.OutputSchema[0] {
				t.Errorf("ttl %d, round %d: Upstream's schemas are not the definition's bytes", ttl, round)
			}
			if d.SideEffecting == nil || !*d.SideEffecting {
				t.Errorf("ttl %d, round %d: sideEffecting %v, want true (readOnlyHint false, read from the raw listing)", ttl, round, d.SideEffecting)
			}
		}
		// Connect's listing and the two above; with a ttl, go-sdk
		// answered the two from its cache.
		want := 3
		if ttl > 0 {
			want = 1
		}
		if n := rec.count("tools/list"); n != want {
			t.Errorf("ttl %d: %d tools/list requests, want %d", ttl, n, want)
		}
	}
}

// A live tool's Current compares the tool as listed now with its import:
// listed again the same, or with its schema's members in another order,
// it is the same tool; with another title (a member its definition does
// not show) or another schema, the call is stopped.
func TestLiveToolComparesListing(t *testing.T) {
	t.Parallel()
	server := newSDKServer(nil)
	add := func(title, schema string) {
		server.AddTool(&mcp.Tool{Name: "lookup", Title: title, InputSchema: json.RawMessage(schema)}, noop)
	}
	add("Lookup", spacedSchema)
	url, rec := serve(t, server, "")
	s := connect(t, mcphost.ServerConfig{Name: "live", URL: url})
	list, err := s.Tools(context.Background())
	if err != nil || len(list) != 1 {
		t.Fatalf("%v, %d tools", err, len(list))
	}
	live := s.RegistryTool(list[0])
	for _, c := range []struct {
		title, schema, err string
	}{
		{"Lookup", spacedSchema, ""},
		{"Lookup", `{"properties": {"id": {"maxLength": 64, "type": "string"}}, "required": ["id"], "type": "object"}`, ""},
		{"Look up", spacedSchema, "differently than when the run imported it"},
		{"Lookup", `{"type": "object", "required": ["id"], "properties": {"id": {"type": "string", "maxLength": 65}}}`, "differently than when the run imported it"},
		{"Lookup", spacedSchema, ""},
	} {
		add(c.title, c.schema)
		before := rec.count("tools/list")
		_, err := live.Current(context.Background())
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("title %q, schema %s: Current: %v, want %q", c.title, c.schema, err, c.err)
		}
		if rec.count("tools/list") == before {
			t.Errorf("title %q, schema %s: Current did not list the tools", c.title, c.schema)
		}
	}
}

// What a listing keeps per tool is about its schemas' text, on either
// protocol: not go-sdk's decoded trees, neither in the listing nor in
// go-sdk's own cache of results (protocol 2026-07-28). And go-sdk still
// reads a cached tool's x-mcp-header annotations from that text: the
// call carries the parameter's header.
func TestListingKeepsSchemaText(t *testing.T) {
	// Not parallel: it measures the live heap.
	const n = 2000
	const schema = `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},` +
		`"p%d":{"type":"string","description":"a property of this tool's input, described at some length","enum":["one","two","three"]}}}`
	for _, proto := range []string{"2025-11-25", "2026-07-28"} {
		server := newSDKServer(&mcp.ServerOptions{SupportedProtocolVersions: []string{proto}})
		var text int
		for i := range n {
			s := strings.ReplaceAll(schema, "%d", fmt.Sprint(i))
			text += len(s)
			server.AddTool(&mcp.Tool{Name: fmt.Sprintf("tool_%d", i), InputSchema: json.RawMessage(s), OutputSchema: json.RawMessage(s)}, noop)
		}
		var (
			mu     sync.Mutex
			region []string
		)
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if v := r.Header.Get("Mcp-Param-Region"); v != "" {
				mu.Lock()
				region = append(region, v)
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		}))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := connect(t, mcphost.ServerConfig{Name: "big", URL: ts.URL})
		list, err := s.Tools(context.Background())
		if err != nil || len(list) != n {
			t.Fatalf("%s: %v, %d tools", proto, err, len(list))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perTool := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
		// Both schemas' text is 2*text/n bytes a tool; decoded, go-sdk's
		// trees of them took about 4 KB more.
		if limit := int64(2*text/n) + 2500; perTool > limit {
			t.Errorf("%s: the listing keeps %d bytes a tool, want at most %d (the schemas' text is %d)", proto, perTool, limit, 2*text/n)
		}
		t.Logf("%s: %d bytes a tool (schemas' text %d)", proto, perTool, 2*text/n)
		if _, err := s.Call(context.Background(), "tool_7", map[string]any{"region": "eu-west"}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := strings.Join(region, ",")
		mu.Unlock()
		if proto >= "2026-07-28" && got != "eu-west" {
			t.Errorf("%s: Mcp-Param-Region headers %q, want the argument's eu-west once", proto, got)
		}
		runtime.KeepAlive(list)
		s.Close()
		ts.Close()
	}
}

// Hostile listings: a name listed twice, a schema that is not an object,
// a null one, one go-sdk refuses (so its decoding and the raw listing no
// longer match one for one) are each reported or kept as sent, and a
// 4 MB schema is kept as its text; nothing panics.
func TestHostileListingSchemas(t *testing.T) {
	t.Parallel()
	s := connect(t, rawServer(t, "hostile", `[
 {"name":"twice","inputSchema":{"type":"object"}},
 {"name":"twice","inputSchema":{"type":"object","title":"again"}},
 {"name":"str","inputSchema":"not a schema"},
 {"name":"null","inputSchema":null},
 {"name":"header","inputSchema":{"type":"object","properties":{"o":{"type":"object","x-mcp-header":"X-O"}}}},
 {"name":"after","inputSchema":{"type":"object", "title": "spaced"}}]`))
	got := tools(t, s)
	if !strings.Contains(got["twice"].Problem, "more than once") {
		t.Errorf("twice: problem %q", got["twice"].Problem)
	}
	// Kept as sent, as before (drift and the document's own checks
	// judge a schema).
	if d := got["str"].Definition; string(d.InputSchema) != `"not a schema"` {
		t.Errorf("str: schema %s", d.InputSchema)
	}
	if d := got["null"].Definition; d.InputSchema != nil {
		t.Errorf("null: schema %s, want none", d.InputSchema)
	}
	if !strings.Contains(got["header"].Problem, "refused") {
		t.Errorf("header: problem %q", got["header"].Problem)
	}
	if d := got["after"].Definition; string(d.InputSchema) != `{"type":"object", "title": "spaced"}` || got["after"].Problem != "" {
		t.Errorf("after: schema %s, problem %q", d.InputSchema, got["after"].Problem)
	}

	var props strings.Builder
	for i := range 80000 {
		if i > 0 {
			props.WriteString(",")
		}
		fmt.Fprintf(&props, `"p%d":{"type":"string","description":"property %d"}`, i, i)
	}
	huge := `{"type":"object","properties":{` + props.String() + `}}`
	server := newSDKServer(nil)
	server.AddTool(&mcp.Tool{Name: "huge", InputSchema: json.RawMessage(huge)}, noop)
	url, _ := serve(t, server, "")
	hs := connect(t, mcphost.ServerConfig{Name: "huge", URL: url})
	list, err := hs.Tools(context.Background())
	if err != nil || len(list) != 1 {
		t.Fatalf("%v, %d tools", err, len(list))
	}
	if d := list[0].Definition; len(huge) < 4<<20 || string(d.InputSchema) != huge {
		t.Errorf("the %d-byte schema came back as %d bytes", len(huge), len(d.InputSchema))
	}
	if _, ok := list[0].Upstream.InputSchema.(json.RawMessage); !ok {
		t.Errorf("Upstream's schema is %T, want json.RawMessage", list[0].Upstream.InputSchema)
	}
}
