package obs

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/openplaybook/openplaybook/audit"
)

// instruments are the metrics (docs/operate.md lists them).
type instruments struct {
	calls     metric.Int64Counter     // openplaybook.calls{tool,outcome}
	refusals  metric.Int64Counter     // openplaybook.refusals{code}
	waits     metric.Float64Histogram // openplaybook.wait.duration{kind,outcome}, s
	tokens    metric.Int64Counter     // gen_ai.client.token.usage-like: openplaybook.model.tokens{provider,model,type}
	runs      metric.Int64Counter     // openplaybook.runs{status}
	sessions  metric.Int64Counter     // openplaybook.agent.sessions
	txLatency metric.Float64Histogram // openplaybook.store.tx.duration{op,ok}, s
	requests  metric.Int64Counter     // openplaybook.http.requests{route,code}

	callOpts, refusalOpts, requestOpts *optCache
	txOK, txFailed, txQueued           metric.MeasurementOption
}

// optCache keeps the measurement options of label sets that repeat (a
// route and status class, a tool and outcome), so that a request or a
// call does not build and sort its attribute set again. It holds at most
// optCacheMax sets; past that, options are built each time.
type optCache struct {
	keys [2]string // the attribute keys; a set with one key leaves keys[1] ""
	mu   sync.RWMutex
	m    map[[2]string]metric.MeasurementOption
}

const optCacheMax = 4096

func (c *optCache) get(v0, v1 string) metric.MeasurementOption {
	k := [2]string{v0, v1}
	c.mu.RLock()
	o, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return o
	}
	as := []attribute.KeyValue{attribute.String(c.keys[0], v0)}
	if c.keys[1] != "" {
		as = append(as, attribute.String(c.keys[1], v1))
	}
	o = metric.WithAttributeSet(attribute.NewSet(as...))
	c.mu.Lock()
	if c.m == nil {
		c.m = map[[2]string]metric.MeasurementOption{}
	}
	if len(c.m) < optCacheMax {
		c.m[k] = o
	}
	c.mu.Unlock()
	return o
}

func newInstruments(m metric.Meter) instruments {
	var in instruments
	in.calls, _ = m.Int64Counter("openplaybook.calls", metric.WithDescription("Tool calls by tool and outcome (succeeded, failed, refused, output-invalid, outcome-unknown)."), metric.WithUnit("{call}"))
	in.refusals, _ = m.Int64Counter("openplaybook.refusals", metric.WithDescription("Refused tool calls by refusal code."), metric.WithUnit("{call}"))
	in.waits, _ = m.Float64Histogram("openplaybook.wait.duration", metric.WithDescription("Time an approval or gate waited for a person."), metric.WithUnit("s"))
	in.tokens, _ = m.Int64Counter("openplaybook.model.tokens", metric.WithDescription("Model tokens by provider, model and type (input, output)."), metric.WithUnit("{token}"))
	in.runs, _ = m.Int64Counter("openplaybook.runs", metric.WithDescription("Run transitions by status reached (created, resumed, waiting, completed, failed, rejected, cancelled)."), metric.WithUnit("{run}"))
	in.sessions, _ = m.Int64Counter("openplaybook.agent.sessions", metric.WithDescription("External agent sessions attached to a run."), metric.WithUnit("{session}"))
	in.txLatency, _ = m.Float64Histogram("openplaybook.store.tx.duration", metric.WithDescription("Store write transaction latency."), metric.WithUnit("s"))
	in.callOpts = &optCache{keys: [2]string{"tool", "outcome"}}
	in.refusalOpts = &optCache{keys: [2]string{"code", ""}}
	in.requestOpts = &optCache{keys: [2]string{"route", "code"}}
	in.txOK = metric.WithAttributes(attribute.String("op", "tx"), attribute.Bool("ok", true))
	in.txFailed = metric.WithAttributes(attribute.String("op", "tx"), attribute.Bool("ok", false))
	in.txQueued = metric.WithAttributes(attribute.String("op", "queue"))
	in.requests, _ = m.Int64Counter("openplaybook.http.requests", metric.WithDescription("HTTP requests answered, by route and status class."), metric.WithUnit("{request}"))
	return in
}

