// Package notify tells people that something waits: it delivers events
// ("approval.requested", "gate.waiting", "run.failed", "run.completed")
// to webhook endpoints, signed, retried with backoff and jitter, at least
// once, through an [Outbox] that keeps what is not yet delivered.
//
// # Signature
//
// Every delivery carries
//
//	OpenPlaybook-Event-Id: evt_...        (the same on every retry: deduplicate on it)
//	OpenPlaybook-Event: approval.requested
//	OpenPlaybook-Signature: t=1764640000,v1=<hex>
//
// where <hex> is the lowercase hex HMAC-SHA256, keyed with the endpoint's
// secret, of the bytes "<t>." followed by the request body exactly as
// received; t is the Unix time (seconds) of this attempt. A receiver
// recomputes it over the raw body, compares in constant time, and rejects
// a t older (or newer) than its tolerance (5 minutes is usual) so that a
// captured delivery cannot be replayed later; [Verify] does all three.
// The header may hold several v1= values (a sender signing with an old
// and a new key at once); one match is enough. [Sign], and so the
// [Notifier], writes one, keyed with the endpoint's one secret: rotating
// it means a receiver accepts both secrets until the sender has the new
// one.
package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header names of a delivery.
const (
	HeaderSignature = "OpenPlaybook-Signature"
	HeaderEventID   = "OpenPlaybook-Event-Id"
	HeaderEvent     = "OpenPlaybook-Event"
)

// DefaultTolerance is how far from now a signature's timestamp may be
// for [Verify] with tolerance 0.
const DefaultTolerance = 5 * time.Minute

// Sign returns the OpenPlaybook-Signature header value for body sent at
// t with secret.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

func mac(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Errors of [Verify].
var (
	ErrNoSignature  = errors.New("notify: no OpenPlaybook-Signature header, or one without t= and v1=")
	ErrBadSignature = errors.New("notify: no v1 signature matches the body")
	ErrStale        = errors.New("notify: the signature's timestamp is outside the tolerance")
)

// Verify checks header (an OpenPlaybook-Signature value) against body
// and secret: some v1= must be the HMAC of "<t>.<body>", and t within
// tolerance of now (DefaultTolerance when tolerance is 0). It returns
// ErrNoSignature, ErrStale or ErrBadSignature (wrapped, with what was
// wrong) or nil.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if ts == "" || len(sigs) == 0 {
		return ErrNoSignature
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: t=%q is not Unix seconds", ErrNoSignature, ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: t is %s from now, the tolerance %s", ErrStale, d.Round(time.Second), tolerance)
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return ErrBadSignature
}
