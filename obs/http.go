package obs

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Proxies are the addresses whose X-Forwarded-For, X-Forwarded-Proto,
// X-Forwarded-Host and Forwarded headers are believed (the ingress or
// reverse proxy in front of the server). The zero value trusts no one.
type Proxies struct {
	prefixes []netip.Prefix
}

// ParseProxies reads a comma-separated list of IP addresses and CIDR
// prefixes ("10.0.0.0/8, 127.0.0.1"). An entry that is neither is an
// error naming it.
func ParseProxies(list string) (Proxies, error) {
	var p Proxies
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if pre, err := netip.ParsePrefix(f); err == nil {
			p.prefixes = append(p.prefixes, pre.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return Proxies{}, fmt.Errorf("%w: trusted proxy %q is neither an IP address nor a CIDR prefix (write 10.0.0.0/8 or 127.0.0.1)", ErrConfig, f)
		}
		p.prefixes = append(p.prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return p, nil
}

// Trusts reports whether addr (an IP, or host:port) is a trusted proxy.
func (p Proxies) Trusts(addr string) bool {
	a, ok := parseAddr(addr)
	if !ok {
		return false
	}
	for _, pre := range p.prefixes {
		if pre.Contains(a) {
			return true
		}
	}
	return false
}

func parseAddr(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if h, _, err := net.SplitHostPort(s); err == nil {
		s = h
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// forwardedHeaders are the headers only a trusted proxy may send.
var forwardedHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port", "X-Real-Ip"}

// Client returns the address of the client behind r: its peer's, or,
// when the peer is a trusted proxy, the nearest untrusted address the
// proxies recorded (X-Forwarded-For when there is one, else Forwarded's
// for=), and the scheme the client used (X-Forwarded-Proto, or
// Forwarded's proto= when there is no X-Forwarded-For, from a trusted
// proxy; else the connection's).
func (p Proxies) Client(r *http.Request) (addr, scheme string) {
	addr, _, _ = net.SplitHostPort(r.RemoteAddr)
	if addr == "" {
		addr = r.RemoteAddr
	}
	scheme = "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if !p.Trusts(r.RemoteAddr) {
		return addr, scheme
	}
	var hops []string
	var proto string
	// One family of headers: X-Forwarded-* when the proxy wrote
	// X-Forwarded-For (nginx and most ingresses append to it and pass a
	// client's own Forwarded header through), else Forwarded (RFC 7239).
	if fw := r.Header.Values("Forwarded"); len(fw) > 0 && len(r.Header.Values("X-Forwarded-For")) == 0 {
		for _, v := range fw {
			for _, el := range strings.Split(v, ",") {
				for _, pair := range strings.Split(el, ";") {
					k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
					if !ok {
						continue
					}
					val = strings.Trim(val, `"`)
					switch strings.ToLower(k) {
					case "for":
						hops = append(hops, val)
					case "proto":
						proto = val
					}
				}
			}
		}
	} else {
		for _, v := range r.Header.Values("X-Forwarded-For") {
			for _, h := range strings.Split(v, ",") {
				hops = append(hops, strings.TrimSpace(h))
			}
		}
		proto = r.Header.Get("X-Forwarded-Proto")
	}
	for i := len(hops) - 1; i >= 0; i-- {
		if _, ok := parseAddr(hops[i]); !ok {
			break // unknown or obfuscated: stop at the last address known
		}
		addr = hops[i]
		if h, _, err := net.SplitHostPort(addr); err == nil {
			addr = h
		}
		addr = strings.Trim(addr, "[]")
		if !p.Trusts(hops[i]) {
			break
		}
	}
	if proto == "http" || proto == "https" {
		scheme = proto
	}
	return addr, scheme
}

// Middleware wraps h: it removes the forwarding headers of a request
// whose peer is not a trusted proxy (so nothing behind it can be misled
// by them), begins a server span for the request (continuing a W3C
// traceparent the client sent, to which the spans begun for what the
// request does also link), counts it, and logs one access line:
// method, path (without the query), status, bytes, duration, client.
//
// An agent's request to /mcp (route "/mcp...") gets no HTTP span of its
// own unless OPENPLAYBOOK_TRACE_MCP_HTTP=true: what it does is traced at
// the MCP level (a tool call's execute_tool span, in the run's trace),
// which links to the traceparent the request carried, as the
// OpenTelemetry MCP conventions have it (the MCP span is the operation;
// HTTP spans of the transport are optional, "Recording MCP transport").
// With the setting, its server span begins a trace of the server's own,
// linked to the agent's span, so that no agent chooses the trace the
// server's spans and lines go in.
//
// route names the request's kind for the metrics (a function of the
// path with no identifiers in it); nil uses the first path segment.
func (o *Obs) Middleware(h http.Handler, proxies Proxies, route func(*http.Request) string) http.Handler {
	if o == nil {
		return h
	}
	if route == nil {
		route = func(r *http.Request) string {
			seg, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
			return "/" + seg
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		r.Header.Del(serverSpanHeader) // only this middleware sets it
		if !proxies.Trusts(r.RemoteAddr) {
			for _, k := range forwardedHeaders {
				r.Header.Del(k)
			}
		}
		client, scheme := proxies.Client(r)
		rt := route(r)
		var span trace.Span
		if o.tracing {
			ctx := r.Context()
			remote := trace.SpanContextFromContext(o.prop.Extract(ctx, propagation.HeaderCarrier(r.Header))) // the client's traceparent, when valid
			// An agent's requests: to /mcp, and the OAuth metadata its
			// client fetches on the way (RFC 9728's well-known path).
			agent := strings.HasPrefix(rt, "/mcp") || strings.HasPrefix(r.URL.Path, "/.well-known/")
			if !agent || o.mcpHTTPSpans {
				opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
					attribute.String("http.request.method", r.Method), attribute.String("url.path", o.redactString(r.URL.Path)),
					attribute.String("url.scheme", scheme), attribute.String("client.address", client), attribute.String("http.route", rt))}
				parent := ctx
				if agent {
					// An agent's request is not continued: its span begins
					// a trace of the server's own, linked to the agent's.
					opts = append(opts, trace.WithNewRoot())
					if remote.IsValid() {
						opts = append(opts, trace.WithLinks(trace.Link{SpanContext: remote.WithTraceState(trace.TraceState{}),
							Attributes: []attribute.KeyValue{attribute.String("openplaybook.link.source", "http.traceparent")}}))
					}
				} else if remote.IsValid() {
					parent = trace.ContextWithRemoteSpanContext(ctx, remote)
				}
				ctx, span = o.tracer.Start(parent, r.Method+" "+rt, opts...)
				o.prop.Inject(ctx, propagation.HeaderCarrier(w.Header()))
				if agent {
					// For the MCP messages the request carries ([LinkRequest]).
					sc := span.SpanContext()
					r.Header.Set(serverSpanHeader, "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-"+sc.TraceFlags().String())
				}
			}
			// What the request does links to the client's span too (a
			// tool call's execute_tool span, in the run's own trace).
			r = r.WithContext(withLink(ctx, remote, "http.traceparent"))
		}
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		d := time.Since(t0)
		if span != nil {
			span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
			if sw.status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(sw.status))
			}
			span.End()
		}
		if o.metering {
			o.m.requests.Add(r.Context(), 1, o.m.requestOpts.get(rt, statusClass(sw.status)))
		}
		if ctx := r.Context(); o.Log.Enabled(ctx, slog.LevelInfo) {
			o.logAttrs(ctx, slog.LevelInfo, "http", []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.Int("status", sw.status), slog.Int64("bytes", sw.n), slog.Float64("ms", float64(d.Microseconds())/1000),
				slog.String("client", client), slog.String("scheme", scheme)})
		}
	})
}

// statusClass is a status code's class: "2xx" for 200.
func statusClass(code int) string {
	if c := code / 100; c >= 1 && c <= 5 {
		return [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}[c-1]
	}
	return strconv.Itoa(code/100) + "xx"
}

// statusWriter records the status and size of an answer. It keeps
// http.Flusher (event streams, MCP) and unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
