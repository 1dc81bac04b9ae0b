package obs

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/openplaybook/openplaybook/internal/tracectx"
	"github.com/openplaybook/openplaybook/registry"
)

// callSpanWait bounds how long [Obs.TraceCall] waits for the records
// committed before a call (its step's step.started) to be reported, so
// that the call's span has its step's as parent. Past it (records that
// were not reported through this Obs, a delivery held up), the step's
// span is begun then.
const callSpanWait = 500 * time.Millisecond

// TraceCall begins the execute_tool span of a tool call as the runtime
// sends it (runtime.CallTracer; the store [Obs.Store] returns has it),
// and returns ctx carrying its span context: the MCP host puts it in the
// tools/call request's _meta ("traceparent", "tracestate") and the
// connectors in their HTTP requests' traceparent header, so a tool
// server's own spans join the run's trace under the call's span.
//
// The span is the one the call's audit records end (traceRecord): a
// side-effecting call's, begun from its call.started record when that
// was reported first, else begun here and taken up by it; a read call's
// (index -1: recorded once it ran) begun here, and taken up by the first
// call.started record of the same step, attempt, tool and arguments
// digest. Its links are those of ctx ([LinkTraceContext], the HTTP
// request's span). With tracing off, ctx is returned as it is, and
// nothing is sent.
func (o *Obs) TraceCall(ctx context.Context, call registry.CallInfo, tool, argsDigest string) context.Context {
	if !o.Tracing() {
		return ctx
	}
	rs := &o.runs
	rs.mu.Lock()
	if !rs.hasStepLocked(call.Run, call.Step, call.Attempt) {
		rs.mu.Unlock()
		o.awaitStep(call.Run, call.Step, call.Attempt)
		rs.mu.Lock()
	}
	defer rs.mu.Unlock()
	t := time.Now()
	rt := o.runTraceLocked(ctx, call.Run, recordData{}, t)
	st := o.stepLocked(ctx, rt, call.Run, call.Step, call.Attempt, t)
	var sp trace.Span
	if call.Index >= 0 {
		k := callKey(call.Step, call.Attempt, call.Index)
		if sp = rt.other[k]; sp == nil {
			sp = o.startCallSpan(ctx, st, call.Run, call.Step, tool, call.Index, t)
			rt.other[k] = sp
		}
	} else {
		sp = o.startCallSpan(ctx, st, call.Run, call.Step, tool, -1, t)
		k := readKey(call.Step, call.Attempt, tool, argsDigest)
		rt.live[k] = append(rt.live[k], sp)
	}
	return trace.ContextWithSpanContext(ctx, sp.SpanContext())
}

func (s *obsStore) TraceCall(ctx context.Context, call registry.CallInfo, tool, argsDigest string) context.Context {
	return s.o.TraceCall(ctx, call, tool, argsDigest)
}

// hasStep reports whether the span of attempt of step of run is open
// (a step span begun by a record that names no attempt counts).
func (rs *runSpans) hasStep(run, step string, attempt int) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.hasStepLocked(run, step, attempt)
}

func (rs *runSpans) hasStepLocked(run, step string, attempt int) bool {
	rt := rs.runs[run]
	if rt == nil {
		return false
	}
	st := rt.steps[step]
	return st != nil && (st.attempt == attempt || st.attempt == 0)
}

// awaitStep waits, at most callSpanWait, until the span of the step's
// attempt is open or every record handed to the store has been reported.
func (o *Obs) awaitStep(run, step string, attempt int) {
	deadline := time.Now().Add(callSpanWait)
	wake := time.AfterFunc(callSpanWait, func() {
		o.dmu.Lock()
		o.dcond.Broadcast()
		o.dmu.Unlock()
	})
	defer wake.Stop()
	o.dmu.Lock()
	o.waiters++
	for o.delivering && !o.runs.hasStep(run, step, attempt) && time.Now().Before(deadline) {
		o.dcond.Wait()
	}
	o.waiters--
	o.dmu.Unlock()
}

// runTraceLocked returns run's open spans, beginning the run's span at t
// when there is none (d: the record that begins it, for the playbook's
// name; its links are ctx's, [linksOf]). rs.mu is held.
func (o *Obs) runTraceLocked(ctx context.Context, run string, d recordData, t time.Time) *runTrace {
	rs := &o.runs
	rt := rs.runs[run]
	if rt == nil {
		rctx, sp := o.tracer.Start(context.Background(), "run "+run, trace.WithTimestamp(t), trace.WithAttributes(attribute.String("openplaybook.run.id", run)),
			trace.WithLinks(linksOf(ctx)...), trace.WithSpanKind(trace.SpanKindInternal))
		rt = &runTrace{run: sp, ctx: rctx, steps: map[string]*stepTrace{}, other: map[string]trace.Span{}, live: map[string][]trace.Span{}}
		rs.runs[run] = rt
	}
	if d.Playbook != "" {
		rt.run.SetAttributes(attribute.String("openplaybook.playbook.id", d.Playbook), attribute.String("openplaybook.playbook.version", d.Version))
	}
	return rt
}

