package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/openai"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// chatFake is a loopback fake of POST /v1/chat/completions that answers
// each request with the next of turns (status and body) and keeps the
// request bodies.
type chatFake struct {
	t     *testing.T
	mu    sync.Mutex
	turns []func(req chatReq) (int, string)
	reqs  []chatReq
}

type chatReq struct {
	Messages []struct {
		Role       string `json:"role"`
		Content    any    `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
}

func (f *chatFake) start() *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req chatReq
		if err := json.Unmarshal(body, &req); err != nil {
			f.t.Errorf("request body: %v", err)
		}
		f.mu.Lock()
		n := len(f.reqs)
		f.reqs = append(f.reqs, req)
		f.mu.Unlock()
		if n >= len(f.turns) {
			f.t.Errorf("unexpected request %d", n+1)
			http.Error(w, "no more turns", 500)
			return
		}
		status, out := f.turns[n](req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, out)
	}))
	f.t.Cleanup(srv.Close)
	return srv
}

func (f *chatFake) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func chatCompletion(finish, message string) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-test","choices":[{"index":0,"finish_reason":%q,"logprobs":null,"message":%s}]}`, finish, message)
}

func toolCalls(calls ...[3]string) string {
	var parts []string
	for _, c := range calls {
		args, _ := json.Marshal(c[2])
		parts = append(parts, fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}`, c[0], c[1], args))
	}
	return `{"role":"assistant","content":null,"tool_calls":[` + strings.Join(parts, ",") + `]}`
}

const noteArgs = `{"customerId":"cus_ada","body":"refund promised"}`

// TestRetryAfterA503: a step whose model API answers 503 fails the run
// with a transient step.failed; retry starts attempt 2, which sends its
// request (counted at the fake), is given the failed attempt's calls and
// results, and completes. The side-effecting note.add the failed attempt
// ran is not run again, also when the model asks it again: one note.
func TestRetryAfterA503(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{}, buildDoc(t, "retry", agentStep("act", "model", []string{"note.add", "customer.get"}, "")))
	ctx := context.Background()
	fake := &chatFake{t: t}
	fake.turns = []func(chatReq) (int, string){
		func(chatReq) (int, string) {
			return 200, chatCompletion("tool_calls", toolCalls([3]string{"call_1", "note__add", noteArgs}, [3]string{"call_2", "customer__get", `{"customerId":"cus_ada"}`}))
		},
		func(chatReq) (int, string) {
			return 503, `{"error":{"message":"The server is overloaded.","type":"server_error"}}`
		},
		// Attempt 2: the failed attempt's calls and their results come
		// first; the model asks the note again, exactly.
		func(req chatReq) (int, string) {
			m := req.Messages
			if len(m) != 5 || m[2].Role != "assistant" || len(m[2].ToolCalls) != 2 || m[2].ToolCalls[0].ID != "made_a1_0" ||
				m[2].ToolCalls[0].Function.Name != "note__add" || m[3].ToolCallID != "made_a1_0" || m[4].ToolCallID != "made_a1_1" ||
				!strings.Contains(fmt.Sprint(m[4].Content), "Ada") {
				t.Errorf("attempt 2's first request: %+v", m)
			}
			return 200, chatCompletion("tool_calls", toolCalls([3]string{"call_3", "note__add", noteArgs}))
		},
		func(req chatReq) (int, string) {
			last := req.Messages[len(req.Messages)-1]
			if last.ToolCallID != "call_3" || !strings.Contains(fmt.Sprint(last.Content), "refund promised") {
				t.Errorf("the note asked again was answered %+v, want the failed attempt's result", last)
			}
			return 200, chatCompletion("stop", `{"role":"assistant","content":"The refund is noted."}`)
		},
	}
	srv := fake.start()
	d, err := openai.New(openai.Config{Model: "gpt-test", BaseURL: srv.URL + "/v1", HTTPClient: srv.Client(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	sess := r.engineWith(0, map[string]driver.Driver{"model": d}, nil, nil)
	out, err := sess.Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Failed)
	if !strings.Contains(out.Reason, "503 Service Unavailable") || !out.Retry {
		t.Errorf("outcome %+v, want the 503 and retry", out)
	}
	if ns, _ := r.st.ListNotes(ctx, "cus_ada", "", 10); len(ns) != 1 {
		t.Fatalf("%d notes after attempt 1, want 1", len(ns))
	}
	var failed runtime.StepFailed
	for _, rec := range r.auditOf(out.Run) {
		if rec.Kind == string(runtime.KindStepFailed) {
			json.Unmarshal(rec.Data, &failed)
		}
	}
	if failed.Attempt != 1 || !failed.Transient {
		t.Fatalf("step.failed %+v, want attempt 1, transient", failed)
	}

	out, err = sess.Retry(ctx, out.Run, runtime.RetryOptions{By: "ana", Reason: "the provider was down"})
	wantOutcome(t, "retry", out, err, runtime.Completed)
	if n := fake.requests(); n != 4 {
		t.Errorf("the fake got %d requests, want 4 (attempt 2 sent its own)", n)
	}
	if ns, _ := r.st.ListNotes(ctx, "cus_ada", "", 10); len(ns) != 1 {
		t.Errorf("%d notes after the retry, want 1: the failed attempt's note.add ran again", len(ns))
	}
	var attempts []int
	for _, c := range r.calls(out.Run) {
		attempts = append(attempts, c.Attempt)
	}
	if fmt.Sprint(attempts) != "[1 1]" {
		t.Errorf("call rows of attempts %v, want attempt 1's two only", attempts)
	}
	recs := r.auditOf(out.Run)
	var kinds []string
	var retried runtime.RunRetried
	var stepRetried runtime.StepRetried
	for _, rec := range recs {
		kinds = append(kinds, rec.Kind)
		switch runtime.EventKind(rec.Kind) {
		case runtime.KindRunRetried:
			json.Unmarshal(rec.Data, &retried)
		case runtime.KindStepRetried:
			json.Unmarshal(rec.Data, &stepRetried)
			if rec.Step != "act" {
				t.Errorf("step.retried of step %q", rec.Step)
			}
		}
	}
	joined := strings.Join(kinds, " ")
	if !strings.Contains(joined, "step.failed run.failed run.retried step.retried step.finished run.completed") {
		t.Errorf("audit kinds %s", joined)
	}
	if retried.By != "ana" || retried.Reason != "the provider was down" || retried.Force {
		t.Errorf("run.retried %+v", retried)
	}
	if stepRetried.Attempt != 2 || stepRetried.Retries != 1 || !stepRetried.Transient || !strings.Contains(stepRetried.Failure, "503") {
		t.Errorf("step.retried %+v", stepRetried)
	}
	if probs, err := runtime.Reconcile(ctx, r.st, out.Run); err != nil || len(probs) > 0 {
		t.Errorf("Reconcile: %v %v", probs, err)
	}
	// A completed run is not retried.
	if _, err := sess.Retry(ctx, out.Run, runtime.RetryOptions{Force: true}); !errors.Is(err, runtime.ErrNotRetryable) || !strings.Contains(err.Error(), "is completed, not failed") {
		t.Errorf("retrying a completed run: %v", err)
	}
}

// flaky fails its first run of a step as given, then makes the note and
// finishes.
type flaky struct {
	mu   sync.Mutex
	runs int
	fail error
	made [][]driver.MadeCall
}

func (f *flaky) RunStep(ctx context.Context, in driver.StepInput, c driver.Caller) (jsontext.Value, error) {
	f.mu.Lock()
	f.runs++
	n := f.runs
	f.made = append(f.made, in.Made)
	f.mu.Unlock()
	if _, err := c.Call(ctx, driver.Call{Name: "note.add", Arguments: []byte(noteArgs)}); err != nil {
		return nil, err
	}
	if n == 1 {
		return nil, f.fail
	}
	return jsontext.Value(`"done"`), nil
}

// TestRetryRefused: a step that failed for a reason a new attempt would
// meet again (here a refused reply) is not retried without --force, and
// nothing is recorded; with Force it is, and the note its failed attempt
// made is answered from the store. A cancelled run is never retried.
func TestRetryRefused(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{}, buildDoc(t, "retry-refused", agentStep("act", "model", []string{"note.add"}, "")))
	ctx := context.Background()
	f := &flaky{fail: &driver.ReplyError{Provider: "openai", Code: driver.ReplyTruncated, StopReason: "length", Reason: "the model's answer was cut off"}}
	sess := r.engineWith(0, map[string]driver.Driver{"model": f}, nil, nil)
	out, err := sess.Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Failed)
	if out.Retry {
		t.Errorf("a refused reply's outcome says retry")
	}
	before := len(r.auditOf(out.Run))
	_, err = sess.Retry(ctx, out.Run, runtime.RetryOptions{By: "ana"})
	if !errors.Is(err, runtime.ErrNotRetryable) || !strings.Contains(err.Error(), "reply-truncated") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("retry without force: %v", err)
	}
	if n := len(r.auditOf(out.Run)); n != before {
		t.Errorf("a refused retry recorded %d records", n-before)
	}
	if run, _ := r.st.GetRun(ctx, out.Run); run.Status != store.RunFailed {
		t.Errorf("run is %s after a refused retry", run.Status)
	}
	out, err = sess.Retry(ctx, out.Run, runtime.RetryOptions{By: "ana", Force: true})
	wantOutcome(t, "forced retry", out, err, runtime.Completed)
	if ns, _ := r.st.ListNotes(ctx, "cus_ada", "", 10); len(ns) != 1 {
		t.Errorf("%d notes, want 1", len(ns))
	}
	if len(f.made) != 2 || len(f.made[1]) != 1 || f.made[1][0].Name != "note.add" || f.made[1][0].ID != "made_a1_0" {
		t.Errorf("the retried step was given %+v", f.made)
	}
	var forced bool
	for _, rec := range r.auditOf(out.Run) {
		if rec.Kind == string(runtime.KindRunRetried) {
			var d runtime.RunRetried
			json.Unmarshal(rec.Data, &d)
			forced = d.Force
		}
	}
	if !forced {
		t.Errorf("run.retried does not record force")
	}

	// A cancelled run: never retried, even with Force.
	f2 := &flaky{fail: driver.ErrSuspended}
	sess2 := r.engineWith(0, map[string]driver.Driver{"model": f2}, nil, nil)
	out, err = sess2.Start(ctx, nil)
	wantOutcome(t, "start 2", out, err, runtime.Waiting)
	if err := runtime.Cancel(ctx, r.st, out.Run, "bo", "not needed"); err != nil {
		t.Fatal(err)
	}
	_, err = sess2.Retry(ctx, out.Run, runtime.RetryOptions{Force: true})
	if !errors.Is(err, runtime.ErrNotRetryable) || !strings.Contains(err.Error(), "was cancelled by bo: not needed") {
		t.Errorf("retrying a cancelled run: %v", err)
	}
}

// TestReopenedRunWithoutRetry: a failed run set back to running in SQLite,
// with no run.retried record, is refused as an altered store.
func TestReopenedRunWithoutRetry(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{}, buildDoc(t, "reopened", agentStep("act", "model", []string{"note.add"}, "")))
	ctx := context.Background()
	f := &flaky{fail: &driver.ProviderError{Provider: "openai", StatusCode: 503}}
	sess := r.engineWith(0, map[string]driver.Driver{"model": f}, nil, nil)
	out, err := sess.Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Failed)
	r.hostileWrite(`UPDATE runs SET status = 'running' WHERE id = ?`, out.Run)
	probs, err := runtime.Disagreements(ctx, r.st, out.Run)
	if err != nil || len(probs) != 1 || probs[0].Table != "runs" || probs[0].Column != "status" || !strings.Contains(probs[0].Message, "(run.failed) says it ended failed, and no run.retried came after") {
		t.Errorf("Disagreements: %v %v", probs, err)
	}
	if _, err := sess.Resume(ctx, out.Run); !errors.Is(err, runtime.ErrStoreAltered) {
		t.Errorf("resume of the reopened run: %v", err)
	}
	if ns, _ := r.st.ListNotes(ctx, "cus_ada", "", 10); len(ns) != 1 {
		t.Errorf("%d notes, want 1", len(ns))
	}
}
