package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
	"github.com/openplaybook/openplaybook/obs"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/serve"
	"github.com/openplaybook/openplaybook/store/sqlite"
)

// plantedSecret is a secret of the operate tests' harness (its memory
// server's environment) that the agent sends as an argument and the
// memory server echoes in its result.
const plantedSecret = "planted-secret-5c1e9d04b7"

// syncBuf is a log destination tests read while the server writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// opsRig is [rig] with what an operator plugs in: the store wrapped by
// obs, the handler [serve.Server.Operated], JSON logs into logs.
type opsRig struct {
	*rig
	o    *obs.Obs
	logs *syncBuf
	// callMeta is the _meta the scenario's agent sends with each call.
	callMeta map[string]any
}

// newOpsRig starts a server whose handler is Operated(o, proxies), at
// base (the test server's own URL when ""), with env as the OTEL_*
// settings.
func newOpsRig(t *testing.T, env map[string]string, base string, proxies obs.Proxies) *opsRig {
	t.Helper()
	return newOpsRigOpt(t, opsOpt{env: env, base: base, proxies: proxies, level: "debug"})
}

// opsOpt configures [newOpsRigOpt].
type opsOpt struct {
	env     map[string]string
	base    string
	proxies obs.Proxies
	level   string // the log level
	plain   bool   // no obs at all: the store and handler as serve.New makes them
	extra   string // appended to the harness
}

func newOpsRigOpt(t *testing.T, opt opsOpt) *opsRig {
	t.Helper()
	env, base, proxies := opt.env, opt.base, opt.proxies
	root := mcptest.RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "node_modules/@modelcontextprotocol/server-memory/dist/index.js")); err != nil {
		t.Skip("the npm MCP reference servers are not installed (npm ci)")
	}
	t.Setenv("OPENPLAYBOOK_OPERATOR_TOKEN", operatorToken)
	t.Setenv("OBS_PLANTED_SECRET", plantedSecret)
	dir := t.TempDir()
	mem := filepath.Join(dir, "memory.jsonl")
	harnessYAML := `mcpServers:
  memory:
    command: node
    args: [node_modules/@modelcontextprotocol/server-memory/dist/index.js]
    cwd: ` + root + `
    env: {MEMORY_FILE_PATH: ` + mem + `, PLANTED: "${secret:OBS_PLANTED_SECRET}"}
agents:
  outside: {driver: mcp}
store:
  sqlite: store.db
  seed: ` + filepath.Join(root, "examples/data/customers.json") + `
serve:
  approvalWait: 2s
` + opt.extra
	lh, st := loadHarness(t, dir, harnessYAML)
	logs := &syncBuf{}
	o, err := obs.New(context.Background(), obs.Config{LogFormat: "json", LogLevel: opt.level, Stderr: logs, Version: "test",
		Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, dir: dir, st: st.(*sqlite.Store), memory: mem}
	r.ts = httptest.NewUnstartedServer(nil)
	r.ts.Start()
	if base == "" {
		base = r.ts.URL
	}
	if opt.plain {
		r.srv, err = serve.New(serve.Options{Harness: lh, Store: st, BaseURL: base, Version: "test"})
	} else {
		r.srv, err = serve.New(serve.Options{Harness: lh, Store: o.Store(st), BaseURL: base, Version: "test", Log: o.LineWriter(-4)})
	}
	if err != nil {
		t.Fatal(err)
	}
	r.ts.Config.Handler = r.srv.Operated(o, proxies)
	if opt.plain {
		r.ts.Config.Handler = r.srv
	}
	t.Cleanup(func() {
		r.ts.Close()
		r.srv.Close()
		st.Close()
		_ = o.Shutdown(context.Background())
	})
	return &opsRig{rig: r, o: o, logs: logs}
}

