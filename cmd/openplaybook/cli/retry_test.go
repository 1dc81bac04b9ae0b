package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/openplaybook/openplaybook/runtime"
)

// modelFake is a loopback fake of an OpenAI-compatible API: GET
// /v1/models lists gpt-test (check's and run's probe), POST
// /v1/chat/completions answers with the next of chat.
type modelFake struct {
	mu     sync.Mutex
	chat   []func() (int, string)
	probes int
	posts  int
}

func (f *modelFake) start(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		f.mu.Lock()
		defer f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "GET" && r.URL.Path == "/v1/models":
			f.probes++
			fmt.Fprint(w, `{"object":"list","data":[{"id":"gpt-test","object":"model","created":1,"owned_by":"me"}]}`)
		case r.Method == "POST" && r.URL.Path == "/v1/chat/completions" && f.posts < len(f.chat):
			status, body := f.chat[f.posts]()
			f.posts++
			w.WriteHeader(status)
			io.WriteString(w, body)
		default:
			t.Errorf("unexpected request %s %s (%d posts)", r.Method, r.URL.Path, f.posts)
			w.WriteHeader(500)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (f *modelFake) counts() (probes, posts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.probes, f.posts
}

func chatReply(finish, message string) string {
	return fmt.Sprintf(`{"id":"c","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"finish_reason":%q,"message":%s}]}`, finish, message)
}

// noteDoc is a one-step document whose agent "model" may add notes.
func noteDoc(t *testing.T, e *rtEnv) string {
	src, err := os.ReadFile(rtExample(t, "refund-review.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ex struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(src, &ex); err != nil {
		t.Fatal(err)
	}
	var note map[string]any
	for _, tl := range ex.Tools {
		if tl["name"] == "note.add" {
			note = tl
		}
	}
	doc := map[string]any{
		"openplaybook": "1.6",
		"manifest":     map[string]any{"id": "retry-cli", "name": "Retry", "version": "1.0.0", "description": "d", "requiredConnectors": []string{}},
		"requires":     map[string]any{"connections": []any{}, "mcpServers": []any{}, "secrets": []any{}},
		"tools":        []any{note},
		"steps":        []any{map[string]any{"id": "act", "kind": "agent", "agent": "model", "purpose": "Note the refund.", "allowedTools": []string{"note.add"}}},
	}
	b, _ := json.Marshal(doc)
	return e.write("retry.json", string(b))
}

// TestRetryCLI: run fails on the model API's 503 and says the failure is
// transient; resume refuses and names retry; retry starts a new attempt
// that sends its own request and completes, without adding the note a
// second time; a completed run is not retried.
func TestRetryCLI(t *testing.T) {
	t.Parallel()
	noteCall := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"note__add","arguments":"{\"customerId\":\"cus_ada\",\"body\":\"refund promised\"}"}}]}`
	fake := &modelFake{chat: []func() (int, string){
		func() (int, string) { return 200, chatReply("tool_calls", noteCall) },
		func() (int, string) { return 503, `{"error":{"message":"overloaded","type":"server_error"}}` },
		func() (int, string) {
			return 200, chatReply("stop", `{"role":"assistant","content":"Noted."}`)
		},
	}}
	srv := fake.start(t)
	e := newRTEnv(t, rtConfig{agents: map[string]any{"model": map[string]any{"driver": "openai", "model": "gpt-test", "baseURL": srv.URL + "/v1", "maxRetries": 0}}})
	doc := noteDoc(t, e)

	stdout, _ := e.cli(ExitProblems, "run", doc)
	if !strings.Contains(stdout, "503 Service Unavailable") || !strings.Contains(stdout, "the failure is transient; to try the step again: openplaybook retry --harness "+e.harness+" run_") {
		t.Fatalf("run printed:\n%s", stdout)
	}
	run := strings.Fields(stdout)[1]
	_, stderr := e.cli(ExitProblems, "resume", run)
	if !strings.Contains(stderr, "run "+run+" has failed") || !strings.Contains(stderr, "openplaybook retry --harness "+e.harness+" "+run) {
		t.Errorf("resume of a failed run said:\n%s", stderr)
	}
	o := e.outcome(ExitOK, "retry", "--by", "ana", "--reason", "provider back", run)
	if o.Status != runtime.Completed {
		t.Fatalf("retry: %+v", o)
	}
	if probes, posts := fake.counts(); posts != 3 || probes != 2 {
		t.Errorf("the fake got %d chat requests and %d probes, want 3 (the retry sent its own) and 2 (run, retry)", posts, probes)
	}
	verified, recs := e.auditJSON(run)
	if !verified || !rtHasRecord(recs, "run.retried", "") || !rtHasRecord(recs, "step.retried", "") {
		t.Errorf("audit: verified %v, kinds %v", verified, recs)
	}
	notes := 0
	for _, r := range recs {
		if r["kind"] == "call.succeeded" && r["tool"] == "note.add" {
			notes++
		}
	}
	if notes != 1 {
		t.Errorf("note.add succeeded %d times, want 1", notes)
	}
	_, stderr = e.cli(ExitProblems, "retry", run)
	if !strings.Contains(stderr, "is completed, not failed") {
		t.Errorf("retry of a completed run said:\n%s", stderr)
	}
}
