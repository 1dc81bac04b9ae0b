package runtime_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// inProgressFront stands between the Stripe connector and stripe-mock:
// a refund with a new Idempotency-Key is passed on (Stripe executes it)
// and its answer lost (the connection is cut); every later refund with
// that key is answered 409 idempotency_key_in_use, as Stripe answers
// while the key's first request is still being processed. It counts the
// refunds executed and the distinct keys.
type inProgressFront struct {
	up *httputil.ReverseProxy

	mu         sync.Mutex
	executions int
	keys       map[string]bool
}

func (f *inProgressFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/refunds" {
		f.up.ServeHTTP(w, r)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	seen := f.keys[key]
	f.keys[key] = true
	if !seen {
		f.executions++
	}
	f.mu.Unlock()
	if !seen {
		rec := httptest.NewRecorder()
		f.up.ServeHTTP(rec, r) // executed; the answer never reaches the client
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusConflict)
	io.WriteString(w, `{"error": {"type": "invalid_request_error", "code": "idempotency_key_in_use", "message": "There is currently another in-progress request using this Idempotent Key. Please try again later."}}`)
}

func (f *inProgressFront) counts() (executions, keys int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.executions, len(f.keys)
}

// TestRefundInProgressWaitsForAPerson: an approved refund whose answer
// is lost and which Stripe then answers "in progress" under its key ends
// outcome-unknown and the run waits for a person; the agent, which asks
// for the refund again (as a model told of a failure does), is never
// given a second refund under a new key. Stripe executes one refund
// under one key.
func TestRefundInProgressWaitsForAPerson(t *testing.T) {
	t.Parallel()
	mock, _ := stripeMock(t)
	target, err := url.Parse(mock)
	if err != nil {
		t.Fatal(err)
	}
	front := &inProgressFront{up: httputil.NewSingleHostReverseProxy(target), keys: map[string]bool{}}
	srv := httptest.NewServer(front)
	defer srv.Close()
	doc := buildDoc(t, "inprogress", agentStep("pay", "ops", []string{"charge.refund"}, ""))
	r := newRig(t, rigConfig{stripe: srv.URL, secrets: map[string]string{"STRIPE_API_KEY": "sk_test_123"}}, doc)
	ctx := context.Background()
	refund := tcall{"charge.refund", map[string]any{"chargeId": "ch_1", "amount": 500, "reason": "duplicate"}}
	tr := map[string]string{"ops": transcriptOf(map[string][]tcall{"pay": {refund, refund, refund}})}

	out, err := r.engine(0, tr, nil, nil).Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	run := out.Run
	// Every approval asked for is given, as a person who trusts the
	// agent would: what keeps the refund single is the outcome rule.
	for range 4 {
		ps := r.pending(run)
		if len(ps) != 1 || ps[0].Kind != "call" {
			break
		}
		r.mustDecide(run, ps[0].ID, true)
		out, err = r.engine(0, tr, nil, nil).Resume(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
	}
	execs, keys := front.counts()
	if execs != 1 || keys != 1 {
		t.Errorf("BROKEN: Stripe executed %d refunds under %d keys; want one under one key (run %s, waiting %+v)", execs, keys, out.Status, r.pending(run))
	}
	ps := r.pending(run)
	if len(ps) != 1 || ps[0].Kind != "outcome_unknown" || ps[0].Tool != "charge.refund" {
		t.Errorf("the run waits for %+v; want a person to decide the refund's unknown outcome", ps)
	}
	states := map[store.CallState]int{}
	for _, c := range r.calls(run) {
		states[c.State]++
	}
	if states[store.CallOutcomeUnknown] != 1 || states[store.CallFailed] != 0 {
		t.Errorf("calls %v; want one outcome-unknown refund and no failed one", states)
	}
}