// scenario runs testdata/agent.json through the gateway with an MCP
// client as its agent: two refused calls, three that run (one sends the
// planted secret, which the memory server echoes), a gate. It returns
// the run's id.
func (r *opsRig) scenario(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	a := r.connect(tok.MCPURL, tok.Token)
	a.meta = r.callMeta
	a.tools(t, "customer__get", "note__add", serve.FinishTool)
	if _, isErr := a.call(t, "mcp__memory__create_entities", map[string]any{"entities": []any{map[string]any{"name": "Mallory", "entityType": "person", "observations": []string{"x"}}}}); !isErr {
		t.Fatal("a call outside allowedTools ran")
	}
	if _, isErr := a.call(t, "Customer__get", map[string]any{"customerId": "cus_ada"}); !isErr {
		t.Fatal("a case variant of an allowed tool ran")
	}
	if text, isErr := a.call(t, "customer__get", map[string]any{"customerId": "cus_ada"}); isErr {
		t.Fatalf("customer.get: %s", text)
	}
	if _, isErr := a.call(t, "note__add", map[string]any{"customerId": "cus_ada", "body": "argument-value-note-body"}); isErr {
		t.Fatal("note.add failed")
	}
	if text, isErr := a.call(t, serve.FinishTool, map[string]any{"output": map[string]any{"found": "Ada Lovelace"}}); isErr {
		t.Fatalf("finish: %s", text)
	}
	r.waitStatus(run, "waiting", "gate")
	if _, err := r.srv.Decide(ctx, run, "review", runtime.Verdict{Approve: true, By: "tester"}); err != nil {
		t.Fatal(err)
	}
	a.tools(t, "mcp__memory__create_entities", "mcp__memory__search_nodes", serve.FinishTool)
	if text, isErr := a.call(t, "mcp__memory__create_entities", map[string]any{"entities": []any{map[string]any{"name": "argument-value-entity", "entityType": "customer", "observations": []string{plantedSecret}}}}); isErr {
		t.Fatalf("create_entities: %s", text)
	}
	if _, isErr := a.call(t, serve.FinishTool, map[string]any{"output": "done"}); isErr {
		t.Fatal("finish failed")
	}
	r.waitStatus(run, "completed", "")
	if b, _ := os.ReadFile(r.memory); !strings.Contains(string(b), plantedSecret) {
		t.Fatal("the planted secret did not reach the memory server (the scenario would prove nothing)")
	}
	r.o.Flush()
	return run
}

