// Package obs is what an operator plugs into: structured logs (log/slog),
// OpenTelemetry traces and metrics, and the health endpoints of
// `openplaybook serve`.
//
// Everything it reports comes from three places: the run's audit records
// as they are committed (a [store.Store] wrapped by [Obs.Store] sees each
// one), the HTTP requests the server answers ([Obs.Middleware]), and the
// tool calls as the runtime sends them ([Obs.TraceCall], which begins a
// call's span so that its W3C traceparent goes with the call). So a log
// line, a span and a counter say exactly what the audit log says, no
// more: the runtime has already removed secret values from the records,
// and every log line is passed through the redactor again.
//
// Traces and metrics are off by default and configured by the standard
// OpenTelemetry variables (docs/operate.md):
//
//   - OTEL_TRACES_EXPORTER=otlp (or an OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT without it) exports spans over
//     OTLP/HTTP (protobuf);
//   - OTEL_METRICS_EXPORTER, a comma-separated list of otlp and
//     prometheus: otlp pushes metrics over OTLP/HTTP, prometheus serves
//     them as Prometheus text at [Obs.MetricsHandler];
//   - OTEL_SDK_DISABLED=true turns both off; OTEL_SERVICE_NAME and
//     OTEL_RESOURCE_ATTRIBUTES name the process;
//   - OPENPLAYBOOK_TRACE_MCP_HTTP=true adds an HTTP server span for each
//     request to /mcp (off: an agent's requests are traced by the MCP
//     operations they carry, [Obs.Middleware]).
package obs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Config configures [New]. The zero value logs JSON at info level to
// os.Stderr, with traces and metrics as the OTEL_* variables of the
// process's environment say.
type Config struct {
	// LogFormat is "json", "text" or "" (text when Stderr is a terminal,
	// else JSON).
	LogFormat string
	// LogLevel is "debug", "info", "warn" or "error"; "" is info.
	LogLevel string
	// Stderr receives the log lines; nil is os.Stderr.
	Stderr io.Writer
	// Getenv reads the OTEL_* variables; nil is os.Getenv. (The OTLP
	// exporters read their own OTEL_EXPORTER_OTLP_* settings from the
	// process's environment.)
	Getenv func(string) string
	// Version is the service.version of the resource.
	Version string
	// SpanExporter, when set, receives the spans instead of an OTLP
	// exporter (tests).
	SpanExporter sdktrace.SpanExporter
}

// Obs is the process's logger, tracer and meter. Its methods are safe for
// concurrent use; a nil *Obs logs nothing and records nothing.
type Obs struct {
	// Log is the logger: every line goes through the redactor.
	Log *slog.Logger

	tracer  trace.Tracer
	tracing bool
	// mcpHTTPSpans: /mcp requests get HTTP server spans too
	// (OPENPLAYBOOK_TRACE_MCP_HTTP=true; [Obs.Middleware]).
	mcpHTTPSpans bool
	// metering: an exporter reads the metrics (else nothing is counted).
	metering bool
	tp       *sdktrace.TracerProvider
	mp       *sdkmetric.MeterProvider
	prom     http.Handler
	prop     propagation.TextMapPropagator
	m        instruments
	redact   atomic.Pointer[func(string) string]
	runs     runSpans
	closeMu  sync.Mutex

	// The delivery order of committed records (store.go).
	dmu        sync.Mutex
	dcond      *sync.Cond
	pending    []*entry
	delivering bool
	waiters    int // TraceCall calls waiting for a record to be reported
}

// ErrConfig is wrapped by the errors [New] returns for a bad setting.
var ErrConfig = errors.New("obs: bad setting")

// ParseLevel reads a --log-level value.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "", "info":
		return slog.LevelInfo, nil
	case "debug":
		return slog.LevelDebug, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%w: log level %q: write debug, info, warn or error", ErrConfig, s)
}

