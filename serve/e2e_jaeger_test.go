package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/obs"
)

// jaegerBinary finds Jaeger (v1.76.0's all-in-one; scripts/jaeger.sh
// builds it): $OPENPLAYBOOK_JAEGER, else jaeger-v1.76.0 or jaeger on PATH
// (scripts/test.sh puts $(go env GOPATH)/bin there). Without it the
// test is skipped, and fails under CI.
func jaegerBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("OPENPLAYBOOK_JAEGER"); p != "" {
		return p
	}
	for _, name := range []string{"jaeger-v1.76.0", "jaeger"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("Jaeger is not installed: scripts/jaeger.sh builds it (.ci/run runs it)")
	}
	t.Skip("Jaeger is not installed (scripts/jaeger.sh builds it)")
	return ""
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startJaeger starts Jaeger all-in-one with in-memory storage, every
// port on loopback, and returns its OTLP/HTTP and query base URLs.
func startJaeger(t *testing.T) (otlp, query string) {
	t.Helper()
	bin := jaegerBinary(t)
	otlpAddr, queryAddr, grpcAddr, health := freePort(t), freePort(t), freePort(t), freePort(t)
	cfg := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: %s
    grpc:
      endpoint: %s
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 10000
  healthcheckv2:
    use_v2: true
    http:
      endpoint: %s
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`, queryAddr, grpcAddr, health, otlpAddr)
	p := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuf{}
	cmd := exec.Command(bin, "--config", "file:"+p)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	// Ready when its query API answers (the health check says so first).
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + queryAddr + "/api/services")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("Jaeger exited: %v\n%s", err, logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger's query API did not answer:\n%s", logs.String())
		}
	}
	return "http://" + otlpAddr, "http://" + queryAddr
}

// jaegerSpan is a span as Jaeger's query API returns it.
type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

func (s jaegerSpan) tag(k string) string {
	for _, t := range s.Tags {
		if t.Key == k {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// jaegerTraces reads every trace of service, and the raw answer.
func jaegerTraces(t *testing.T, query, service string) ([]jaegerSpan, string) {
	t.Helper()
	resp, err := http.Get(query + "/api/traces?limit=1000&lookback=1h&service=" + url.QueryEscape(service))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v struct {
		Data []struct {
			Spans []jaegerSpan `json:"spans"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("Jaeger's answer: %v: %s", err, b)
	}
	var spans []jaegerSpan
	for _, tr := range v.Data {
		spans = append(spans, tr.Spans...)
	}
	return spans, string(b)
}

