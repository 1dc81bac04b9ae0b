// Package tracectx carries a W3C trace context (traceparent and
// tracestate, https://www.w3.org/TR/trace-context/) across what
// openplaybook sends and receives: HTTP headers, and an MCP request's
// _meta object, where the keys are the header names in lower case
// ("traceparent", "tracestate"), as OpenTelemetry's MCP semantic
// conventions say.
//
// What is injected is the span context of the context given
// (go.opentelemetry.io/otel/trace.SpanContextFromContext): the runtime
// puts a tool call's execute_tool span there when tracing is on (package
// obs); with tracing off there is none, and nothing is written.
package tracectx

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

var prop propagation.TraceContext

// InjectHeader sets the traceparent (and tracestate, when not empty)
// headers of h to ctx's span context; it writes nothing, and leaves h
// as it is, when ctx carries no valid span context.
func InjectHeader(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	prop.Inject(ctx, propagation.HeaderCarrier(h))
}

// InjectMeta returns meta (a new map when meta is nil) with
// "traceparent" (and "tracestate", when not empty) set to ctx's span
// context, or meta unchanged when ctx carries no valid span context.
func InjectMeta(ctx context.Context, meta map[string]any) map[string]any {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	if meta == nil {
		meta = map[string]any{}
	}
	prop.Inject(ctx, MetaCarrier(meta))
	return meta
}

// ExtractMeta returns the span context meta's "traceparent" and
// "tracestate" name (remote), or an invalid one when meta has none, when
// it is not a string, or when it is malformed: never an error.
func ExtractMeta(meta map[string]any) trace.SpanContext {
	if _, ok := meta["traceparent"]; !ok {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(prop.Extract(context.Background(), MetaCarrier(meta)))
}

// ExtractHeader returns the span context h's traceparent and tracestate
// headers name (remote), or an invalid one when h has none or it is
// malformed.
func ExtractHeader(h http.Header) trace.SpanContext {
	return trace.SpanContextFromContext(prop.Extract(context.Background(), propagation.HeaderCarrier(h)))
}

// MetaCarrier is an MCP _meta object as a [propagation.TextMapCarrier]:
// Get reads string values only (any other is absent).
type MetaCarrier map[string]any

// Get returns the string value of key, or "".
func (m MetaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

// Set sets key to value.
func (m MetaCarrier) Set(key, value string) { m[key] = value }

// Keys lists the keys.
func (m MetaCarrier) Keys() []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