// New sets up logging, and traces and metrics as the OTEL_* variables
// say. Call [Obs.Shutdown] at the end to flush what is buffered.
func New(ctx context.Context, cfg Config) (*Obs, error) {
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	lvl, err := ParseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	o := &Obs{prop: propagation.TraceContext{}}
	o.dcond = sync.NewCond(&o.dmu)
	id := func(s string) string { return s }
	o.redact.Store(&id)
	format := strings.ToLower(cfg.LogFormat)
	if format == "" {
		format = "json"
		if isTerminal(cfg.Stderr) {
			format = "text"
		}
	}
	hopt := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	switch format {
	case "json":
		h = slog.NewJSONHandler(cfg.Stderr, hopt)
	case "text":
		h = slog.NewTextHandler(cfg.Stderr, hopt)
	default:
		return nil, fmt.Errorf("%w: log format %q: write json or text", ErrConfig, cfg.LogFormat)
	}
	o.Log = slog.New(&redactHandler{inner: h, o: o})

	env := cfg.Getenv
	disabled := strings.EqualFold(env("OTEL_SDK_DISABLED"), "true")
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", serviceName(env)), attribute.String("service.version", cfg.Version)))
	if err != nil {
		res = resource.Default()
	}
	if attrs := env("OTEL_RESOURCE_ATTRIBUTES"); attrs != "" {
		if r2, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
			if m, err := resource.Merge(res, r2); err == nil {
				res = m
			}
		}
	}

	// Traces.
	o.tracer = tracenoop.NewTracerProvider().Tracer("")
	texp := cfg.SpanExporter
	if texp == nil && !disabled {
		if v := strings.ToLower(env("OTEL_TRACES_EXPORTER")); v != "" && v != "otlp" && v != "none" {
			return nil, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q: openplaybook exports otlp (or none)", ErrConfig, v)
		}
		if wantOTLP(env("OTEL_TRACES_EXPORTER"), env("OTEL_EXPORTER_OTLP_ENDPOINT"), env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
			if err := checkProtocol(env, "TRACES"); err != nil {
				return nil, err
			}
			texp, err = otlptracehttp.New(ctx)
			if err != nil {
				return nil, fmt.Errorf("%w: the OTLP trace exporter: %v", ErrConfig, err)
			}
		}
	}
	switch v := strings.ToLower(env("OPENPLAYBOOK_TRACE_MCP_HTTP")); v {
	case "", "false", "0":
	case "true", "1":
		o.mcpHTTPSpans = true
	default:
		return nil, fmt.Errorf("%w: OPENPLAYBOOK_TRACE_MCP_HTTP=%q: write true or false", ErrConfig, env("OPENPLAYBOOK_TRACE_MCP_HTTP"))
	}
	if texp != nil {
		o.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(texp), sdktrace.WithResource(res))
		o.tracer = o.tp.Tracer("github.com/openplaybook/openplaybook")
		o.tracing = true
	}

	// Metrics.
	var meter metric.Meter = metricnoop.NewMeterProvider().Meter("")
	if !disabled {
		var readers []sdkmetric.Option
		for _, v := range strings.Split(env("OTEL_METRICS_EXPORTER"), ",") {
			switch strings.TrimSpace(strings.ToLower(v)) {
			case "", "none":
			case "otlp":
				if err := checkProtocol(env, "METRICS"); err != nil {
					return nil, err
				}
				mexp, err := otlpmetrichttp.New(ctx)
				if err != nil {
					return nil, fmt.Errorf("%w: the OTLP metric exporter: %v", ErrConfig, err)
				}
				readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp)))
			case "prometheus":
				reg := prometheus.NewRegistry()
				pexp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
				if err != nil {
					return nil, fmt.Errorf("%w: the Prometheus exporter: %v", ErrConfig, err)
				}
				readers = append(readers, sdkmetric.WithReader(pexp))
				o.prom = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
			default:
				return nil, fmt.Errorf("%w: OTEL_METRICS_EXPORTER=%q: write otlp, prometheus, both (comma-separated) or none", ErrConfig, env("OTEL_METRICS_EXPORTER"))
			}
		}
		if len(readers) > 0 {
			o.mp = sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
			o.metering = true
			meter = o.mp.Meter("github.com/openplaybook/openplaybook")
		}
	}
	o.m = newInstruments(meter)
	o.runs.init()
	return o, nil
}

// Exporting reports whether the OTEL_* variables getenv reads ask [New]
// for traces or metrics (an exporter named, or an OTLP endpoint given,
// and OTEL_SDK_DISABLED not "true"): a command that writes no log lines
// needs no [Obs] otherwise. A value New refuses counts as asking, so
// that New says what is wrong with it.
func Exporting(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if v := strings.ToLower(getenv("OTEL_TRACES_EXPORTER")); v != "none" &&
		(v != "" || wantOTLP(v, getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))) {
		return true
	}
	for _, v := range strings.Split(getenv("OTEL_METRICS_EXPORTER"), ",") {
		if v := strings.TrimSpace(strings.ToLower(v)); v != "" && v != "none" {
			return true
		}
	}
	return false
}

func wantOTLP(exporter, endpoint, tracesEndpoint string) bool {
	switch strings.ToLower(exporter) {
	case "otlp":
		return true
	case "":
		return endpoint != "" || tracesEndpoint != ""
	}
	return false
}

