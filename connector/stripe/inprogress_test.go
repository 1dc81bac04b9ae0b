package stripe

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/connector"
	"github.com/openplaybook/openplaybook/registry"
)

// fakeRefunds is a loopback Stripe for POST /v1/refunds that keeps
// Stripe's idempotency rules: a request with a new Idempotency-Key is
// executed (counted) and the key is busy for the next busy requests,
// which are answered 409 idempotency_key_in_use; after that the first
// answer is replayed. It counts executions and distinct keys.
type fakeRefunds struct {
	lose  bool                        // cut the connection of the executing request
	busy  int                         // requests answered in progress after it
	after func(w http.ResponseWriter) // answers every later request of a key instead, when set
	first func(w http.ResponseWriter) // answers the executing request instead, when set

	mu         sync.Mutex
	executions int
	left       map[string]int
	requests   int
}

func (f *fakeRefunds) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	f.requests++
	left, seen := f.left[key]
	if !seen {
		f.executions++
		f.left[key] = f.busy
	} else if left > 0 && f.after == nil {
		f.left[key] = left - 1
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case !seen && f.first != nil:
		f.first(w)
	case !seen && f.lose:
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	case seen && f.after != nil:
		f.after(w)
	case (!seen && f.busy > 0) || (seen && left > 0):
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"error": {"type": "invalid_request_error", "code": "idempotency_key_in_use", "message": "There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): `+key+`. Please try again later."}}`)
	default:
		io.WriteString(w, `{"id": "re_1", "object": "refund", "amount": 500, "currency": "usd", "status": "succeeded", "charge": "ch_1"}`)
	}
}

// TestRefundInProgressIsNeverDefinite: a refund whose first request was
// applied but unanswered, or is still being processed, is never a
// definite failure, so the agent does not ask again under a new key: the
// fake Stripe executes it once, under one key, whatever it answers after.
// Stripe's answer that the key was used with other parameters
// (idempotency_error) and a 429 with nothing sent before stay definite.
func TestRefundInProgressIsNeverDefinite(t *testing.T) {
	args := jsontext.Value(`{"chargeId": "ch_1", "amount": 500, "reason": "requested_by_customer"}`)
	status := func(code int, body string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.WriteHeader(code)
			io.WriteString(w, body)
		}
	}
	for _, tc := range []struct {
		name     string
		f        *fakeRefunds
		ok       bool // the call ends with the refund
		definite bool // the call ends with a definite error
		execs    int
	}{
		{name: "lost, then in progress, then the refund", f: &fakeRefunds{lose: true, busy: 1}, ok: true, execs: 1},
		{name: "lost, then in progress to the end", f: &fakeRefunds{lose: true, busy: 100}, execs: 1},
		{name: "in progress at every attempt", f: &fakeRefunds{busy: 100}, execs: 1},
		{name: "lost, then 429", f: &fakeRefunds{lose: true, after: status(429, `{"error": {"type": "invalid_request_error", "code": "rate_limit", "message": "Too many requests"}}`)}, execs: 1},
		{name: "lost, then 400", f: &fakeRefunds{lose: true, after: status(400, `{"error": {"type": "invalid_request_error", "code": "parameter_invalid_integer", "message": "bad amount"}}`)}, execs: 1},
		{name: "idempotency_error at once", f: &fakeRefunds{first: status(400, `{"error": {"type": "idempotency_error", "message": "Keys for idempotent requests can only be used with the same parameters they were first used with."}}`)}, definite: true, execs: 3},
		{name: "429 at once", f: &fakeRefunds{first: status(429, `{"error": {"type": "invalid_request_error", "code": "rate_limit", "message": "Too many requests"}}`)}, definite: true, execs: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.left = map[string]int{}
			srv := httptest.NewServer(tc.f)
			defer srv.Close()
			conn, err := NewProvider().Open(connector.Config{AuthKind: "api_token", Secrets: map[string]string{"apiKey": testKey}, BaseURL: srv.URL, Timeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			refund := conn.Tools()["charge.refund"]
			var res registry.Result
			for i := range 3 {
				// The agent asks again only after a definite failure:
				// a new call, in a new place in the run, with a new key.
				ctx := registry.WithCallInfo(context.Background(), registry.CallInfo{Run: "run_1", Step: "refund", Attempt: 1, Index: i})
				res, err = refund.Call(ctx, args)
				if err == nil || !registry.IsDefinite(err) {
					break
				}
			}
			tc.f.mu.Lock()
			execs, keys, reqs := tc.f.executions, len(tc.f.left), tc.f.requests
			tc.f.mu.Unlock()
			if execs != tc.execs || keys != tc.execs {
				t.Errorf("BROKEN: Stripe executed the refund %d times under %d keys (%d requests), want %d: %s %v", execs, keys, reqs, tc.execs, res.Content, err)
			}
			switch {
			case tc.ok:
				if err != nil || !strings.Contains(string(res.Content), "re_1") {
					t.Errorf("%s %v; want the refund", res.Content, err)
				}
			case tc.definite:
				if err == nil || !registry.IsDefinite(err) {
					t.Errorf("%v; want a definite refusal", err)
				}
			default:
				if err == nil || registry.IsDefinite(err) || !errors.Is(err, ErrOutcomeUnknown) && !strings.Contains(err.Error(), "idempotency_key_in_use") {
					t.Errorf("%v; want outcome-unknown", err)
				}
			}
		})
	}
}
