// Package ratelimit keeps a connection's client-side rate limits: the
// token buckets ([connector.RateLimit]) that every request a connector
// sends takes a token from, so that a run keeps under a provider's
// published limit instead of collecting 429 answers.
//
// A request waits for its tokens for at most what is left of its
// context's deadline; when a token would come later, [Buckets.Take]
// refuses at once with an error wrapping [ErrLimited] and the request
// must not be sent (a limit that is hit refuses; it never queues
// without bound). Buckets are kept per process by [Set], shared by
// every connection opened on the same API root, credential and limits.
// Replicas do not share them (docs/connectors.md, "Rate limits").
//
// The buckets are golang.org/x/time/rate limiters.
package ratelimit

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/openplaybook/openplaybook/connector"
)

// ErrLimited is wrapped by the refusal of a request whose token would
// come after its deadline, or whose context ended while it waited.
var ErrLimited = errors.New("rate limit")

// Tool says what [Compile] and [Buckets.Take] need of a catalog's tool.
type Tool struct {
	Name string
	// Writes is true for a side-effecting tool.
	Writes bool
	// Requests is how many requests one call of it sends, each taking
	// a token (0 means 1).
	Requests int
}

// Limit is a compiled [connector.RateLimit].
type Limit struct {
	every rate.Limit
	burst int
	calls string          // "", "reads", "writes"
	tools map[string]bool // nil: every tool calls admits
	text  string          // "80 requests per 1m for writes"
}

// String says the limit in words ("80 requests per 1m for writes").
func (l Limit) String() string { return l.text }

// Compile checks limits against a provider's catalog (known reports
// whether a tool name is one of its tools; names are exact) and compiles
// them. where prefixes each error, followed by "/<index>" ("github:
// rateLimits/0: per must be ...").
func Compile(limits []connector.RateLimit, known func(name string) bool, where string) ([]Limit, error) {
	var out []Limit
	for i, l := range limits {
		at := fmt.Sprintf("%s/%d", where, i)
		if l.Requests <= 0 {
			return nil, fmt.Errorf("%s: requests must be a whole number more than 0, not %d", at, l.Requests)
		}
		per, err := time.ParseDuration(l.Per)
		if err != nil || per <= 0 || per > 24*time.Hour {
			return nil, fmt.Errorf("%s: per must be a duration more than 0 and at most 24h, such as \"1s\", \"1m\" or \"1h\", not %q", at, l.Per)
		}
		if l.Burst < 0 {
			return nil, fmt.Errorf("%s: burst must be 0 (the same as requests) or more, not %d", at, l.Burst)
		}
		c := Limit{every: rate.Limit(float64(l.Requests) / per.Seconds()), burst: l.Burst, calls: l.Calls}
		if c.burst == 0 {
			c.burst = l.Requests
		}
		switch l.Calls {
		case "", "all":
			c.calls = ""
		case "reads", "writes":
		default:
			return nil, fmt.Errorf("%s: calls must be \"all\", \"reads\" or \"writes\", not %q", at, l.Calls)
		}
		c.text = fmt.Sprintf("%d requests per %s", l.Requests, l.Per)
		if l.Requests == 1 {
			c.text = "1 request per " + l.Per
		}
		if c.calls != "" {
			c.text += " for " + c.calls
		}
		if len(l.Tools) > 0 {
			c.tools = map[string]bool{}
			for _, name := range l.Tools {
				if !known(name) {
					return nil, fmt.Errorf("%s: tools names %q, which is not a tool of the catalog (names are exact)", at, name)
				}
				c.tools[name] = true
			}
			c.text += " of " + strings.Join(l.Tools, ", ")
		}
		out = append(out, c)
	}
	return out, nil
}

// applies reports whether a request of t takes a token from l.
func (l *Limit) applies(t Tool) bool {
	if l.tools != nil && !l.tools[t.Name] {
		return false
	}
	switch l.calls {
	case "reads":
		return !t.Writes
	case "writes":
		return t.Writes
	}
	return true
}

