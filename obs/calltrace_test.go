package obs

import (
	"bytes"
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/registry"
)

// BenchmarkTraceCall is what tracing adds to a read call's path (issue
// 23, BENCHMARKS.md): TraceCall as the runtime asks it before the tool
// runs, and the delivery of its call.started and call.succeeded records
// taking the span up (done off the call's path in serve).
func BenchmarkTraceCall(b *testing.B) {
	o, err := New(context.Background(), Config{Stderr: &bytes.Buffer{}, LogLevel: "error", SpanExporter: tracetest.NewNoopExporter(),
		Getenv: func(string) string { return "" }})
	if err != nil {
		b.Fatal(err)
	}
	defer o.Shutdown(context.Background())
	now := time.Now().UTC().Format(time.RFC3339Nano)
	o.observe(context.Background(), []audit.Record{
		{Run: "run_b", Kind: "run.created", Time: now},
		{Run: "run_b", Kind: "step.started", Step: "s", Time: now, Data: []byte(`{"attempt":1}`)},
	})
	ci := registry.CallInfo{Run: "run_b", Step: "s", Attempt: 1, Index: -1}
	recs := []audit.Record{
		{Run: "run_b", Kind: "call.started", Step: "s", Tool: "customer.get", Time: now, Data: []byte(`{"attempt":1,"index":0,"argsDigest":"d1"}`)},
		{Run: "run_b", Kind: "call.succeeded", Step: "s", Tool: "customer.get", Time: now, Data: []byte(`{"attempt":1,"index":0}`)},
	}
	b.Run("TraceCall", func(b *testing.B) {
		for b.Loop() {
			ctx := o.TraceCall(context.Background(), ci, "customer.get", "d1")
			if !trace.SpanContextFromContext(ctx).IsValid() {
				b.Fatal("no span context")
			}
			b.StopTimer()
			o.observe(context.Background(), recs)
			b.StartTimer()
		}
	})
	b.Run("records", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			o.TraceCall(context.Background(), ci, "customer.get", "d1")
			b.StartTimer()
			o.observe(context.Background(), recs)
		}
	})
	o.runs.mu.Lock()
	live := len(o.runs.runs["run_b"].live)
	o.runs.mu.Unlock()
	if live != 0 {
		b.Fatalf("%d read spans not taken up by their records", live)
	}
}