func (r *opsRig) audit(t *testing.T, run string) []audit.Record {
	t.Helper()
	recs, err := r.st.Audit(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestOperateLogsAndMetrics: one JSON log line per audit record of the
// run (same seq, kind, step, tool, code), one access line per request;
// /metrics, parsed with the Prometheus text parser, counts exactly the
// calls and refusals the audit log holds; the planted secret and the
// argument values appear in no log line and no metric.
func TestOperateLogsAndMetrics(t *testing.T) {
	r := newOpsRig(t, map[string]string{"OTEL_METRICS_EXPORTER": "prometheus"}, "", obs.Proxies{})
	run := r.scenario(t)
	recs := r.audit(t, run)
	if os.Getenv("OBS_PEEK") != "" {
		t.Log(r.logs.String())
	}

	// Logs.
	type line struct {
		Level, Msg, Run, Step, Tool, Code, Method, Path string
		Seq                                             int64
		Status                                          int
	}
	bySeq := map[int64]line{}
	access := 0
	sc := bufio.NewScanner(strings.NewReader(r.logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("a log line is not JSON: %q: %v", sc.Text(), err)
		}
		switch {
		case l.Msg == "http":
			access++
		case l.Run == run && l.Seq > 0:
			if _, dup := bySeq[l.Seq]; dup {
				t.Errorf("two log lines for audit record %d", l.Seq)
			}
			bySeq[l.Seq] = l
		}
	}
	for _, rec := range recs {
		l, ok := bySeq[rec.Seq]
		if !ok {
			t.Errorf("no log line for audit record %d (%s)", rec.Seq, rec.Kind)
			continue
		}
		var d struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(rec.Data, &d)
		if l.Msg != rec.Kind || l.Step != rec.Step || l.Tool != rec.Tool || l.Code != d.Code {
			t.Errorf("record %d: log line %+v, audit %s step %q tool %q code %q", rec.Seq, l, rec.Kind, rec.Step, rec.Tool, d.Code)
		}
		if rec.Kind == "call.refused" && l.Level != "WARN" {
			t.Errorf("a refusal logged at %s", l.Level)
		}
		delete(bySeq, rec.Seq)
	}
	for seq, l := range bySeq {
		t.Errorf("log line for seq %d (%s) has no audit record", seq, l.Msg)
	}
	if access == 0 {
		t.Error("no access line")
	}

	// Metrics.
	req, _ := http.NewRequest("GET", r.ts.URL+"/metrics", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without the operator token: %v %v", resp, err)
	}
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics: %v %v", resp, err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body.Bytes()))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, body.String())
	}
	got := map[string]float64{}
	for _, name := range []string{"openplaybook_calls_total", "openplaybook_refusals_total"} {
		f := fams[name]
		if f == nil {
			t.Fatalf("no %s in /metrics:\n%s", name, body.String())
		}
		for _, m := range f.Metric {
			key := name
			for _, lp := range m.Label {
				if lp.GetName() == "tool" || lp.GetName() == "outcome" || lp.GetName() == "code" {
					key += "," + lp.GetName() + "=" + lp.GetValue()
				}
			}
			got[key] += m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{}
	for _, rec := range recs {
		var d struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(rec.Data, &d)
		out := map[string]string{"call.succeeded": "succeeded", "call.failed": "failed", "call.refused": "refused", "call.output-invalid": "output-invalid", "call.outcome-unknown": "outcome-unknown"}[rec.Kind]
		if out == "" {
			continue
		}
		tool := rec.Tool
		if d.Code == "not-allowed" || d.Code == "unknown-step" || d.Code == "too-large" {
			tool = "(not allowed)" // the agent's choice of name is no label
		}
		want[fmt.Sprintf("openplaybook_calls_total,tool=%s,outcome=%s", tool, out)]++
		if rec.Kind == "call.refused" {
			want["openplaybook_refusals_total,code="+d.Code]++
		}
	}
	if len(want) < 3 {
		t.Fatalf("the scenario made too few calls to test: %v", want)
	}
	for k, v := range want {
		// The label order of the exposition is by name: code, outcome, tool.
		if g := lookupLabels(got, k); g != v {
			t.Errorf("%s = %v, want %v (the audit log's count)", k, g, v)
		}
	}
	if _, ok := fams["openplaybook_store_tx_duration_seconds"]; !ok {
		t.Error("no store transaction latency metric")
	}

	for what, text := range map[string]string{"the logs": r.logs.String(), "/metrics": body.String()} {
		for _, bad := range []string{plantedSecret, "argument-value-note-body", "argument-value-entity", "Mallory"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s hold %q", what, bad)
			}
		}
	}
}

// lookupLabels finds key ("name,l1=v1,l2=v2") in got whatever the order
// of its labels.
func lookupLabels(got map[string]float64, key string) float64 {
	parts := strings.Split(key, ",")
	for k, v := range got {
		kp := strings.Split(k, ",")
		if len(kp) != len(parts) || kp[0] != parts[0] {
			continue
		}
		all := true
		for _, p := range parts[1:] {
			found := false
			for _, q := range kp[1:] {
				if p == q {
					found = true
				}
			}
			all = all && found
		}
		if all {
			return v
		}
	}
	return 0
}

// TestOperateHealth: /healthz and /readyz answer without authentication
// and whatever the Host; /readyz fails (503, no detail) once the store is
// closed, and says why in the log only.
func TestOperateHealth(t *testing.T) {
	r := newOpsRig(t, nil, "", obs.Proxies{})
	get := func(path, host string) (int, string) {
		req, _ := http.NewRequest("GET", r.ts.URL+path, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	for _, h := range []string{"", "10.1.2.3:7420"} {
		if code, body := get("/healthz", h); code != 200 || body != "ok\n" {
			t.Errorf("/healthz (Host %q): %d %q", h, code, body)
		}
		if code, body := get("/readyz", h); code != 200 || body != "ready\n" {
			t.Errorf("/readyz (Host %q): %d %q", h, code, body)
		}
	}
	// Any other path with a foreign Host is still refused.
	if code, _ := get("/api/v1/runs", "10.1.2.3:7420"); code != http.StatusForbidden {
		t.Errorf("the API under a foreign Host: %d", code)
	}
	r.st.Close()
	code, body := get("/readyz", "")
	if code != http.StatusServiceUnavailable || body != "not ready\n" {
		t.Errorf("/readyz with the store closed: %d %q", code, body)
	}
	if !strings.Contains(r.logs.String(), `"msg":"not ready"`) || !strings.Contains(r.logs.String(), "store:") {
		t.Errorf("the log does not say why it is not ready:\n%s", r.logs.String())
	}
}