// stepLocked returns the open span of step, beginning it at t (linked as
// ctx says, [linksOf]) when there is none. rs.mu is held.
func (o *Obs) stepLocked(ctx context.Context, rt *runTrace, run, step string, attempt int, t time.Time) *stepTrace {
	st := rt.steps[step]
	if st == nil {
		sctx, sp := o.tracer.Start(rt.ctx, "step "+step, trace.WithTimestamp(t), trace.WithLinks(linksOf(ctx)...), trace.WithAttributes(
			attribute.String("openplaybook.run.id", run), attribute.String("openplaybook.step.id", step), attribute.Int("openplaybook.step.attempt", attempt)))
		st = &stepTrace{span: sp, ctx: sctx, attempt: attempt, last: t}
		rt.steps[step] = st
	} else if st.attempt == 0 && attempt > 0 {
		st.attempt = attempt
		st.span.SetAttributes(attribute.Int("openplaybook.step.attempt", attempt))
	}
	return st
}

// startCallSpan begins the execute_tool span of a call to tool under st
// (index -1: not known yet), linked as ctx says ([linksOf]).
func (o *Obs) startCallSpan(ctx context.Context, st *stepTrace, run, step, tool string, index int, t time.Time) trace.Span {
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", tool),
		attribute.String("mcp.method.name", "tools/call"),
		attribute.String("openplaybook.run.id", run), attribute.String("openplaybook.step.id", step),
	}
	if index >= 0 {
		attrs = append(attrs, attribute.Int("openplaybook.call.index", index))
	}
	_, sp := o.tracer.Start(st.ctx, "execute_tool "+tool, trace.WithTimestamp(t), trace.WithLinks(linksOf(ctx)...),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return sp
}

func callKey(step string, attempt, index int) string {
	return step + "\x00call\x00" + strconv.Itoa(attempt) + "\x00" + strconv.Itoa(index)
}

func readKey(step string, attempt int, tool, argsDigest string) string {
	return step + "\x00read\x00" + strconv.Itoa(attempt) + "\x00" + tool + "\x00" + argsDigest
}

// linksKey carries, in a context, the remote span contexts a request
// named ([LinkTraceContext]).
type linksKey struct{}

// LinkTraceContext returns ctx carrying the W3C trace context an MCP
// request's _meta names ("traceparent", "tracestate"): the spans begun
// for what is done under ctx (a tool call's execute_tool span) link to
// it, with the attribute openplaybook.link.source "mcp._meta". A _meta
// without one, or with one that is not a string or is malformed, leaves
// ctx as it is: never an error. The tracestate is not kept (it is the
// sender's data).
func LinkTraceContext(ctx context.Context, meta map[string]any) context.Context {
	if len(meta) == 0 {
		return ctx
	}
	return withLink(ctx, tracectx.ExtractMeta(meta), "mcp._meta")
}

// serverSpanHeader is the request header through which [Obs.Middleware]
// hands an /mcp request's own server span (with
// OPENPLAYBOOK_TRACE_MCP_HTTP=true) to the MCP messages it carries
// ([LinkRequest]): the MCP SDK gives a message its request's header, not
// its context. The middleware removes it from every request first, so
// no client sets it.
const serverSpanHeader = "X-Openplaybook-Server-Span"

// LinkRequest returns ctx linked as the HTTP request that carried an MCP
// message says, h being that request's header (go-sdk's
// mcp.RequestExtra.Header): its W3C traceparent (the link's
// openplaybook.link.source is "http.traceparent") and its server span
// when it has one. They replace the links and the span ctx had from an
// earlier request (a session's context is its first request's), so a
// tool call's execute_tool span links to the request that carried it,
// not to the session's initialize. A nil h (a message that came by no
// HTTP request), a nil o or tracing off leave ctx as it is. Only the
// server whose handler is behind o's [Obs.Middleware] may call it.
func (o *Obs) LinkRequest(ctx context.Context, h http.Header) context.Context {
	if h == nil || !o.Tracing() {
		return ctx
	}
	ctx = trace.ContextWithSpanContext(context.WithValue(ctx, linksKey{}, []trace.Link(nil)), trace.SpanContext{})
	if v := h.Get(serverSpanHeader); v != "" {
		if sc := tracectx.ExtractHeader(http.Header{"Traceparent": {v}}); sc.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	return withLink(ctx, tracectx.ExtractHeader(h), "http.traceparent")
}

func withLink(ctx context.Context, sc trace.SpanContext, source string) context.Context {
	if !sc.IsValid() {
		return ctx
	}
	old, _ := ctx.Value(linksKey{}).([]trace.Link)
	for _, l := range old {
		if l.SpanContext.Equal(sc.WithTraceState(trace.TraceState{})) {
			return ctx
		}
	}
	ls := append(old[:len(old):len(old)], trace.Link{SpanContext: sc.WithTraceState(trace.TraceState{}),
		Attributes: []attribute.KeyValue{attribute.String("openplaybook.link.source", source)}})
	return context.WithValue(ctx, linksKey{}, ls)
}

// linksOf returns the links of a span begun for what is done under ctx:
// ctx's span (an HTTP request's), and the trace contexts the request
// named (its traceparent header, its MCP _meta).
func linksOf(ctx context.Context) []trace.Link {
	var links []trace.Link
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		links = append(links, trace.Link{SpanContext: sc})
	}
	if ls, ok := ctx.Value(linksKey{}).([]trace.Link); ok {
		for _, l := range ls {
			if len(links) == 0 || !links[0].SpanContext.Equal(l.SpanContext) {
				links = append(links, l)
			}
		}
	}
	return links
}
