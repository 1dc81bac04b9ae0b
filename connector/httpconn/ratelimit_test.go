package httpconn_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/connector"
	"github.com/openplaybook/openplaybook/registry"
)

// TestQuota403IsRateLimiting: a 403 with X-RateLimit-Remaining: 0 (how
// GitHub says a token's quota is used up) is "not now": a read waits for
// X-RateLimit-Reset and asks again; the provider sees two requests. A
// 403 without it is a refusal, sent once.
func TestQuota403IsRateLimiting(t *testing.T) {
	var hits atomic.Int32
	var mu sync.Mutex
	var times []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		if hits.Add(1) == 1 {
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(1500*time.Millisecond).Unix(), 10))
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message": "API rate limit exceeded"}`)
			return
		}
		io.WriteString(w, `{"id": "1"}`)
	}))
	defer srv.Close()
	c := open(t, spec(nil), connector.Config{BaseURL: srv.URL})
	if _, err := call(t, c, "acme.item.get", `{"id": "1"}`); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 2 {
		t.Fatalf("%d requests; want 2 (the quota's 403, then 200)", hits.Load())
	}
	// The reset is a whole second; the wait runs to it (at least the
	// backoff's 0.25 s, and into the next second).
	if d := times[1].Sub(times[0]); d < 250*time.Millisecond {
		t.Errorf("asked again %v after a used-up quota", d)
	}

	var plain atomic.Int32
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plain.Add(1)
		w.Header().Set("X-RateLimit-Remaining", "4999")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"message": "Resource not accessible by integration"}`)
	}))
	defer srv2.Close()
	c2 := open(t, spec(nil), connector.Config{BaseURL: srv2.URL})
	_, err := call(t, c2, "acme.item.get", `{"id": "1"}`)
	if err == nil || !registry.IsDefinite(err) || !strings.Contains(err.Error(), "403") || plain.Load() != 1 {
		t.Errorf("a permission 403: %v after %d requests; want a definite refusal after 1", err, plain.Load())
	}
}
