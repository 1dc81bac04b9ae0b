package obs

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestAgentRequestsBeginTheirOwnTrace: an operator's API request that
// carries a traceparent is continued (its server span in the caller's
// trace); an agent's request to /mcp is not: by default it has no HTTP
// span (what it does links to the agent's span), and with
// OPENPLAYBOOK_TRACE_MCP_HTTP=true its span begins a trace of the
// server's own, linked to the agent's span, so no agent chooses the
// trace of the server's spans and lines.
func TestAgentRequestsBeginTheirOwnTrace(t *testing.T) {
	const remote = "00-11111111111111111111111111111111-2222222222222222-01"
	for _, mcpHTTP := range []string{"", "true"} {
		t.Run("OPENPLAYBOOK_TRACE_MCP_HTTP="+mcpHTTP, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			env := map[string]string{"OPENPLAYBOOK_TRACE_MCP_HTTP": mcpHTTP}
			o, err := New(context.Background(), Config{Stderr: &bytes.Buffer{}, LogLevel: "error", SpanExporter: keepOnShutdown{exp}, Getenv: func(k string) string { return env[k] }})
			if err != nil {
				t.Fatal(err)
			}
			// links: what the spans begun for each request's work link to.
			links := map[string][]trace.Link{}
			h := o.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				links[r.URL.Path] = linksOf(r.Context())
			}), Proxies{}, nil)
			answers := map[string]http.Header{}
			for _, path := range []string{"/api/v1/runs", "/mcp/runs/run_1"} {
				req := httptest.NewRequest("POST", path, nil)
				req.Header.Set("traceparent", remote)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				answers[path] = w.Header()
			}
			if err := o.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans := exp.GetSpans()
			want := 1
			if mcpHTTP == "true" {
				want = 2
			}
			if len(spans) != want {
				t.Fatalf("%d spans, want %d", len(spans), want)
			}
			var mcpSpan trace.SpanID
			for _, s := range spans {
				inCaller := s.SpanContext.TraceID().String() == "11111111111111111111111111111111"
				switch s.Name {
				case "POST /api":
					if !inCaller || s.Parent.SpanID().String() != "2222222222222222" {
						t.Errorf("the API request's span is not the caller's child: trace %s parent %s", s.SpanContext.TraceID(), s.Parent.SpanID())
					}
				case "POST /mcp":
					mcpSpan = s.SpanContext.SpanID()
					if inCaller || s.Parent.IsValid() {
						t.Errorf("the agent's request continued its trace: trace %s parent %s", s.SpanContext.TraceID(), s.Parent.SpanID())
					}
					if len(s.Links) != 1 || s.Links[0].SpanContext.TraceID().String() != "11111111111111111111111111111111" {
						t.Errorf("the agent's request does not link to its span: %+v", s.Links)
					}
				default:
					t.Errorf("span %q", s.Name)
				}
			}
			// The agent's work links to its traceparent (and to the
			// request's span, when there is one), never as a parent.
			var toAgent, toSpan bool
			for _, l := range links["/mcp/runs/run_1"] {
				toAgent = toAgent || l.SpanContext.TraceID().String() == "11111111111111111111111111111111"
				toSpan = toSpan || (mcpSpan.IsValid() && l.SpanContext.SpanID() == mcpSpan)
			}
			if !toAgent || toSpan != mcpSpan.IsValid() {
				t.Errorf("the agent's work links to %+v: to its traceparent %v, to the request's span %v (want %v)", links["/mcp/runs/run_1"], toAgent, toSpan, mcpSpan.IsValid())
			}
			if tp := answers["/mcp/runs/run_1"].Get("traceparent"); (tp != "") != mcpSpan.IsValid() || strings.Contains(tp, "11111111111111111111111111111111") {
				t.Errorf("the agent's answer carries traceparent %q", tp)
			}
		})
	}
	if _, err := New(context.Background(), Config{Stderr: &bytes.Buffer{}, Getenv: func(k string) string {
		return map[string]string{"OPENPLAYBOOK_TRACE_MCP_HTTP": "yes"}[k]
	}}); err == nil || !strings.Contains(err.Error(), "OPENPLAYBOOK_TRACE_MCP_HTTP") {
		t.Errorf("OPENPLAYBOOK_TRACE_MCP_HTTP=yes: %v, want an error naming it", err)
	}
}

// keepOnShutdown keeps the spans an in-memory exporter holds when the
// provider shuts down (tracetest's exporter forgets them).
type keepOnShutdown struct{ *tracetest.InMemoryExporter }

func (keepOnShutdown) Shutdown(context.Context) error { return nil }

// TestAgentMetadataRequestNotContinued: the OAuth metadata an agent's
// client fetches (RFC 9728's /.well-known/oauth-protected-resource/...,
// unauthenticated) is an agent's request too: its traceparent is not
// continued nor echoed; and a span's url.path goes through the redactor,
// as the access line's path does.
func TestAgentMetadataRequestNotContinued(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	env := map[string]string{"OPENPLAYBOOK_TRACE_MCP_HTTP": "true"}
	o, err := New(context.Background(), Config{Stderr: &bytes.Buffer{}, LogLevel: "error", SpanExporter: keepOnShutdown{exp}, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	o.SetRedact(func(s string) string { return strings.ReplaceAll(s, "sekrit-123", "[redacted]") })
	h := o.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), Proxies{}, nil)
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp/runs/run_1", "/api/v1/runs/sekrit-123"} {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("traceparent", "00-11111111111111111111111111111111-2222222222222222-01")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if strings.HasPrefix(path, "/.well-known/") && strings.Contains(w.Header().Get("traceparent"), "1111111111") {
			t.Errorf("%s: the answer echoes the agent's trace: %q", path, w.Header().Get("traceparent"))
		}
	}
	if err := o.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range exp.GetSpans() {
		for _, a := range s.Attributes {
			if a.Key == "url.path" && strings.Contains(a.Value.AsString(), "sekrit") {
				t.Errorf("span %q: url.path %q is not redacted", s.Name, a.Value.AsString())
			}
		}
		if s.Name == "GET /.well-known" && (s.Parent.IsValid() || s.SpanContext.TraceID().String() == "11111111111111111111111111111111") {
			t.Errorf("the metadata request continued the agent's trace: parent %s", s.Parent.SpanID())
		}
	}
}