// Set holds a provider's buckets in one process, by connection. The zero
// Set is ready to use.
type Set struct {
	m sync.Map // digest -> *Buckets
}

// For returns the buckets of the connection identified by its API root
// and credential values (hashed with SHA-256, never kept), made on first
// use and shared by every connection of the process opened the same way.
// It returns nil (no limits) when limits is empty.
func (s *Set) For(limits []Limit, root string, secrets map[string]string) *Buckets {
	if len(limits) == 0 {
		return nil
	}
	h := sha256.New()
	fmt.Fprintf(h, "%q\n", root)
	for _, role := range slices.Sorted(maps.Keys(secrets)) {
		fmt.Fprintf(h, "%q=%q\n", role, secrets[role])
	}
	for _, l := range limits {
		// A harness that sets its own limits gets buckets of its own.
		fmt.Fprintf(h, "%v/%d/%s\n", float64(l.every), l.burst, l.text)
	}
	key := string(h.Sum(nil))
	if b, ok := s.m.Load(key); ok {
		return b.(*Buckets)
	}
	b := &Buckets{limits: limits}
	for _, l := range limits {
		b.rates = append(b.rates, rate.NewLimiter(l.every, l.burst))
	}
	got, _ := s.m.LoadOrStore(key, b)
	return got.(*Buckets)
}

// Buckets are one connection's token buckets, one per limit. A nil
// *Buckets has no limits.
type Buckets struct {
	limits []Limit
	rates  []*rate.Limiter
	// mu makes a request's reservations, and their cancellation when it
	// is refused at once, one step: a refusal gives its tokens back at
	// the instant it reserved them, which must be no earlier than any
	// other request's reservation (else x/time/rate counts the refill
	// between the two instants twice).
	mu sync.Mutex
}

// Take waits for t.Requests tokens (at least one) of every bucket that
// applies to a request of t
// (provider names the connection in errors). It returns an error
// wrapping [ErrLimited], and takes nothing, when a token would come
// after ctx's deadline or ctx ends first; the request must then not be
// sent.
func (b *Buckets) Take(ctx context.Context, provider string, t Tool) error {
	if b == nil {
		return nil
	}
	n := max(t.Requests, 1)
	b.mu.Lock()
	now := time.Now()
	var held []*rate.Reservation
	// A request refused at once gives back every token it reserved:
	// cancelled at the instant they were reserved, so that even a token
	// that was due at once returns to its bucket
	// (rate.Reservation.CancelAt restores nothing due before the time it
	// is given). One whose context ends while it waits is cancelled at
	// that later time: a token due meanwhile stays taken (never more
	// requests than the limit, at worst fewer).
	release := func() {
		for _, r := range held {
			r.CancelAt(now)
		}
	}
	var wait time.Duration
	var slowest string
	for i := range b.limits {
		l := &b.limits[i]
		if !l.applies(t) {
			continue
		}
		r := b.rates[i].ReserveN(now, n)
		if !r.OK() {
			release()
			b.mu.Unlock()
			return fmt.Errorf("%w: the %s connection allows %s (a burst of %d), and this call sends %d requests", ErrLimited, provider, l.text, l.burst, n)
		}
		held = append(held, r)
		if d := r.DelayFrom(now); d > wait {
			wait, slowest = d, l.text
		}
	}
	if wait == 0 {
		b.mu.Unlock()
		return nil
	}
	if dl, ok := ctx.Deadline(); ok && now.Add(wait).After(dl) {
		release()
		b.mu.Unlock()
		return fmt.Errorf("%w: the %s connection allows %s, and the next request may go in %s, after this call's deadline", ErrLimited, provider, slowest, wait.Round(time.Millisecond))
	}
	b.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		at := time.Now()
		for _, r := range held {
			r.CancelAt(at)
		}
		b.mu.Unlock()
		return fmt.Errorf("%w: waiting for the %s connection's limit of %s: %v", ErrLimited, provider, slowest, ctx.Err())
	}
}
