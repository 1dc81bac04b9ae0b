package httpconn_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/connector"
	"github.com/openplaybook/openplaybook/connector/httpconn"
	"github.com/openplaybook/openplaybook/registry"
)

// countingServer answers every request with an item and counts, by path,
// the requests that reached it (and when).
type countingServer struct {
	*httptest.Server
	mu    sync.Mutex
	times []time.Time
	hits  atomic.Int32
	// fail, when set, makes the first answers 503s.
	fail atomic.Int32
}

func newCountingServer(t *testing.T) *countingServer {
	s := &countingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.times = append(s.times, time.Now())
		s.mu.Unlock()
		s.hits.Add(1)
		if s.fail.Add(-1) >= 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"id": "1"}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func limitedSpec(ls ...connector.RateLimit) httpconn.Spec {
	sp := spec(nil)
	sp.RateLimits = ls
	return sp
}

// TestRateLimitRefusesPastDeadline: a bucket of 2 requests an hour lets
// two calls go; the third would wait half an hour, past its 10 s
// timeout, so it is refused at once, definitely, and never reaches the
// provider.
func TestRateLimitRefusesPastDeadline(t *testing.T) {
	srv := newCountingServer(t)
	c := open(t, limitedSpec(connector.RateLimit{Requests: 2, Per: "1h"}), connector.Config{BaseURL: srv.URL})
	for i := 0; i < 2; i++ {
		if _, err := call(t, c, "acme.item.get", `{"id": "a"}`); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	start := time.Now()
	_, err := call(t, c, "acme.item.get", `{"id": "a"}`)
	if err == nil || !registry.IsDefinite(err) || !strings.Contains(err.Error(), "2 requests per 1h") || !strings.Contains(err.Error(), "nothing was sent") {
		t.Fatalf("third call: %v; want a definite rate-limit refusal that says nothing was sent", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusal took %s; a token past the deadline is refused without waiting", d)
	}
	// A write is limited by the same bucket (calls: all).
	if _, err := call(t, c, "acme.payment.create", `{"amount": 1}`); err == nil || !registry.IsDefinite(err) {
		t.Fatalf("write: %v; want a definite refusal", err)
	}
	if n := srv.hits.Load(); n != 2 {
		t.Errorf("the provider saw %d requests; want 2", n)
	}
}

// TestRateLimitSpacesRequests: with 5 requests a second and a burst of 1,
// the k-th request to reach the provider arrives no sooner than k x 200
// ms after the first was asked for (only that lower bound is asserted:
// the network and a loaded machine may delay one request and bunch the
// arrivals after it, never bring a token early).
func TestRateLimitSpacesRequests(t *testing.T) {
	srv := newCountingServer(t)
	c := open(t, limitedSpec(connector.RateLimit{Requests: 5, Per: "1s", Burst: 1}), connector.Config{BaseURL: srv.URL})
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := call(t, c, "acme.item.get", `{"id": "a"}`); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.times) != 4 {
		t.Fatalf("the provider saw %d requests; want 4", len(srv.times))
	}
	times := slices.Clone(srv.times)
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	for k, at := range times {
		if early := time.Duration(k)*200*time.Millisecond - at.Sub(start); early > 10*time.Millisecond {
			t.Errorf("request %d arrived %s after the first was asked for, %s before the bucket allows (one per 200 ms)", k, at.Sub(start), early)
		}
	}
}

// TestRateLimitPerCredential: connections of one provider on the same
// API root and credential share their buckets (the provider counts per
// credential, whichever run asks); another credential has its own.
func TestRateLimitPerCredential(t *testing.T) {
	srv := newCountingServer(t)
	p, err := httpconn.New(limitedSpec(connector.RateLimit{Requests: 1, Per: "1h"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	openKey := func(key string) *httpconn.Connection {
		c, err := p.OpenWith(connector.Config{AuthKind: "api_token", Secrets: map[string]string{"apiKey": key}, BaseURL: srv.URL, Timeout: 5 * time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a1, a2, b := openKey("key_a"), openKey("key_a"), openKey("key_b")
	if _, err := call(t, a1, "acme.item.get", `{"id": "a"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, a2, "acme.item.get", `{"id": "a"}`); err == nil {
		t.Error("a second connection with the same credential got a token of its own")
	}
	if _, err := call(t, b, "acme.item.get", `{"id": "a"}`); err != nil {
		t.Errorf("another credential's connection: %v", err)
	}
	if n := srv.hits.Load(); n != 2 {
		t.Errorf("the provider saw %d requests; want 2", n)
	}
}

// TestRateLimitScopes: a "writes" bucket leaves reads alone; a bucket
// of named tools leaves the others alone.
func TestRateLimitScopes(t *testing.T) {
	srv := newCountingServer(t)
	c := open(t, limitedSpec(
		connector.RateLimit{Requests: 1, Per: "1h", Calls: "writes"},
		connector.RateLimit{Requests: 2, Per: "1h", Tools: []string{"acme.item.get"}},
	), connector.Config{BaseURL: srv.URL})
	if _, err := call(t, c, "acme.payment.create", `{"amount": 1}`); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, c, "acme.payment.create", `{"amount": 2}`); err == nil || !registry.IsDefinite(err) || !strings.Contains(err.Error(), "for writes") {
		t.Fatalf("second write: %v; want a definite refusal by the writes bucket", err)
	}
	for i := 0; i < 2; i++ {
		if _, err := call(t, c, "acme.item.get", `{"id": "a"}`); err != nil {
			t.Fatalf("read %d: %v (the writes bucket must not count reads)", i, err)
		}
	}
	if _, err := call(t, c, "acme.item.get", `{"id": "a"}`); err == nil || !strings.Contains(err.Error(), "of acme.item.get") {
		t.Fatalf("third read: %v; want a refusal by the tool's bucket", err)
	}
	if n := srv.hits.Load(); n != 3 {
		t.Errorf("the provider saw %d requests; want 3", n)
	}
}

// TestRateLimitCountsRetries: a retry is a request too. A read answered
// 503 is retried; with one token an hour the retry is not sent, and the
// call fails definitely (a read) after one request.
func TestRateLimitCountsRetries(t *testing.T) {
	srv := newCountingServer(t)
	srv.fail.Store(1)
	c := open(t, limitedSpec(connector.RateLimit{Requests: 1, Per: "1h"}), connector.Config{BaseURL: srv.URL})
	_, err := call(t, c, "acme.item.get", `{"id": "a"}`)
	if err == nil || !registry.IsDefinite(err) || !strings.Contains(err.Error(), "rate limit") {
		t.Fatalf("%v; want a definite rate-limit failure of the retry", err)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("the provider saw %d requests; want 1", n)
	}
}

// TestRateLimitRetryOfWriteIsUnknown: an idempotent write whose first
// attempt got a 503 may have been applied; when the retry is held back
// by the bucket the outcome is unknown, never a definite failure.
func TestRateLimitRetryOfWriteIsUnknown(t *testing.T) {
	srv := newCountingServer(t)
	srv.fail.Store(1)
	sp := limitedSpec(connector.RateLimit{Requests: 1, Per: "1h"})
	sp.Idempotency = &httpconn.Idempotency{Header: "Idempotency-Key"}
	c := open(t, sp, connector.Config{BaseURL: srv.URL})
	_, err := call(t, c, "acme.payment.create", `{"amount": 1}`)
	if err == nil || registry.IsDefinite(err) || !strings.Contains(err.Error(), "outcome is unknown") {
		t.Fatalf("%v; want outcome-unknown", err)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("the provider saw %d requests; want 1", n)
	}
}

// TestRateLimitHarnessOverride: a connection's own limits replace the
// provider's; an empty list sends without client-side limits.
func TestRateLimitHarnessOverride(t *testing.T) {
	srv := newCountingServer(t)
	c := open(t, limitedSpec(connector.RateLimit{Requests: 1, Per: "1h"}), connector.Config{BaseURL: srv.URL, RateLimits: []connector.RateLimit{}})
	for i := 0; i < 3; i++ {
		if _, err := call(t, c, "acme.item.get", `{"id": "a"}`); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	c = open(t, spec(nil), connector.Config{BaseURL: srv.URL, RateLimits: []connector.RateLimit{{Requests: 1, Per: "24h"}}})
	call(t, c, "acme.item.get", `{"id": "a"}`)
	if _, err := call(t, c, "acme.item.get", `{"id": "a"}`); err == nil {
		t.Error("the harness's limit was not applied")
	}
	if n := srv.hits.Load(); n != 4 {
		t.Errorf("the provider saw %d requests; want 4", n)
	}
}

// TestRateLimitSpecErrors: a limit that cannot be kept is an error when
// the spec (or a harness's list) is loaded, naming the entry and what
// would be valid.
func TestRateLimitSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		l    connector.RateLimit
		want string
	}{
		{connector.RateLimit{Requests: 0, Per: "1s"}, "rateLimits/0: requests must be"},
		{connector.RateLimit{Requests: 1, Per: "soon"}, `per must be a duration`},
		{connector.RateLimit{Requests: 1, Per: "0s"}, `per must be a duration`},
		{connector.RateLimit{Requests: 1, Per: "48h"}, `at most 24h`},
		{connector.RateLimit{Requests: 1, Per: "1s", Burst: -1}, "burst must be"},
		{connector.RateLimit{Requests: 1, Per: "1s", Calls: "Writes"}, `calls must be "all", "reads" or "writes", not "Writes"`},
		{connector.RateLimit{Requests: 1, Per: "1s", Tools: []string{"acme.item.get "}}, `"acme.item.get ", which is not a tool`},
	} {
		_, err := httpconn.New(limitedSpec(tc.l), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want %q", tc.l, err, tc.want)
		}
		p, _ := httpconn.New(spec(nil), nil)
		if _, err := p.OpenWith(connector.Config{AuthKind: "api_token", Secrets: map[string]string{"apiKey": "k"}, RateLimits: []connector.RateLimit{tc.l}}, nil); err == nil || !strings.Contains(err.Error(), "connection's rateLimits") {
			t.Errorf("harness %+v: %v", tc.l, err)
		}
	}
}
