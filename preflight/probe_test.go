package preflight_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/preflight"
)

const probeKey = "sk-probe-0123456789abcdefSECRET"

// modelServer is a loopback fake of the model APIs' model endpoints:
// OpenAI's GET /v1/models (listing gpt-test) and Anthropic's GET
// /v1/models/{model_id} (serving claude-test); a key other than probeKey
// is answered 401. It counts the requests by path.
type modelServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newModelServer(t *testing.T) *modelServer {
	m := &modelServer{hits: map[string]int{}}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.hits[r.URL.Path]++
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if k := r.Header.Get("X-Api-Key"); k != "" {
			key = k
		}
		switch {
		case key != probeKey:
			w.WriteHeader(401)
			fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error","code":"invalid_api_key"}}`, key)
		case r.URL.Path == "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"gpt-test","object":"model","created":1,"owned_by":"me"}]}`)
		case r.URL.Path == "/v1/models/claude-test":
			fmt.Fprint(w, `{"type":"model","id":"claude-test-20250101","display_name":"Claude Test","created_at":"2025-01-01T00:00:00Z"}`)
		default:
			w.WriteHeader(404)
			fmt.Fprint(w, `{"type":"error","error":{"type":"not_found_error","message":"model: x"}}`)
		}
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *modelServer) count(path string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hits[path]
}

// TestModelProbe: check probes each model binding a document's steps
// use, once per host: a listed model and a served alias pass; a refused
// key and an unreachable port are errors and an unknown model a
// warning, each at the binding in the harness file; a transcript agent
// is not probed; the key is never printed.
func TestModelProbe(t *testing.T) {
	api := newModelServer(t)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	t.Setenv("PROBE_KEY", probeKey)
	t.Setenv("WRONG_KEY", "sk-wrong-0123456789abcdef")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t.json"), []byte(`{"steps": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`secrets:
  declare:
    PROBE_KEY: {agents: [ok, claude, typo, gone]}
    WRONG_KEY: {agents: [badkey]}
agents:
  ok:     {driver: openai, model: gpt-test, baseURL: %[1]s/v1, apiKeySecret: PROBE_KEY}
  claude: {driver: anthropic, model: claude-test, baseURL: %[1]s, apiKeySecret: PROBE_KEY}
  badkey: {driver: openai-responses, model: gpt-test, baseURL: %[1]s/v1, apiKeySecret: WRONG_KEY}
  typo:   {driver: openai-responses, model: gpt-tset, baseURL: %[1]s/v1, apiKeySecret: PROBE_KEY}
  gone:   {driver: openai, model: gpt-test, baseURL: %[2]s/v1, apiKeySecret: PROBE_KEY, maxRetries: 3}
  lou:    {driver: transcript, transcript: t.json}
`, api.srv.URL, gone.URL)
	h, hds := harness.Parse(filepath.Join(dir, "harness.yaml"), []byte(src), dir)
	if n := diag.Count(hds, diag.Error); n > 0 {
		t.Fatalf("harness: %v", hds)
	}
	env := host.Offline(h)
	var steps []string
	for _, a := range []string{"ok", "claude", "badkey", "typo", "gone", "lou", "ok"} {
		steps = append(steps, fmt.Sprintf(`{"id": "s%d", "kind": "agent", "agent": %q, "purpose": "p"}`, len(steps), a))
	}
	docSrc := `{
  "openplaybook": "1.6",
  "manifest": {"id": "probe-test", "name": "Probe test", "version": "1.0.0", "description": "d", "requiredConnectors": []},
  "requires": {"connections": [], "mcpServers": [], "secrets": []},
  "tools": [],
  "steps": [` + strings.Join(steps, ",\n") + `]
}`
	doc, _ := playbook.Read("probe.json", []byte(docSrc), nil)

	ds := preflight.Check(context.Background(), env, doc)
	var probes []diag.Diagnostic
	for _, d := range ds {
		if strings.Contains(d.Message, probeKey) || strings.Contains(d.Message, "sk-wrong-0123456789abcdef") {
			t.Errorf("a key was printed: %s", d.Message)
		}
		if d.Rule == preflight.RuleModel {
			probes = append(probes, d)
		} else {
			t.Errorf("unexpected diagnostic %s:%d: %s [%s]", d.File, d.Line, d.Message, d.Rule)
		}
	}
	want := []struct {
		line int
		sev  diag.Severity
		msg  string
	}{
		{8, diag.Error, `agent "badkey" (driver openai-responses): the model API refuses the key: openai-responses: model "gpt-test" at ` + api.srv.URL + `/v1: the API answered 401 Unauthorized (invalid_api_key): Incorrect API key provided: [redacted]; check the secret "apiKeySecret" names`},
		{9, diag.Warning, `agent "typo" (driver openai-responses): openai-responses: the API at ` + api.srv.URL + `/v1 does not list the model "gpt-tset" (it lists 1); did you mean "gpt-test"?; a run fails when the step asks the model: correct "model"`},
		{10, diag.Error, `agent "gone" (driver openai): the model API cannot be reached: openai: Get ` + gone.URL + `/v1`},
	}
	if len(probes) != len(want) {
		t.Fatalf("%d probe diagnostics, want %d: %v", len(probes), len(want), probes)
	}
	for i, w := range want {
		d := probes[i]
		if d.File != h.Path || d.Line != w.line || d.Column == 0 || d.Pointer != "/agents/"+[]string{"badkey", "typo", "gone"}[i] || d.Severity != w.sev || !strings.HasPrefix(d.Message, w.msg) {
			t.Errorf("diagnostic %d:\n got %s:%d:%d %s %v %q\nwant %s:%d %v %q", i, d.File, d.Line, d.Column, d.Pointer, d.Severity, d.Message, h.Path, w.line, w.sev, w.msg)
		}
	}
	// One request per binding, not per step, and none for a retry.
	if n := api.count("/v1/models"); n != 3 {
		t.Errorf("GET /v1/models %d times, want 3 (ok, badkey, typo)", n)
	}
	if n := api.count("/v1/models/claude-test"); n != 1 {
		t.Errorf("GET /v1/models/claude-test %d times, want 1", n)
	}
	// A second document on the same host: the probes are not repeated,
	// nor reported again.
	for _, d := range preflight.Check(context.Background(), env, doc) {
		if d.Rule == preflight.RuleModel {
			t.Errorf("reported again: %s", d.Message)
		}
	}
	if n := api.count("/v1/models"); n != 3 {
		t.Errorf("GET /v1/models %d times after a second check, want 3", n)
	}
}
