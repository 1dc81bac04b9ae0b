package ratelimit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/connector"
)

// TestConcurrentTakersNeverExceedTheLimit: 40 requests at once on a
// bucket of 3 an hour: exactly 3 get a token, the others are refused at
// once (their token would come after their deadline), and a refused
// request leaves its tokens of other buckets untaken.
func TestConcurrentTakersNeverExceedTheLimit(t *testing.T) {
	limits, err := Compile([]connector.RateLimit{{Requests: 3, Per: "1h"}, {Requests: 1000, Per: "1s", Calls: "reads"}},
		func(string) bool { return true }, "test: rateLimits")
	if err != nil {
		t.Fatal(err)
	}
	var set Set
	b := set.For(limits, "https://api.example.com", map[string]string{"apiKey": "k"})
	if set.For(limits, "https://api.example.com", map[string]string{"apiKey": "k"}) != b {
		t.Fatal("a second connection on the same root and credential got buckets of its own")
	}
	if set.For(limits, "https://api.example.com", map[string]string{"apiKey": "other"}) == b {
		t.Fatal("another credential shares the buckets")
	}
	var ok, limited atomic.Int32
	var wg sync.WaitGroup
	start := time.Now()
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			switch err := b.Take(ctx, "example", Tool{Name: "x.get"}); {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrLimited):
				limited.Add(1)
			default:
				t.Errorf("Take: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 3 || limited.Load() != 37 {
		t.Errorf("%d requests got a token, %d were refused; want 3 and 37", ok.Load(), limited.Load())
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the refusals took %s; a token past the deadline is refused at once", d)
	}
	// The refused requests gave back their reads tokens: 997 more reads
	// may go at once in this second.
	if tokens := b.rates[1].Tokens(); tokens < 996 {
		t.Errorf("the reads bucket holds %.0f tokens; the refused requests took some", tokens)
	}
}

// TestCompileRefuses: what a limit must be, said with its place.
func TestCompileRefuses(t *testing.T) {
	known := func(n string) bool { return n == "x.get" }
	for _, c := range []struct {
		l    connector.RateLimit
		want string
	}{
		{connector.RateLimit{Requests: 0, Per: "1s"}, "p/0: requests must be a whole number more than 0"},
		{connector.RateLimit{Requests: 1, Per: "0s"}, "p/0: per must be a duration more than 0"},
		{connector.RateLimit{Requests: 1, Per: "25h"}, "at most 24h"},
		{connector.RateLimit{Requests: 1, Per: "soon"}, `not "soon"`},
		{connector.RateLimit{Requests: 1, Per: "1s", Burst: -1}, "burst must be 0"},
		{connector.RateLimit{Requests: 1, Per: "1s", Calls: "Reads"}, `not "Reads"`},
		{connector.RateLimit{Requests: 1, Per: "1s", Tools: []string{"x.Get"}}, `tools names "x.Get"`},
	} {
		if _, err := Compile([]connector.RateLimit{c.l}, known, "p"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want %q", c.l, err, c.want)
		}
	}
}

// TestNoOvergrantUnderRefusals: 64 goroutines ask, for 2 s, with 50 ms
// deadlines, of a bucket of 100 a second with a burst of 10: most are
// refused, and the tokens the refused give back never let more through
// than the bucket allows (its burst and its refill over the time taken).
// Tokens given back at an instant earlier than another request's
// reservation were counted twice before (2-2.6x the limit).
func TestNoOvergrantUnderRefusals(t *testing.T) {
	limits, err := Compile([]connector.RateLimit{{Requests: 100, Per: "1s", Burst: 10}}, func(string) bool { return true }, "test")
	if err != nil {
		t.Fatal(err)
	}
	var set Set
	b := set.For(limits, "https://api.example.com", nil)
	var granted atomic.Int64
	start := time.Now()
	stop := start.Add(2 * time.Second)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				if b.Take(ctx, "example", Tool{Name: "x"}) == nil {
					granted.Add(1)
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	allowed := 10 + 100*time.Since(start).Seconds()
	if g := float64(granted.Load()); g > allowed {
		t.Errorf("%.0f requests got a token in %s; the bucket allows %.0f", g, time.Since(start).Round(time.Millisecond), allowed)
	}
}
