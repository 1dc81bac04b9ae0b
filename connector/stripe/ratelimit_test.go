package stripe

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/connector"
	"github.com/openplaybook/openplaybook/connector/ratelimit"
	"github.com/openplaybook/openplaybook/registry"
)

// TestRateLimitRefusesBeforeSending: a call whose token would come after
// its deadline is refused definitely, and Stripe (a loopback fake that
// counts requests) never sees it; a read has a bucket of its own.
func TestRateLimitRefusesBeforeSending(t *testing.T) {
	f := &fakeRefunds{left: map[string]int{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	conn, err := NewProvider().Open(connector.Config{AuthKind: "api_token", Secrets: map[string]string{"apiKey": testKey}, BaseURL: srv.URL, Timeout: 2 * time.Second,
		RateLimits: []connector.RateLimit{{Requests: 1, Per: "1h", Calls: "writes"}}})
	if err != nil {
		t.Fatal(err)
	}
	refund := conn.Tools()["charge.refund"]
	args := jsontext.Value(`{"chargeId": "ch_1", "amount": 500, "reason": "requested_by_customer"}`)
	for i := range 2 {
		ctx := registry.WithCallInfo(context.Background(), registry.CallInfo{Run: "run_rl", Step: "refund", Attempt: 1, Index: i})
		_, err := refund.Call(ctx, args)
		switch {
		case i == 0 && err != nil:
			t.Fatalf("first refund: %v", err)
		case i == 1 && (err == nil || !registry.IsDefinite(err) || !errors.Is(err, ratelimit.ErrLimited)):
			t.Fatalf("second refund = %v; want a definite rate-limit refusal", err)
		}
	}
	f.mu.Lock()
	reqs := f.requests
	f.mu.Unlock()
	if reqs != 1 {
		t.Errorf("Stripe got %d requests, want 1 (the refused call must not be sent)", reqs)
	}
}

// TestPublishedLimits: test-mode keys get Stripe's test-mode limits.
func TestPublishedLimits(t *testing.T) {
	for key, want := range map[string]int{"sk_test_abc": 25, "rk_test_abc": 25, "sk_live_abc": 100, "rk_live_abc": 100} {
		ls := Limits(key)
		if len(ls) != 2 || ls[0].Requests != want || ls[1].Requests != want || ls[0].Calls != "reads" || ls[1].Calls != "writes" {
			t.Errorf("Limits(%q) = %+v, want %d reads and %d writes a second", key, ls, want, want)
		}
	}
}

// TestChargeHistoryTakesTwoTokens: charge.history sends up to two
// requests (charges, then invoices) and takes two tokens, so on a bucket
// of 3 an hour the second call is refused before it sends anything.
func TestChargeHistoryTakesTwoTokens(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object": "list", "data": [], "has_more": false, "url": "`+r.URL.Path+`"}`)
	}))
	defer srv.Close()
	conn, err := NewProvider().Open(connector.Config{AuthKind: "api_token", Secrets: map[string]string{"apiKey": testKey}, BaseURL: srv.URL, Timeout: 2 * time.Second,
		RateLimits: []connector.RateLimit{{Requests: 3, Per: "1h"}}})
	if err != nil {
		t.Fatal(err)
	}
	history := conn.Tools()["charge.history"]
	if _, err := history.Call(context.Background(), jsontext.Value(`{"customerId": "cus_1"}`)); err != nil {
		t.Fatalf("first call: %v", err)
	}
	first := requests.Load()
	if _, err := history.Call(context.Background(), jsontext.Value(`{"customerId": "cus_1"}`)); !errors.Is(err, ratelimit.ErrLimited) || !registry.IsDefinite(err) {
		t.Fatalf("second call = %v; want a definite rate-limit refusal (one token left, two needed)", err)
	}
	if n := requests.Load(); n != first || n == 0 {
		t.Errorf("Stripe got %d requests, %d of them from the first call; the refused call must send none", n, first)
	}
}
