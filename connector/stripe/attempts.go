package stripe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	stripeapi "github.com/stripe/stripe-go/v82"
	"go.opentelemetry.io/otel/trace"

	"github.com/openplaybook/openplaybook/internal/tracectx"
)

// ErrOutcomeUnknown is wrapped (errors.Is finds it) by the error
// [Connector.Call] returns when a request that changes something may
// have been applied although the call failed: one of its attempts (Call
// and stripe-go retry a request with the same Idempotency-Key) was sent
// and its answer lost or a 5xx, or Stripe answered that a request with
// the same key was still in progress (HTTP 409, code
// "idempotency_key_in_use": https://docs.stripe.com/error-codes). The
// final answer, whatever it is (a 409 again, a 429, a 400 that came
// before Stripe looked the key up), then does not say the call failed.
// A person decides: the call must not be made again under another key.
var ErrOutcomeUnknown = errors.New("the outcome is unknown: Stripe may have applied the request")

// attemptLog records, for one call, whether an attempt of a request
// that changes something may have been applied.
type attemptLog struct {
	mu      sync.Mutex
	applied bool
}

func (l *attemptLog) mark() {
	l.mu.Lock()
	l.applied = true
	l.mu.Unlock()
}

func (l *attemptLog) mayHaveApplied() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.applied
}

type attemptLogKey struct{}

// withAttemptLog returns ctx carrying a fresh attemptLog, which the
// tracking transport fills for every request made under ctx.
func withAttemptLog(ctx context.Context) (context.Context, *attemptLog) {
	l := &attemptLog{}
	return context.WithValue(ctx, attemptLogKey{}, l), l
}

// tracking is the transport under stripe-go: it sees every attempt
// stripe-go makes (its own retries included) and marks the call's
// attemptLog when a POST may have been applied.
type tracking struct{ base http.RoundTripper }

// maxConflictBody bounds what tracking reads of a 409 answer to find
// its error code (the body is passed on whole).
const maxConflictBody = 64 << 10

func (t tracking) RoundTrip(req *http.Request) (*http.Response, error) {
	if trace.SpanContextFromContext(req.Context()).IsValid() {
		// The W3C trace context of the call's span, when tracing is on
		// (a RoundTripper must not change the request it is given).
		req = req.Clone(req.Context())
		if req.Header == nil {
			req.Header = http.Header{}
		}
		tracectx.InjectHeader(req.Context(), req.Header)
	}
	resp, err := t.base.RoundTrip(req)
	l, _ := req.Context().Value(attemptLogKey{}).(*attemptLog)
	if l == nil || req.Method != http.MethodPost {
		return resp, err
	}
	switch {
	case err != nil:
		// It may have been sent before the connection failed.
		l.mark()
	case resp.StatusCode >= 500:
		l.mark()
	case resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusTooManyRequests:
		// A 409 is Stripe's answer while a request with the same key is
		// being processed, unless it says the key was used with other
		// parameters (type "idempotency_error"); the code
		// idempotency_key_in_use says so at any status. Read the code,
		// pass the body on unchanged.
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxConflictBody))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		if rerr != nil || inProgress(resp.StatusCode, b) {
			l.mark()
		}
	}
	return resp, err
}

// inProgress reports whether a 409 or 429 body says a request with the
// same idempotency key is being processed: code
// "idempotency_key_in_use", or a 409 that is not an idempotency_error.
func inProgress(status int, body []byte) bool {
	var e struct {
		Error struct {
			Type string `json:"type"`
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	if e.Error.Code == string(stripeapi.ErrorCodeIdempotencyKeyInUse) {
		return true
	}
	return status == http.StatusConflict && e.Error.Type != string(stripeapi.ErrorTypeIdempotency)
}

// trackingClient returns a copy of hc (nil: a client like stripe-go's
// default, 80 s timeout) whose transport is tracked.
func trackingClient(hc *http.Client) *http.Client {
	var out http.Client
	if hc != nil {
		out = *hc
	} else {
		out.Timeout = 80 * time.Second
	}
	base := out.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out.Transport = tracking{base: base}
	return &out
}

// InProgressAttempts is how many times a request that changes something
// is sent, with the same Idempotency-Key, while Stripe answers that a
// request with that key is in progress; the waits between are 0.5 s and
// 1 s (bounded by the call's time bound). stripe-go does not retry such
// an answer itself.
const InProgressAttempts = 3

// createKeyed makes a request that changes something with create, sent
// under key, again while Stripe answers that a request with key is in
// progress, up to [InProgressAttempts] times. With no key of the
// caller's (stripe-go then makes up a new one per request) it is made
// once: a new key would be a new request.
func (c *Connector) createKeyed(ctx context.Context, key string, create func() (*stripeapi.Refund, error)) (*stripeapi.Refund, error) {
	for attempt := 1; ; attempt++ {
		re, err := create()
		var se *stripeapi.Error
		if err == nil || key == "" || attempt == InProgressAttempts || !errors.As(err, &se) || !inProgressError(se) {
			return re, err
		}
		t := time.NewTimer(time.Duration(500<<(attempt-1)) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return re, err
		}
	}
}

// inProgressError reports whether Stripe's error says a request with the
// same idempotency key is being processed.
func inProgressError(se *stripeapi.Error) bool {
	return se.Code == stripeapi.ErrorCodeIdempotencyKeyInUse ||
		(se.HTTPStatusCode == http.StatusConflict && se.Type != stripeapi.ErrorTypeIdempotency)
}
