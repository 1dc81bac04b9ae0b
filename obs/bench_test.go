package obs

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/internal/redact"
	"github.com/openplaybook/openplaybook/registry"
)

// BenchmarkCallPath is what obs adds to one read call through the
// gateway, without the call: the request's middleware (access line,
// request count; an /mcp request has no HTTP span by default), TraceCall,
// and the report of the call's two committed records (decision lines,
// call count, the span's end).
// Sub-benchmarks: logs at info only; logs, metrics and traces. The
// end-to-end ratio is serve's TestBenchmarkOperate (BENCHMARKS.md).
func BenchmarkCallPath(b *testing.B) {
	for _, c := range []struct {
		name string
		env  map[string]string
	}{
		{"logs", nil},
		{"all", map[string]string{"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_TRACES_EXPORTER": "otlp"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := Config{LogFormat: "json", Stderr: io.Discard, Getenv: func(k string) string { return c.env[k] }}
			if c.env != nil {
				cfg.SpanExporter = tracetest.NewNoopExporter()
			}
			o, err := New(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer o.Shutdown(context.Background())
			red := redact.New([]string{"sk_test_4eC39HqLyjWDarjtT1zdp7dc", "hunter2-hunter2"})
			o.SetRedact(red)
			h := o.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "event: message\ndata: {}\n\n")
			}), Proxies{}, nil)
			run := "run_7fd8bec8b5811c37"
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				req := httptest.NewRequest("POST", "/mcp/runs/"+run, nil)
				req.RemoteAddr = "127.0.0.1:40000"
				h.ServeHTTP(httptest.NewRecorder(), req)
				o.TraceCall(ctx, registry.CallInfo{Run: run, Step: "lookup", Attempt: 1, Index: -1}, "customer.get", "d1")
				now := time.Now().UTC().Format(time.RFC3339Nano)
				idx := strconv.Itoa(i)
				o.observe(ctx, []audit.Record{
					{Run: run, Seq: int64(2*i + 1), Kind: "call.started", Step: "lookup", Tool: "customer.get", Time: now, Data: []byte(`{"attempt":1,"index":` + idx + `,"argsDigest":"d1"}`)},
					{Run: run, Seq: int64(2*i + 2), Kind: "call.succeeded", Step: "lookup", Tool: "customer.get", Time: now, Data: []byte(`{"attempt":1,"index":` + idx + `}`)},
				})
			}
		})
	}
}
