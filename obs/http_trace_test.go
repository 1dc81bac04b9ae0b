package obs

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestAgentRequestsBeginTheirOwnTrace: an operator's API request that
// carries a traceparent is continued (its server span in the caller's
// trace); an agent's request to /mcp is not: its span begins a trace of
// the server's own, linked to the agent's span, so no agent chooses the
// trace of the server's spans and lines.
func TestAgentRequestsBeginTheirOwnTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	o, err := New(context.Background(), Config{Stderr: &bytes.Buffer{}, LogLevel: "error", SpanExporter: keepOnShutdown{exp}, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	h := o.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), Proxies{}, nil)
	const remote = "00-11111111111111111111111111111111-2222222222222222-01"
	for _, path := range []string{"/api/v1/runs", "/mcp/runs/run_1"} {
		req := httptest.NewRequest("POST", path, nil)
		req.Header.Set("traceparent", remote)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if err := o.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for _, s := range spans {
		inCaller := s.SpanContext.TraceID().String() == "11111111111111111111111111111111"
		switch s.Name {
		case "POST /api":
			if !inCaller || s.Parent.SpanID().String() != "2222222222222222" {
				t.Errorf("the API request's span is not the caller's child: trace %s parent %s", s.SpanContext.TraceID(), s.Parent.SpanID())
			}
		case "POST /mcp":
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
}

// keepOnShutdown keeps the spans an in-memory exporter holds when the
// provider shuts down (tracetest's exporter forgets them).
type keepOnShutdown struct{ *tracetest.InMemoryExporter }

func (keepOnShutdown) Shutdown(context.Context) error { return nil }
