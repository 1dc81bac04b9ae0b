package stripe

import (
	"context"
	"errors"
	"net/http/httptest"
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
