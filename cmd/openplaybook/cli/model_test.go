package cli

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/runtime"
)

// sseEvent is one server-sent event of the Messages API.
func sseEvent(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

// claudeTurn is a streamed Messages API response: content blocks (given
// whole in content_block_start), a stop reason and usage.
func claudeTurn(stop string, blocks ...string) string {
	b := sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,`+
		`"usage":{"input_tokens":40,"cache_read_input_tokens":1000,"cache_creation_input_tokens":60,"output_tokens":1}}}`)
	for i, blk := range blocks {
		b += sseEvent("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, i, blk))
		b += sseEvent("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
	}
	b += sseEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":{"output_tokens":25}}`)
	return b + sseEvent("message_stop", `{"type":"message_stop"}`)
}

// claudeAPI serves the Messages API on loopback from a list of answers
// (status and body); it counts the requests.
type claudeAPI struct {
	mu      sync.Mutex
	answers []func() (int, string)
	n       int
}

func (a *claudeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	if r.Method == http.MethodGet && r.URL.Path == "/v1/models/claude-test" {
		// The model probe of check and run (preflight-model).
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"type":"model","id":"claude-test","display_name":"Claude Test","created_at":"2026-01-01T00:00:00Z"}`)
		return
	}
	a.mu.Lock()
	n := a.n
	a.n++
	a.mu.Unlock()
	if r.URL.Path != "/v1/messages" || n >= len(a.answers) {
		http.Error(w, "unexpected request", http.StatusTeapot)
		return
	}
	status, body := a.answers[n]()
	if strings.HasPrefix(body, "event:") {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "0")
	}
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func claudeEnv(t *testing.T, api *claudeAPI) (*rtEnv, string) {
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	e := newRTEnv(t, rtConfig{agents: map[string]any{
		"claude": map[string]any{"driver": "anthropic", "model": "claude-test", "baseURL": srv.URL, "maxRetries": 1},
	}})
	doc := e.write("doc.json", string(rtDoc(t, "modelled",
		map[string]any{"id": "look", "kind": "agent", "agent": "claude", "purpose": "Look Ada up.", "allowedTools": []string{"customer.get"}},
	)))
	return e, doc
}

// A run whose agent is an anthropic model: status shows the tokens of
// the step's model turns and of the run, as text and as JSON.
func TestStatusShowsModelUsage(t *testing.T) {
	t.Parallel()
	api := &claudeAPI{answers: []func() (int, string){
		func() (int, string) {
			return 200, claudeTurn("tool_use", `{"type":"tool_use","id":"toolu_1","name":"customer__get","input":{"customerId":"cus_ada"}}`)
		},
		func() (int, string) {
			return 200, claudeTurn("end_turn", `{"type":"text","text":"Ada is on the pro plan."}`)
		},
	}}
	e, doc := claudeEnv(t, api)
	o := e.outcome(ExitOK, "run", doc)
	out, _ := e.cli(ExitOK, "status", o.Run)
	for _, want := range []string{
		"  step look (attempt 1): done\n",
		"    usage: 2 model turns, 2200 input tokens (2000 cached, 120 written to the cache), 50 output tokens\n",
		o.Run + " usage: 2 model turns, 2200 input tokens (2000 cached, 120 written to the cache), 50 output tokens\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	js, _ := e.cli(ExitOK, "status", "--format", "json", o.Run)
	var rs []runtime.RunStatus
	if err := json.Unmarshal([]byte(js), &rs); err != nil || len(rs) != 1 {
		t.Fatalf("status json %s: %v", js, err)
	}
	want := runtime.Usage{Turns: 2, InputTokens: 2200, OutputTokens: 50, CachedInputTokens: 2000, CacheWriteTokens: 120}
	if rs[0].Usage == nil || *rs[0].Usage != want || len(rs[0].Steps) != 1 || rs[0].Steps[0].Usage == nil || *rs[0].Steps[0].Usage != want {
		t.Errorf("status json %s", js)
	}
	_, recs := e.auditJSON(o.Run)
	if !rtHasRecord(recs, "model.usage", "") {
		t.Errorf("no model.usage record in the audit log")
	}
}

// When the SDK gives up on an overloaded API, the step fails with an
// error naming the request URL, the attempts and the binding's line.
func TestModelGivesUpNamesBinding(t *testing.T) {
	t.Parallel()
	overloaded := func() (int, string) {
		return 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	}
	api := &claudeAPI{answers: []func() (int, string){overloaded, overloaded}}
	e, doc := claudeEnv(t, api)
	o := e.outcome(ExitProblems, "run", doc)
	out, _ := e.cli(ExitOK, "status", o.Run)
	re := regexp.MustCompile(`error: anthropic: model "claude-test" at http://127\.0\.0\.1:\d+/v1/messages: the API answered 529 \(overloaded_error\): Overloaded \(gave up after 2 attempts; agent binding ` + regexp.QuoteMeta(e.harness) + `:\d+\)`)
	if !re.MatchString(out) {
		t.Errorf("status does not name the URL, attempts and binding:\n%s", out)
	}
}
