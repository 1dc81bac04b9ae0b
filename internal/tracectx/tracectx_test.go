package tracectx_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/openplaybook/openplaybook/internal/tracectx"
)

const valid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// TestExtractMetaIgnoresWhatIsNotATraceContext: a malformed, oversized,
// all-zero or non-string traceparent gives an invalid span context, never
// a panic; a valid one is read as remote.
func TestExtractMetaIgnoresWhatIsNotATraceContext(t *testing.T) {
	for _, v := range []any{
		nil, 42, true, []any{valid}, map[string]any{"traceparent": valid}, "",
		"00-zz-not-a-trace-context-01",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01", // zero trace id
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", // zero span id
		"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", // version ff
		"00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01", // upper case
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
		valid + "-extra",
		strings.Repeat("0", 1<<20),
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\x00",
	} {
		if sc := tracectx.ExtractMeta(map[string]any{"traceparent": v, "tracestate": "a=1"}); sc.IsValid() {
			t.Errorf("traceparent %.80v read as %v", v, sc)
		}
	}
	sc := tracectx.ExtractMeta(map[string]any{"traceparent": valid, "tracestate": 7})
	if !sc.IsValid() || !sc.IsRemote() || sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || sc.SpanID().String() != "b7ad6b7169203331" {
		t.Errorf("a valid traceparent read as %v", sc)
	}
	if sc := tracectx.ExtractMeta(nil); sc.IsValid() {
		t.Errorf("no _meta read as %v", sc)
	}
}

// TestInjectOnlyUnderASpanContext: nothing is written without a valid
// span context; with one, traceparent (and tracestate when set).
func TestInjectOnlyUnderASpanContext(t *testing.T) {
	ctx := context.Background()
	if m := tracectx.InjectMeta(ctx, nil); m != nil {
		t.Errorf("InjectMeta without a span context: %v", m)
	}
	h := http.Header{}
	tracectx.InjectHeader(ctx, h)
	if len(h) != 0 {
		t.Errorf("InjectHeader without a span context: %v", h)
	}
	sc := tracectx.ExtractMeta(map[string]any{"traceparent": valid})
	ctx = trace.ContextWithSpanContext(ctx, sc)
	m := tracectx.InjectMeta(ctx, map[string]any{"progressToken": 1})
	if m["traceparent"] != valid || m["progressToken"] != 1 {
		t.Errorf("InjectMeta: %v", m)
	}
	if _, ok := m["tracestate"]; ok {
		t.Errorf("InjectMeta wrote an empty tracestate: %v", m)
	}
	tracectx.InjectHeader(ctx, h)
	if h.Get("traceparent") != valid {
		t.Errorf("InjectHeader: %v", h)
	}
}
