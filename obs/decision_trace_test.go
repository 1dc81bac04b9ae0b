package obs

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/openplaybook/openplaybook/audit"
)

// keptSpans is an in-memory exporter whose spans outlive Shutdown.
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

// TestTraceDecisionAfterWaiting: a gate and an approval that a person
// decides after the run went waiting (their spans ended with the run's
// span, as still waiting) have their decision in the trace of the
// execution that goes on: the gate.approved and approval.denied records
// are events of the resumed run's span, as any record without a span of
// its own is, and are not dropped; so is the step.failed record a
// cancel writes for the step of a waiting run.
func TestTraceDecisionAfterWaiting(t *testing.T) {
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	o, err := New(context.Background(), Config{Stderr: &bytes.Buffer{}, LogLevel: "error", SpanExporter: exp,
		Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	at := func(i int) string { return now.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano) }
	o.observe(context.Background(), []audit.Record{
		{Run: "run_g", Seq: 1, Kind: "run.created", Time: at(1)},
		{Run: "run_g", Seq: 2, Kind: "step.started", Step: "check", Time: at(2), Data: []byte(`{"attempt":1}`)},
		{Run: "run_g", Seq: 3, Kind: "gate.waiting", Step: "check", Time: at(3), Data: []byte(`{"attempt":1}`)},
		{Run: "run_g", Seq: 4, Kind: "step.started", Step: "pay", Time: at(4), Data: []byte(`{"attempt":1}`)},
		{Run: "run_g", Seq: 5, Kind: "approval.requested", Step: "pay", Tool: "charge.create", Time: at(5), Data: []byte(`{"attempt":1,"approval":"apr_1"}`)},
		{Run: "run_g", Seq: 6, Kind: "run.waiting", Time: at(6)},
		{Run: "run_g", Seq: 7, Kind: "run.resumed", Time: at(7)},
		{Run: "run_g", Seq: 8, Kind: "gate.approved", Step: "check", Time: at(8), Data: []byte(`{"attempt":1}`)},
		{Run: "run_g", Seq: 9, Kind: "approval.denied", Step: "pay", Tool: "charge.create", Time: at(9), Data: []byte(`{"attempt":1,"approval":"apr_1"}`)},
		{Run: "run_g", Seq: 10, Kind: "run.completed", Time: at(10)},
		// Cancelled while it waits: the step's failure is written by
		// the cancel, with no step span open.
		{Run: "run_c", Seq: 1, Kind: "run.created", Time: at(1)},
		{Run: "run_c", Seq: 2, Kind: "step.started", Step: "check", Time: at(2), Data: []byte(`{"attempt":1}`)},
		{Run: "run_c", Seq: 3, Kind: "gate.waiting", Step: "check", Time: at(3), Data: []byte(`{"attempt":1}`)},
		{Run: "run_c", Seq: 4, Kind: "run.waiting", Time: at(4)},
		{Run: "run_c", Seq: 5, Kind: "step.failed", Step: "check", Time: at(5), Data: []byte(`{"attempt":1}`)},
		{Run: "run_c", Seq: 6, Kind: "run.cancelled", Time: at(6)},
		{Run: "run_c", Seq: 7, Kind: "run.failed", Time: at(7)},
	})
	if err := o.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, s := range exp.GetSpans() {
		for _, e := range s.Events {
			found[e.Name] = true
		}
		for _, a := range s.Attributes {
			if a.Key == "openplaybook.gate.outcome" && a.Value.AsString() == "approved" {
				found["gate.approved"] = true
			}
			if a.Key == "openplaybook.approval.outcome" && a.Value.AsString() == "denied" {
				found["approval.denied"] = true
			}
		}
	}
	for _, k := range []string{"gate.approved", "approval.denied", "step.failed"} {
		if !found[k] {
			t.Errorf("the %s record written after the run waited is nowhere in the trace (events and outcomes seen: %v)", k, found)
		}
	}
}

// TestDecisionLinesNameTheRunsTrace: with tracing on, each decision line
// carries the trace_id of the run's spans its record went into (the
// trace an operator opens from the line), also when no HTTP span is on
// the context (an agent's /mcp request has none by default); a record
// outside an execution (an agent token issued before the run's first
// span here) carries none.
func TestDecisionLinesNameTheRunsTrace(t *testing.T) {
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	var logs bytes.Buffer
	o, err := New(context.Background(), Config{Stderr: &logs, LogFormat: "json", SpanExporter: exp,
		Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	o.observe(context.Background(), []audit.Record{
		{Run: "run_l", Seq: 1, Kind: "agent.token-issued", Time: now},
		{Run: "run_l", Seq: 2, Kind: "run.created", Time: now},
		{Run: "run_l", Seq: 3, Kind: "step.started", Step: "s", Time: now, Data: []byte(`{"attempt":1}`)},
		{Run: "run_l", Seq: 4, Kind: "call.refused", Step: "s", Tool: "x.y", Time: now, Data: []byte(`{"attempt":1,"index":0,"code":"not-allowed"}`)},
		{Run: "run_l", Seq: 5, Kind: "run.completed", Time: now},
	})
	if err := o.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var runTrace string
	for _, s := range exp.GetSpans() {
		if s.Name == "run run_l" {
			runTrace = s.SpanContext.TraceID().String()
		}
	}
	if runTrace == "" {
		t.Fatal("no span of the run")
	}
	lines := 0
	for _, l := range bytes.Split(bytes.TrimSpace(logs.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		lines++
		got, _ := m["trace_id"].(string)
		want := runTrace
		if m["msg"] == "agent.token-issued" {
			want = ""
		}
		if got != want {
			t.Errorf("line %s: trace_id %q, want %q", l, got, want)
		}
	}
	if lines != 5 {
		t.Errorf("%d lines, want 5: %s", lines, logs.String())
	}
}

// TestRefusedNamesAreNoLabel: a call refused for its name (the agent's
// choice of text) is counted under tool="(not allowed)", so no agent
// fills the series limit or writes what it likes into the metrics; a
// refusal of a tool the step allows keeps its name.
func TestRefusedNamesAreNoLabel(t *testing.T) {
	env := map[string]string{"OTEL_METRICS_EXPORTER": "prometheus"}
	o, err := New(context.Background(), Config{Stderr: &bytes.Buffer{}, LogLevel: "error", Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Shutdown(context.Background())
	now := time.Now().UTC().Format(time.RFC3339Nano)
	var recs []audit.Record
	for i, code := range []string{"not-allowed", "unknown-step", "too-large", "drifted"} {
		recs = append(recs, audit.Record{Run: "run_m", Seq: int64(i + 1), Kind: "call.refused", Step: "s", Tool: "agent-text-" + code, Time: now,
			Data: []byte(`{"attempt":1,"index":` + strconv.Itoa(i) + `,"code":"` + code + `"}`)})
	}
	o.observe(context.Background(), recs)
	w := httptest.NewRecorder()
	o.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body := w.Body.String()
	for _, bad := range []string{"agent-text-not-allowed", "agent-text-unknown-step", "agent-text-too-large"} {
		if strings.Contains(body, bad) {
			t.Errorf("/metrics holds the refused name %q", bad)
		}
	}
	if !strings.Contains(body, `tool="(not allowed)"`) || !strings.Contains(body, `tool="agent-text-drifted"`) {
		t.Errorf("/metrics lacks the (not allowed) series or the allowed tool's refusal:\n%s", body)
	}
}
