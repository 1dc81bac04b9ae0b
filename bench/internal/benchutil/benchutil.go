// Package benchutil holds the small helpers the benchmark programs under
// bench/ share: an HTTP transport that sends a bearer token, random tokens,
// and the machine's load average for a report's header.
package benchutil

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"strings"
)

// Bearer is an http.RoundTripper that sends every request through Base
// with "Authorization: Bearer Token" (RFC 6750 section 2.1), on a clone of
// the request (the caller's is not changed).
type Bearer struct {
	Token string
	Base  http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (b Bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.Token)
	return b.Base.RoundTrip(req)
}

// RandomHex returns 24 random bytes from crypto/rand as 48 hex digits
// (an operator token for a server a benchmark starts).
func RandomHex() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// LoadAvg returns "load average A B C" from /proc/loadavg (1, 5 and 15
// minutes), or "load average unknown" where it cannot be read.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return "load average " + strings.Join(f[:3], " ")
	}
	return "load average unknown"
}
