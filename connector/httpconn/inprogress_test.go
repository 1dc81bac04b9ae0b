package httpconn_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/connector"
	"github.com/openplaybook/openplaybook/connector/httpconn"
	"github.com/openplaybook/openplaybook/registry"
)

// keyedProvider is a loopback provider that makes writes idempotent the
// way Stripe, Resend and draft-ietf-httpapi-idempotency-key-header do: a
// request with a new key is executed (counted) and the key is then busy
// until the execution ends; a request with a busy key gets the "in
// progress" answer; one with a finished key gets the first answer again.
// It counts executions and the distinct keys it saw, which is what a
// test asserts: what happened at the provider, not what was recorded.
type keyedProvider struct {
	mu         sync.Mutex
	executions int
	keys       map[string]int // key -> requests answered in progress still to come (-1: done)
	// busy is how many requests after the first with a key are answered
	// in progress before its execution ends.
	busy int
	// lose cuts the connection of the request that starts an execution
	// (the answer is lost after it was applied).
	lose bool
	// inProgress writes the in-progress answer; nil writes a 409 with
	// {"error": {"code": "conflict"}}.
	inProgress func(w http.ResponseWriter)
	// after, when set, answers every request after the first of a key
	// instead (a 429, a 401...).
	after func(w http.ResponseWriter)
}

func (p *keyedProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	p.mu.Lock()
	if p.keys == nil {
		p.keys = map[string]int{}
	}
	left, seen := p.keys[key]
	switch {
	case !seen:
		p.executions++
		p.keys[key] = p.busy
		p.mu.Unlock()
		if p.lose {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		if p.busy > 0 {
			p.inProgressAnswer(w)
			return
		}
		io.WriteString(w, `{"id": "pay_1"}`)
		return
	case p.after != nil:
		p.mu.Unlock()
		p.after(w)
		return
	case left > 0:
		p.keys[key] = left - 1
		p.mu.Unlock()
		p.inProgressAnswer(w)
		return
	}
	p.mu.Unlock()
	io.WriteString(w, `{"id": "pay_1"}`)
}

func (p *keyedProvider) inProgressAnswer(w http.ResponseWriter) {
	if p.inProgress != nil {
		p.inProgress(w)
		return
	}
	w.WriteHeader(http.StatusConflict)
	io.WriteString(w, `{"error": {"code": "conflict", "message": "a request with this key is in progress"}}`)
}

func (p *keyedProvider) counts() (executions, keys int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.executions, len(p.keys)
}

// ask is the agent and the runtime around one write: the call is made
// (its key is its place in the run); while its error is definite, the
// agent asks again, which is a new call in a new place (a new key), up
// to three times. It returns the last result.
func ask(t *testing.T, c *httpconn.Connection, name, args string) (string, error) {
	t.Helper()
	var out string
	var err error
	for i := range 3 {
		ctx := registry.WithCallInfo(context.Background(), registry.CallInfo{Run: "run_1", Step: "s", Attempt: 1, Index: i})
		var res registry.Result
		res, err = c.Tools()[name].Call(ctx, jsontext.Value(args))
		out = string(res.Content)
		if err == nil || !registry.IsDefinite(err) {
			break
		}
	}
	return out, err
}

// TestInProgressKeepsTheKey: a write whose key's first request is still
// being processed (409 in progress, or a provider's in-progress code) is
// sent again with the same key until the first answer comes back, and
// when it does not within the call's attempts the outcome is unknown,
// never definite: the provider executes the write once, under one key.
func TestInProgressKeepsTheKey(t *testing.T) {
	idem := &httpconn.Idempotency{Header: "Idempotency-Key", InProgress: []string{"idempotency_key_in_use"}, Mismatch: []string{"invalid_idempotent_request"}}
	inUse := func(status int) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.WriteHeader(status)
			io.WriteString(w, `{"error": {"code": "idempotency_key_in_use", "message": "There is currently another in-progress request using this key"}}`)
		}
	}
	for _, tc := range []struct {
		name string
		p    *keyedProvider
		ok   bool // the call ends with the first request's answer
	}{
		{"lost, then 409, then the first answer", &keyedProvider{lose: true, busy: 1}, true},
		{"lost, then 409 until the attempts run out", &keyedProvider{lose: true, busy: 100}, false},
		{"409 at once, then the first answer", &keyedProvider{busy: 1}, true},
		{"409 at every attempt", &keyedProvider{busy: 100}, false},
		{"the provider's in-progress code at 400", &keyedProvider{lose: true, busy: 100, inProgress: inUse(400)}, false},
		{"the provider's in-progress code at 409", &keyedProvider{busy: 1, inProgress: inUse(409)}, true},
		{"lost, then 429", &keyedProvider{lose: true, after: func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
		}}, false},
		{"lost, then 425", &keyedProvider{lose: true, after: func(w http.ResponseWriter) { w.WriteHeader(http.StatusTooEarly) }}, false},
		{"lost, then 401", &keyedProvider{lose: true, after: func(w http.ResponseWriter) { w.WriteHeader(http.StatusUnauthorized) }}, false},
		{"lost, then a validation error", &keyedProvider{lose: true, after: func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error": {"code": "parameter_invalid", "message": "amount"}}`)
		}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.p)
			defer srv.Close()
			c := open(t, spec(idem), connector.Config{BaseURL: srv.URL})
			out, err := ask(t, c, "acme.payment.create", `{"amount": 5}`)
			execs, keys := tc.p.counts()
			if execs != 1 || keys != 1 {
				t.Errorf("BROKEN: the provider executed the write %d times under %d keys; want once, under one key (the call ended %s %v)", execs, keys, out, err)
			}
			if tc.ok {
				if err != nil || out != `{"id":"pay_1"}` {
					t.Errorf("%s %v; want the first request's answer", out, err)
				}
				return
			}
			if err == nil || registry.IsDefinite(err) || !strings.Contains(err.Error(), "outcome is unknown") {
				t.Errorf("%v; want outcome-unknown, not a definite failure", err)
			}
		})
	}
}

// TestIdempotencyMismatchIsDefinite: an answer that the key was used
// before with other parameters (the spec's mismatch codes, even at 409)
// and a 409 to a write sent without a key are definite refusals.
func TestIdempotencyMismatchIsDefinite(t *testing.T) {
	var hits int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"error": {"code": "invalid_idempotent_request", "message": "same key, other payload"}}`)
	}))
	defer srv.Close()
	idem := &httpconn.Idempotency{Header: "Idempotency-Key", Mismatch: []string{"invalid_idempotent_request"}}
	_, err := call(t, open(t, spec(idem), connector.Config{BaseURL: srv.URL}), "acme.payment.create", `{"amount": 5}`)
	if err == nil || !registry.IsDefinite(err) || !strings.Contains(err.Error(), "invalid_idempotent_request") || hits != 1 {
		t.Errorf("%v after %d requests; a mismatch is one definite refusal", err, hits)
	}
	hits = 0
	_, err = call(t, open(t, spec(nil), connector.Config{BaseURL: srv.URL}), "acme.payment.create", `{"amount": 5}`)
	if err == nil || !registry.IsDefinite(err) || hits != 1 {
		t.Errorf("%v after %d requests; a 409 to a write without a key is one definite refusal", err, hits)
	}
}
