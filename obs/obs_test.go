package obs_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/internal/redact"
	"github.com/openplaybook/openplaybook/obs"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/sqlite"
)

func TestBadSettingsAreRefused(t *testing.T) {
	for _, c := range []struct {
		cfg  obs.Config
		env  map[string]string
		want string
	}{
		{obs.Config{LogFormat: "xml"}, nil, "json or text"},
		{obs.Config{LogLevel: "loud"}, nil, "debug, info, warn or error"},
		{obs.Config{}, map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "otlp"},
		{obs.Config{}, map[string]string{"OTEL_METRICS_EXPORTER": "statsd"}, "prometheus"},
		{obs.Config{}, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "http/protobuf"},
	} {
		c.cfg.Stderr = &bytes.Buffer{}
		c.cfg.Getenv = func(k string) string { return c.env[k] }
		_, err := obs.New(context.Background(), c.cfg)
		if !errors.Is(err, obs.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v %v: %v, want an error saying %q", c.cfg, c.env, err, c.want)
		}
	}
}

// TestLogsAreRedacted: the message and every string value, in groups and
// in values formatted late, pass through the redactor.
func TestLogsAreRedacted(t *testing.T) {
	var buf bytes.Buffer
	o, err := obs.New(context.Background(), obs.Config{Stderr: &buf, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-value-91ab"
	o.SetRedact(redact.New([]string{secret}))
	o.Log.With("pre", "x"+secret).Info("saw "+secret, "plain", secret, "err", errors.New("dial: "+secret), "g", map[string]string{"k": secret})
	o.Log.WithGroup("grp").Warn("w", "inner", secret)
	_, _ = o.LineWriter(slog.LevelWarn).Write([]byte("line one " + secret + "\nline two\n"))
	// A secret only in the last value, or deep in a group, after clean
	// ones (a line is written as it came only when nothing in it changes).
	ctx := context.Background()
	o.Log.LogAttrs(ctx, slog.LevelInfo, "late", slog.String("a", "b"), slog.Int("n", 1), slog.String("c", "d"), slog.String("e", "f"),
		slog.String("g", "h"), slog.String("last", "x "+secret))
	o.Log.LogAttrs(ctx, slog.LevelInfo, "grouped", slog.String("a", "b"), slog.Group("outer", slog.String("x", "y"), slog.Group("inner", slog.Int("n", 2), slog.String("z", secret))))
	o.Log.LogAttrs(ctx, slog.LevelInfo, "clean", slog.String("a", "b"), slog.Int("n", 1), slog.Group("g", slog.String("x", "y")))
	out := buf.String()
	if strings.Contains(out, secret) {
		t.Fatalf("a secret value is in the log:\n%s", out)
	}
	if !strings.Contains(out, `"msg":"clean","a":"b","n":1,"g":{"x":"y"}}`) {
		t.Fatalf("a line without a secret was not written as it came:\n%s", out)
	}
	if strings.Count(out, redact.Redacted) < 8 || !strings.Contains(out, `"msg":"line two"`) {
		t.Fatalf("log:\n%s", out)
	}
}

func TestProxies(t *testing.T) {
	if _, err := obs.ParseProxies("10.0.0.0/8, example.com"); !errors.Is(err, obs.ErrConfig) || !strings.Contains(err.Error(), "example.com") {
		t.Fatalf("a host name as a proxy: %v", err)
	}
	p, err := obs.ParseProxies("10.0.0.0/8, 192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		peer     string
		h        http.Header
		client   string
		scheme   string
		trustsIt bool
	}{
		// An untrusted peer's headers are not read.
		{"198.51.100.1:5000", http.Header{"X-Forwarded-For": {"1.2.3.4"}, "X-Forwarded-Proto": {"https"}}, "198.51.100.1", "http", false},
		// The nearest untrusted address of the chain is the client; a
		// forged address to its left is not.
		{"10.1.1.1:5000", http.Header{"X-Forwarded-For": {"6.6.6.6, 203.0.113.5, 10.2.2.2"}, "X-Forwarded-Proto": {"https"}}, "203.0.113.5", "https", true},
		{"[::ffff:192.0.2.1]:80", http.Header{"Forwarded": {`for="[2001:db8::1]:4711";proto=https, for=10.3.3.3`}}, "2001:db8::1", "https", true},
		// An obfuscated identifier stops the walk at the last address known.
		{"10.1.1.1:5000", http.Header{"Forwarded": {"for=_hidden, for=10.9.9.9"}}, "10.9.9.9", "http", true},
		{"10.1.1.1:5000", http.Header{"X-Forwarded-Proto": {"gopher"}}, "10.1.1.1", "http", true},
		// A client's own Forwarded header, passed through by a proxy
		// that appends to X-Forwarded-For (nginx), is not believed.
		{"10.1.1.1:5000", http.Header{"Forwarded": {`for="6.6.6.6";proto=https`}, "X-Forwarded-For": {"203.0.113.7"}, "X-Forwarded-Proto": {"http"}}, "203.0.113.7", "http", true},
	} {
		r := &http.Request{RemoteAddr: c.peer, Header: c.h}
		client, scheme := p.Client(r)
		if client != c.client || scheme != c.scheme || p.Trusts(c.peer) != c.trustsIt {
			t.Errorf("peer %s %v: client %s scheme %s trusted %v; want %s %s %v", c.peer, c.h, client, scheme, p.Trusts(c.peer), c.client, c.scheme, c.trustsIt)
		}
	}
}

// TestStoreKeepsBuiltinData: the wrapped store and its transactions still
// hold the built-in primitives' tables, and a committed record is logged
// once, a record of a failed transaction never.
func TestStoreKeepsBuiltinData(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var buf bytes.Buffer
	o, err := obs.New(context.Background(), obs.Config{Stderr: &buf, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	w := o.Store(st)
	if _, err := builtin.DataOf(w); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err = w.Tx(ctx, func(tx store.Tx) error {
		if _, ok := tx.(builtin.DataTx); !ok {
			t.Error("the wrapped transaction lost builtin.DataTx")
		}
		if _, err := tx.CreateRun(store.Run{ID: "run_a", PlaybookID: "p", PlaybookVersion: "1", Document: []byte("{}")}); err != nil {
			return err
		}
		_, err := tx.Append(audit.Record{Run: "run_a", Kind: "run.created"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	_ = w.Tx(ctx, func(tx store.Tx) error {
		_, _ = tx.Append(audit.Record{Run: "run_a", Kind: "run.failed"})
		return boom
	})
	q := w.Queue(ctx, func(tx store.Tx) error {
		_, err := tx.Append(audit.Record{Run: "run_a", Kind: "run.completed"})
		return err
	})
	if err := q.Wait(); err != nil {
		t.Fatal(err)
	}
	o.Flush()
	out := buf.String()
	if strings.Count(out, `"msg":"run.created"`) != 1 || strings.Contains(out, "run.failed") || strings.Count(out, `"msg":"run.completed"`) != 1 {
		t.Fatalf("log:\n%s", out)
	}
	if strings.Index(out, "run.created") > strings.Index(out, "run.completed") {
		t.Fatalf("records logged out of order:\n%s", out)
	}
}

// TestExporting: which OTEL_* settings ask for an Obs.
func TestExporting(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, true}, // New refuses it, saying why
		{map[string]string{"OTEL_METRICS_EXPORTER": "prometheus"}, true},
		{map[string]string{"OTEL_METRICS_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "TRUE"}, false},
	} {
		if got := obs.Exporting(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("%v: Exporting = %v, want %v", c.env, got, c.want)
		}
	}
}