// recordData is the union of the audit payload fields obs reads.
type recordData struct {
	Attempt      int    `json:"attempt"`
	Index        int    `json:"index"`
	Code         string `json:"code"`
	Reason       string `json:"reason"`
	Approval     string `json:"approval"`
	Purpose      string `json:"purpose"`
	By           string `json:"by"`
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	Turn         int    `json:"turn"`
	InputTokens  int64  `json:"inputTokens"`
	OutputTokens int64  `json:"outputTokens"`
	Playbook     string `json:"playbook"`
	Version      string `json:"version"`
	Agent        any    `json:"agent"`
	ArgsDigest   string `json:"argsDigest"`
}

// observe reports committed audit records: ctx is the committing
// transaction's (its span, when any, is linked from the spans begun).
func (o *Obs) observe(ctx context.Context, recs []audit.Record) {
	if o == nil {
		return
	}
	for _, r := range recs {
		o.observeOne(ctx, r)
	}
}

func (o *Obs) observeOne(ctx context.Context, r audit.Record) {
	var d recordData
	if len(r.Data) > 0 {
		_ = json.Unmarshal(r.Data, &d, json.RejectUnknownMembers(false))
	}
	t, err := time.Parse(time.RFC3339Nano, r.Time)
	if err != nil {
		t = time.Now()
	}
	var tid trace.TraceID
	if o.tracing {
		tid = o.traceRecord(ctx, r, d, t)
	}
	o.logRecord(ctx, r, d, tid)
	o.meterRecord(ctx, r, d, t)
}

// logRecord writes one decision line per record: refusals and failures
// at warn, the rest at info. Its trace_id is tid, the trace of the run's
// spans the record went into, when valid; else that of ctx's span (an
// HTTP request's), when there is one.
func (o *Obs) logRecord(ctx context.Context, r audit.Record, d recordData, tid trace.TraceID) {
	lvl := slog.LevelInfo
	switch r.Kind {
	case "call.refused", "call.failed", "call.output-invalid", "call.outcome-unknown", "step.failed", "run.failed", "run.rejected", "approval.denied", "gate.rejected", "agent.rejected", "step.call-limit":
		lvl = slog.LevelWarn
	}
	if !o.Log.Enabled(ctx, lvl) {
		return
	}
	as := make([]slog.Attr, 0, 10)
	as = append(as, slog.String("run", r.Run), slog.Int64("seq", r.Seq))
	if r.Step != "" {
		as = append(as, slog.String("step", r.Step))
	}
	if d.Attempt > 0 {
		as = append(as, slog.Int("attempt", d.Attempt))
	}
	if r.Tool != "" {
		as = append(as, slog.String("tool", r.Tool), slog.Int("index", d.Index))
	}
	if d.Code != "" {
		as = append(as, slog.String("code", d.Code))
	}
	if d.Approval != "" {
		as = append(as, slog.String("approval", d.Approval))
	}
	// A reason is logged only where a person wrote it (a decision on an
	// approval or a gate): the runtime's reasons for a refusal or a
	// failure quote the tool's error or the schema's, which may hold
	// argument values and results; the line has the code, the audit
	// record the whole reason.
	if d.Reason != "" && (strings.HasPrefix(r.Kind, "approval.") || strings.HasPrefix(r.Kind, "gate.")) {
		as = append(as, slog.String("reason", d.Reason))
	}
	if d.By != "" {
		as = append(as, slog.String("by", d.By))
	}
	if r.Kind == "model.usage" {
		as = append(as, slog.String("model", d.Model), slog.Int64("inputTokens", d.InputTokens), slog.Int64("outputTokens", d.OutputTokens))
	}
	if !tid.IsValid() {
		tid = trace.SpanContextFromContext(ctx).TraceID()
	}
	if tid.IsValid() {
		as = append(as, slog.String("trace_id", tid.String()))
	}
	o.logAttrs(ctx, lvl, r.Kind, as)
}

var (
	callOutcome = map[string]string{
		"call.succeeded": "succeeded", "call.failed": "failed", "call.refused": "refused",
		"call.output-invalid": "output-invalid", "call.outcome-unknown": "outcome-unknown",
	}
	runStatus = map[string]string{
		"run.created": "created", "run.resumed": "resumed", "run.waiting": "waiting", "run.completed": "completed",
		"run.failed": "failed", "run.rejected": "rejected", "run.cancelled": "cancelled",
	}
)

