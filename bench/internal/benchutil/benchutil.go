// Package benchutil holds the small helpers the benchmark programs under
// bench/ share: an HTTP transport that sends a bearer token, random tokens,
// the machine's load average for a report's header, the -bin flag's
// binaries and the summary of figures per round.
package benchutil

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"slices"
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

// Target is one binary under measurement: its name in the report and its
// path ("" for a measurement in the benchmark's own process).
type Target struct{ Name, Path string }

// ParseBins reads a -bin flag's value, NAME=PATH pairs separated by
// commas; the error names the flag's value.
func ParseBins(s string) ([]Target, error) {
	var ts []Target
	for _, f := range strings.Split(s, ",") {
		name, path, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("-bin %q: want NAME=PATH, comma-separated", s)
		}
		ts = append(ts, Target{name, path})
	}
	return ts, nil
}

// Summary prints, for each target, the median, minimum and maximum of its
// figures per round (per[name], in the unit what names, e.g. "MB per
// attached run", printed with format verb), with target after them, and,
// for two targets, the median of the second's figure over the first's per
// round.
func Summary(ts []Target, per map[string][]float64, what, verb, target string) {
	for _, t := range ts {
		v := slices.Clone(per[t.Name])
		slices.Sort(v)
		f := "# %s: " + what + ", median " + verb + " (min " + verb + ", max " + verb + "; " + target + ")\n"
		fmt.Printf(f, t.Name, v[len(v)/2], v[0], v[len(v)-1])
	}
	if len(ts) == 2 {
		a, b := per[ts[0].Name], per[ts[1].Name]
		var ratio []float64
		for i := range a {
			ratio = append(ratio, b[i]/a[i])
		}
		slices.Sort(ratio)
		fmt.Printf("# %s / %s, %s: median %.2f\n", ts[1].Name, ts[0].Name, what, ratio[len(ratio)/2])
	}
}
