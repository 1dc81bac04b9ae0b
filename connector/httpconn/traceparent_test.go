package httpconn_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"go.opentelemetry.io/otel/trace"

	"github.com/openplaybook/openplaybook/connector"
	"github.com/openplaybook/openplaybook/registry"
)

// TestTraceparentHeader: a call made under a span context (the
// runtime's execute_tool span, when tracing is on) sends it as the W3C
// traceparent and tracestate headers; one made without sends neither.
func TestTraceparentHeader(t *testing.T) {
	var got []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Clone())
		io.WriteString(w, `{"id": 1, "name": "Widget"}`)
	}))
	defer srv.Close()
	c := open(t, spec(nil), connector.Config{BaseURL: srv.URL})
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ts, _ := trace.ParseTraceState("op=1")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	base := registry.WithCallInfo(context.Background(), registry.CallInfo{Run: "run_1", Step: "s", Attempt: 1, Index: 0})
	for _, ctx := range []context.Context{trace.ContextWithSpanContext(base, sc), base} {
		if _, err := c.Tools()["acme.item.get"].Call(ctx, jsontext.Value(`{"id": "1"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d requests, want 2", len(got))
	}
	if tp := got[0].Get("traceparent"); tp != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
		t.Errorf("traceparent %q under the span context", tp)
	}
	if st := got[0].Get("tracestate"); st != "op=1" {
		t.Errorf("tracestate %q under the span context", st)
	}
	if got[0].Get("Authorization") != "Bearer "+secret {
		t.Errorf("the credential is gone: %v", got[0])
	}
	if tp, st := got[1].Values("traceparent"), got[1].Values("tracestate"); len(tp)+len(st) != 0 {
		t.Errorf("without a span context: traceparent %v, tracestate %v, want none", tp, st)
	}
}
