package mcphost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
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
