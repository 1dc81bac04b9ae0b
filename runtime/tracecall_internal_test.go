package runtime

import (
	"context"
	"testing"

	"github.com/openplaybook/openplaybook/registry"
)

type panickingTracer struct{}

func (panickingTracer) TraceCall(context.Context, registry.CallInfo, string, string) context.Context {
	panic("tracer bug")
}

type markingTracer struct{}

type markKey struct{}

func (markingTracer) TraceCall(ctx context.Context, _ registry.CallInfo, tool, _ string) context.Context {
	return context.WithValue(ctx, markKey{}, tool)
}

// TestTraceCallSurvivesATracerPanic: a tracer that panics leaves the
// call's context as it was (the call goes on, untraced); one that works
// gets the tool's name as the audit records store it.
func TestTraceCallSurvivesATracerPanic(t *testing.T) {
	type k struct{}
	ctx := context.WithValue(context.Background(), k{}, "v")
	if got := traceCall(panickingTracer{}, ctx, registry.CallInfo{}, "customer.get", "d"); got != ctx {
		t.Errorf("a panicking tracer changed the context")
	}
	got := traceCall(markingTracer{}, ctx, registry.CallInfo{}, recordTool("bad\xffname"), "d")
	if v, _ := got.Value(markKey{}).(string); v != recordTool("bad\xffname") || v == "bad\xffname" {
		t.Errorf("the tracer got %q", v)
	}
}