// TestOperateTracesReachJaeger: a run through the gateway (an MCP client
// as the agent, the memory MCP server, built-ins, a gate) exports its
// spans over OTLP to a real Jaeger; read back through Jaeger's query
// API they form the tree run > step > execute_tool / gate, refusals
// carry their code, each tool call links to the trace context the agent
// sent in its _meta, an HTTP request's W3C traceparent is continued, and
// no attribute holds the planted secret or an argument value.
func TestOperateTracesReachJaeger(t *testing.T) {
	otlp, query := startJaeger(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp)
	service := fmt.Sprintf("openplaybook-test-%d", time.Now().UnixNano())
	r := newOpsRig(t, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SERVICE_NAME": service, "OTEL_EXPORTER_OTLP_ENDPOINT": otlp}, "", obs.Proxies{})
	if !r.o.Tracing() {
		t.Fatal("tracing is off")
	}
	// The agent sends its own trace context with each call.
	const agentTrace, agentSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	r.callMeta = map[string]any{"traceparent": "00-" + agentTrace + "-" + agentSpan + "-01"}
	run := r.scenario(t)

	// A request that carries a traceparent: its server span continues it.
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, _ := http.NewRequest("GET", r.ts.URL+"/api/v1/runs/"+run, nil)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET run: %v %v", resp, err)
	}
	resp.Body.Close()
	if tp := resp.Header.Get("traceparent"); !strings.Contains(tp, traceID) {
		t.Errorf("the answer's traceparent %q is not in trace %s", tp, traceID)
	}
	if err := r.o.Shutdown(context.Background()); err != nil {
		t.Fatalf("flushing the spans: %v", err)
	}

	var spans []jaegerSpan
	var raw string
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans, raw = jaegerTraces(t, query, service)
		done := false
		for _, s := range spans {
			done = done || (s.OperationName == "run "+run && s.tag("openplaybook.run.status") == "completed")
		}
		if done && strings.Contains(raw, traceID) {
			break
		}
		if time.Now().After(deadline) {
			resp, _ := http.Get(query + "/api/services")
			var svcs []byte
			if resp != nil {
				svcs, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			t.Fatalf("Jaeger has no completed run span for %s (nor trace %s) after 30 s: %d spans; services %s; answer %.300s", run, traceID, len(spans), svcs, raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
	byID := map[string]jaegerSpan{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	parentName := func(s jaegerSpan) string { return byID[s.parent()].OperationName }
	count := map[string]int{}
	for _, s := range spans {
		switch {
		case strings.HasPrefix(s.OperationName, "execute_tool "):
			step := byID[s.parent()]
			if !strings.HasPrefix(step.OperationName, "step ") || !strings.HasPrefix(parentName(step), "run ") {
				t.Errorf("span %q is not under a step under a run (parent %q)", s.OperationName, step.OperationName)
			}
			if s.tag("gen_ai.tool.name") == "" || s.tag("gen_ai.operation.name") != "execute_tool" {
				t.Errorf("span %q lacks the GenAI attributes: %+v", s.OperationName, s.Tags)
			}
			key := s.OperationName + " in " + step.OperationName + ": " + s.tag("openplaybook.decision.outcome") + " " + s.tag("openplaybook.refusal.code")
			count[key]++
			if s.TraceID != byID[step.parent()].TraceID {
				t.Errorf("span %q is not in its run's trace", s.OperationName)
			}
			// The agent's _meta.traceparent is a link (Jaeger: FOLLOWS_FROM).
			linked := false
			for _, ref := range s.References {
				linked = linked || (ref.RefType == "FOLLOWS_FROM" && ref.TraceID == agentTrace && ref.SpanID == agentSpan)
			}
			if !linked {
				t.Errorf("span %q does not link to the agent's trace context %s-%s: %+v", s.OperationName, agentTrace, agentSpan, s.References)
			}
		case strings.HasPrefix(s.OperationName, "gate "):
			count[s.OperationName+" in "+parentName(s)+": "+s.tag("openplaybook.gate.outcome")]++
		case strings.HasPrefix(s.OperationName, "step "):
			if p := byID[s.parent()]; p.OperationName != "run "+run || p.tag("openplaybook.run.id") != run {
				t.Errorf("step span %q is under %q", s.OperationName, p.OperationName)
			}
		}
	}
	for _, want := range []string{
		"execute_tool mcp.memory.create_entities in step lookup: refused not-allowed",
		"execute_tool Customer.get in step lookup: refused not-allowed",
		"execute_tool customer.get in step lookup: succeeded ",
		"execute_tool note.add in step lookup: succeeded ",
		"execute_tool mcp.memory.create_entities in step wrapup: succeeded ",
		"gate review in step review: approved",
	} {
		if count[want] != 1 {
			t.Errorf("%d spans %q, want 1; have %v", count[want], want, count)
		}
	}
	continued := false
	for _, s := range spans {
		if s.TraceID == traceID && s.parent() == parentID && strings.HasPrefix(s.OperationName, "GET ") {
			continued = true
		}
	}
	if !continued {
		t.Errorf("no server span continues the traceparent's trace %s", traceID)
	}
	for _, bad := range []string{plantedSecret, "argument-value-note-body", "argument-value-entity", "Mallory", "cus_ada"} {
		if strings.Contains(raw, bad) {
			t.Errorf("a span Jaeger holds contains %q", bad)
		}
	}
}