// notAllowedTool is the tool label of a call refused for its name (not
// on the step's allowedTools, for no step, or too large): such a name is
// the agent's choice, any text, and as a label it would let an agent fill
// the SDK's series limit (2,000, past which every new series, a real
// tool's too, goes to the overflow series) and put what it likes in the
// metrics. Those refusals are counted by code in openplaybook.refusals.
const notAllowedTool = "(not allowed)"

// metricTool is the tool label of a call record.
func metricTool(r audit.Record, d recordData) string {
	if r.Kind == "call.refused" {
		switch d.Code {
		case "not-allowed", "unknown-step", "too-large":
			return notAllowedTool
		}
	}
	return r.Tool
}

func (o *Obs) meterRecord(ctx context.Context, r audit.Record, d recordData, t time.Time) {
	if !o.metering {
		return
	}
	if out, ok := callOutcome[r.Kind]; ok {
		o.m.calls.Add(ctx, 1, o.m.callOpts.get(metricTool(r, d), out))
		if r.Kind == "call.refused" {
			o.m.refusals.Add(ctx, 1, o.m.refusalOpts.get(d.Code, ""))
		}
	}
	if st, ok := runStatus[r.Kind]; ok {
		o.m.runs.Add(ctx, 1, metric.WithAttributes(attribute.String("status", st)))
	}
	switch r.Kind {
	case "model.usage":
		a := []attribute.KeyValue{attribute.String("gen_ai.provider.name", d.Provider), attribute.String("gen_ai.request.model", d.Model)}
		o.m.tokens.Add(ctx, d.InputTokens, metric.WithAttributes(append(a, attribute.String("gen_ai.token.type", "input"))...))
		o.m.tokens.Add(ctx, d.OutputTokens, metric.WithAttributes(append(a, attribute.String("gen_ai.token.type", "output"))...))
	case "agent.attached":
		o.m.sessions.Add(ctx, 1)
	case "approval.requested":
		o.runs.waitStart("approval:"+d.Approval, t)
	case "approval.approved", "approval.denied", "approval.voided":
		if t0, ok := o.runs.waitEnd("approval:" + d.Approval); ok {
			o.m.waits.Record(ctx, t.Sub(t0).Seconds(), metric.WithAttributes(attribute.String("kind", "approval"), attribute.String("outcome", r.Kind[len("approval."):])))
		}
	case "gate.waiting":
		o.runs.waitStart(gateKey(r, d), t)
	case "gate.approved", "gate.rejected":
		if t0, ok := o.runs.waitEnd(gateKey(r, d)); ok {
			o.m.waits.Record(ctx, t.Sub(t0).Seconds(), metric.WithAttributes(attribute.String("kind", "gate"), attribute.String("outcome", r.Kind[len("gate."):])))
		}
	}
}

func gateKey(r audit.Record, d recordData) string {
	return "gate:" + r.Run + "\x00" + r.Step + "\x00" + strconv.Itoa(d.Attempt)
}

// runSpans holds the spans open in this process, by run, and the wait
// start times.
type runSpans struct {
	mu    sync.Mutex
	runs  map[string]*runTrace
	waits map[string]time.Time
}

// runTrace is one run's open spans: the run's, each step's (by step id)
// and each call's, approval's and gate's (by key).
type runTrace struct {
	run   trace.Span
	ctx   context.Context // carries the run span
	steps map[string]*stepTrace
	other map[string]trace.Span // calls, approvals, gates
	// live are the execute_tool spans of read calls begun when they
	// were sent ([Obs.TraceCall]) and not recorded yet, by readKey, in
	// the order they were begun.
	live map[string][]trace.Span
}

type stepTrace struct {
	span    trace.Span
	ctx     context.Context
	attempt int
	last    time.Time // the step's last record (a model turn starts there)
}

func (rs *runSpans) init() {
	rs.runs = map[string]*runTrace{}
	rs.waits = map[string]time.Time{}
}

func (rs *runSpans) waitStart(key string, t time.Time) {
	rs.mu.Lock()
	rs.waits[key] = t
	rs.mu.Unlock()
}

func (rs *runSpans) waitEnd(key string) (time.Time, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	t, ok := rs.waits[key]
	delete(rs.waits, key)
	return t, ok
}

// endAll ends every open span now (the process stops; the runs stay
// resumable, and a resumed run's spans begin again in a new trace).
func (rs *runSpans) endAll() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for id, rt := range rs.runs {
		rt.endAll(time.Now(), "stopped")
		delete(rs.runs, id)
	}
}