// checkProtocol refuses an OTLP protocol other than http/protobuf.
func checkProtocol(env func(string) string, signal string) error {
	p := env("OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL")
	if p == "" {
		p = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if p != "" && p != "http/protobuf" {
		return fmt.Errorf("%w: OTLP protocol %q: openplaybook exports http/protobuf (the collector's port 4318)", ErrConfig, p)
	}
	return nil
}

func serviceName(env func(string) string) string {
	if n := env("OTEL_SERVICE_NAME"); n != "" {
		return n
	}
	return "openplaybook"
}

// SetRedact sets the function every log line's message and string values
// pass through (the server's secret redactor).
func (o *Obs) SetRedact(f func(string) string) {
	if o == nil || f == nil {
		return
	}
	o.redact.Store(&f)
}

func (o *Obs) redactString(s string) string { return (*o.redact.Load())(s) }

// logAttrs writes a line of o.Log's at level, without its caller's
// program counter (no line carries a source; slog's Logger takes one per
// line with runtime.Callers, a cost on every call's path). The caller
// checked o.Log.Enabled.
func (o *Obs) logAttrs(ctx context.Context, level slog.Level, msg string, attrs []slog.Attr) {
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.AddAttrs(attrs...)
	_ = o.Log.Handler().Handle(ctx, r)
}

// Tracing reports whether spans are exported.
func (o *Obs) Tracing() bool { return o != nil && o.tracing }

// MetricsHandler serves the metrics as Prometheus text, or is nil when
// OTEL_METRICS_EXPORTER does not name prometheus.
func (o *Obs) MetricsHandler() http.Handler {
	if o == nil {
		return nil
	}
	return o.prom
}

// Shutdown ends the spans still open and flushes and stops the exporters.
func (o *Obs) Shutdown(ctx context.Context) error {
	if o == nil {
		return nil
	}
	o.Flush()
	o.closeMu.Lock()
	defer o.closeMu.Unlock()
	o.runs.endAll()
	var errs []error
	if o.tp != nil {
		errs = append(errs, o.tp.Shutdown(ctx))
	}
	if o.mp != nil {
		errs = append(errs, o.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// redactHandler passes the message and every string value of a record
// through the redactor before the inner handler writes it.
type redactHandler struct {
	inner slog.Handler
	o     *Obs
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *redactHandler) Handle(ctx context.Context, r slog.Record) error {
	// Most lines hold no secret: when the redactor leaves the message and
	// every string value as they are, the record is written as it came
	// (the same bytes, without copying it); else a copy with the
	// redacted values is.
	same := h.o.redactString(r.Message) == r.Message
	if same {
		r.Attrs(func(a slog.Attr) bool {
			same = h.unchanged(a)
			return same
		})
	}
	if same {
		return h.inner.Handle(ctx, r)
	}
	nr := slog.NewRecord(r.Time, r.Level, h.o.redactString(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		nr.AddAttrs(h.redactAttr(a))
		return true
	})
	return h.inner.Handle(ctx, nr)
}

// unchanged reports whether redactAttr would return a as it is: a value
// that is not a string (or a group of them) is taken as changed.
func (h *redactHandler) unchanged(a slog.Attr) bool {
	switch a.Value.Kind() {
	case slog.KindString:
		s := a.Value.String()
		return h.o.redactString(s) == s
	case slog.KindGroup:
		for _, x := range a.Value.Group() {
			if !h.unchanged(x) {
				return false
			}
		}
		return true
	case slog.KindAny, slog.KindLogValuer:
		return false
	}
	return true
}

func (h *redactHandler) redactAttr(a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.o.redactString(a.Value.String()))
	case slog.KindGroup:
		as := a.Value.Group()
		out := make([]any, len(as))
		for i, x := range as {
			out[i] = h.redactAttr(x)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny, slog.KindLogValuer:
		v := a.Value.Resolve()
		if v.Kind() == slog.KindString || v.Kind() == slog.KindGroup {
			return h.redactAttr(slog.Attr{Key: a.Key, Value: v})
		}
		return slog.String(a.Key, h.o.redactString(v.String()))
	}
	return a
}

func (h *redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = h.redactAttr(a)
	}
	return &redactHandler{inner: h.inner.WithAttrs(out), o: h.o}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{inner: h.inner.WithGroup(name), o: h.o}
}

// LineWriter returns a writer that logs each line written to it as one
// record at level (for code that reports problems to an io.Writer).
func (o *Obs) LineWriter(level slog.Level) io.Writer {
	return &lineWriter{o: o, level: level}
}

type lineWriter struct {
	o     *Obs
	level slog.Level
	mu    sync.Mutex
	buf   []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			break
		}
		line := strings.TrimSpace(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
		if line != "" {
			w.o.Log.Log(context.Background(), w.level, line)
		}
	}
	return len(p), nil
}