func (rt *runTrace) endAll(t time.Time, why string) {
	for k, sps := range rt.live {
		for _, sp := range sps {
			sp.SetAttributes(attribute.String("openplaybook.ended", why))
			sp.End(trace.WithTimestamp(t))
		}
		delete(rt.live, k)
	}
	for k, sp := range rt.other {
		sp.SetAttributes(attribute.String("openplaybook.ended", why))
		sp.End(trace.WithTimestamp(t))
		delete(rt.other, k)
	}
	for k, st := range rt.steps {
		st.span.SetAttributes(attribute.String("openplaybook.ended", why))
		st.span.End(trace.WithTimestamp(t))
		delete(rt.steps, k)
	}
	rt.run.End(trace.WithTimestamp(t))
}

// traceRecord turns records into spans:
//
//	run <id>                  run.created|run.resumed .. run.waiting|completed|failed|rejected|cancelled
//	  step <step>             step.started|step.resumed .. step.finished|failed|retried (or the run's end)
//	    chat <model>          the step's previous record .. model.usage
//	    execute_tool <tool>   call.started .. call.succeeded|failed|output-invalid|outcome-unknown; call.refused
//	    approval <tool>       approval.requested .. approval.approved|denied|voided
//	    gate <step>           gate.waiting .. gate.approved|rejected
//
// A run's spans are one trace per process that executes it; the span of
// the transaction that began a span (an HTTP request's) is linked. It
// returns the run's trace (invalid for a record outside an execution).
func (o *Obs) traceRecord(ctx context.Context, r audit.Record, d recordData, t time.Time) trace.TraceID {
	rs := &o.runs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rt := rs.runs[r.Run]
	if rt == nil && (r.Kind == "agent.token-issued" || r.Kind == "agent.token-revoked" || r.Kind == "agent.rejected") {
		return trace.TraceID{} // not an execution of the run
	}
	rt = o.runTraceLocked(ctx, r.Run, d, t)
	tid := rt.run.SpanContext().TraceID()
	// A record that begins or ends no span of its own is an event of the
	// run's span (the others are their spans: an event each would cost
	// every call two, past the SDK's limit of 128 events a span), and so
	// is a decision whose span is not open here.
	event := func() {
		rt.run.AddEvent(r.Kind, trace.WithTimestamp(t), trace.WithAttributes(attribute.Int64("openplaybook.audit.seq", r.Seq)))
	}

	step := func() *stepTrace { return o.stepLocked(ctx, rt, r.Run, r.Step, d.Attempt, t) }
	// endStep ends the step's span and the spans under it; false when
	// none is open here.
	endStep := func(status codes.Code, desc string) bool {
		st := rt.steps[r.Step]
		if st == nil {
			return false
		}
		prefix := r.Step + "\x00"
		for k, sp := range rt.other {
			if strings.HasPrefix(k, prefix) {
				sp.End(trace.WithTimestamp(t))
				delete(rt.other, k)
			}
		}
		for k, sps := range rt.live {
			if strings.HasPrefix(k, prefix) {
				for _, sp := range sps {
					sp.End(trace.WithTimestamp(t))
				}
				delete(rt.live, k)
			}
		}
		st.span.SetStatus(status, desc)
		st.span.End(trace.WithTimestamp(t))
		delete(rt.steps, r.Step)
		return true
	}
	// stepEnded is a step's end: without its span open here (it ended
	// with an earlier execution's, the run having waited, as for a
	// cancel), an event of the run's span.
	stepEnded := func(status codes.Code, desc string) {
		if !endStep(status, desc) {
			event()
		}
	}
	ck := callKey(r.Step, d.Attempt, d.Index)
	callSpan := func(st *stepTrace) trace.Span {
		sp := rt.other[ck]
		if sp == nil && r.Kind == "call.started" {
			// A read call begun when it was sent: the first of its
			// kind (same tool, same arguments) not recorded yet.
			k := readKey(r.Step, d.Attempt, r.Tool, d.ArgsDigest)
			if sps := rt.live[k]; len(sps) > 0 {
				sp = sps[0]
				if len(sps) == 1 {
					delete(rt.live, k)
				} else {
					rt.live[k] = sps[1:]
				}
				sp.SetAttributes(attribute.Int("openplaybook.call.index", d.Index))
				rt.other[ck] = sp
			}
		}
		if sp == nil {
			sp = o.startCallSpan(ctx, st, r.Run, r.Step, r.Tool, d.Index, t)
			rt.other[ck] = sp
		}
		return sp
	}

	switch r.Kind {
	case "step.started", "step.resumed":
		endStep(codes.Unset, "")
		step()
	case "step.finished":
		stepEnded(codes.Ok, "")
	case "step.failed":
		// Not the reason: it may quote a tool's error (argument values).
		stepEnded(codes.Error, "failed")
	case "step.retried":
		stepEnded(codes.Error, "retried")
	case "call.started":
		callSpan(step())
	case "call.waiting":
		callSpan(step()).AddEvent("waiting", trace.WithTimestamp(t))
	case "call.succeeded", "call.failed", "call.refused", "call.output-invalid", "call.outcome-unknown":
		st := step()
		sp := callSpan(st)
		out := callOutcome[r.Kind]
		sp.SetAttributes(attribute.String("openplaybook.decision.outcome", out))
		if d.Code != "" {
			sp.SetAttributes(attribute.String("openplaybook.refusal.code", d.Code), attribute.String("error.type", d.Code))
		}
		if r.Kind == "call.succeeded" {
			sp.SetStatus(codes.Ok, "")
		} else {
			sp.SetStatus(codes.Error, out)
		}
		sp.End(trace.WithTimestamp(t))
		delete(rt.other, ck)
		st.last = t
	case "model.usage":
		st := step()
		_, sp := o.tracer.Start(st.ctx, "chat "+d.Model, trace.WithTimestamp(st.last), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", d.Provider),
			attribute.String("gen_ai.request.model", d.Model), attribute.Int("openplaybook.model.turn", d.Turn),
			attribute.Int64("gen_ai.usage.input_tokens", d.InputTokens), attribute.Int64("gen_ai.usage.output_tokens", d.OutputTokens)))
		sp.End(trace.WithTimestamp(t))
		st.last = t
	case "approval.requested":
		st := step()
		_, sp := o.tracer.Start(st.ctx, "approval "+r.Tool, trace.WithTimestamp(t), trace.WithAttributes(
			attribute.String("openplaybook.approval.id", d.Approval), attribute.String("gen_ai.tool.name", r.Tool)))
		rt.other[r.Step+"\x00approval\x00"+d.Approval] = sp
	case "approval.approved", "approval.denied", "approval.voided":
		ended := false
		for k, sp := range rt.other {
			if len(k) > len(d.Approval) && k[len(k)-len(d.Approval):] == d.Approval && d.Approval != "" {
				sp.SetAttributes(attribute.String("openplaybook.approval.outcome", r.Kind[len("approval."):]))
				sp.End(trace.WithTimestamp(t))
				delete(rt.other, k)
				ended = true
			}
		}
		if !ended {
			// Its span ended with an earlier execution's (the run
			// waited): the decision is an event of this one.
			event()
		}
	case "gate.waiting":
		st := step()
		_, sp := o.tracer.Start(st.ctx, "gate "+r.Step, trace.WithTimestamp(t), trace.WithAttributes(
			attribute.String("openplaybook.step.id", r.Step), attribute.Int("openplaybook.step.attempt", d.Attempt)))
		rt.other[r.Step+"\x00gate"] = sp
	case "gate.approved", "gate.rejected":
		if sp := rt.other[r.Step+"\x00gate"]; sp != nil {
			sp.SetAttributes(attribute.String("openplaybook.gate.outcome", r.Kind[len("gate."):]))
			sp.End(trace.WithTimestamp(t))
			delete(rt.other, r.Step+"\x00gate")
		} else {
			event() // as an approval's decision without its span
		}
	case "run.completed", "run.failed", "run.rejected", "run.cancelled", "run.waiting":
		event()
		st := runStatus[r.Kind]
		rt.run.SetAttributes(attribute.String("openplaybook.run.status", st))
		switch r.Kind {
		case "run.completed":
			rt.run.SetStatus(codes.Ok, "")
		case "run.waiting":
		default:
			rt.run.SetStatus(codes.Error, st)
		}
		if r.Kind == "run.waiting" {
			// Gates and approvals go on waiting: their spans end with the
			// run's, marked as still waiting.
			rt.endAll(t, "waiting")
		} else {
			rt.endAll(t, st)
		}
		delete(rs.runs, r.Run)
	default:
		event()
		if r.Step != "" {
			step().last = t
		}
	}
	return tid
}
