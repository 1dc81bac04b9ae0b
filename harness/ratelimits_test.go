package harness

import (
	"reflect"
	"testing"
	"time"
)

// TestRateLimitsDecoded: a connection's rateLimits are read as written;
// an empty list is kept as empty (no client-side limits), not as absent
// (the connector's own).
func TestRateLimitsDecoded(t *testing.T) {
	src := "connections:\n  github:\n    authKind: api_token\n    secrets: {apiKey: G}\n    rateLimits:\n      - {requests: 5000, per: 1h}\n      - {requests: 80, per: 1m, burst: 10, calls: writes, tools: [issue.create]}\n      - {requests: 3, per: 1s, calls: all}\n" +
		"  linear:\n    authKind: api_token\n    secrets: {apiKey: L}\n    rateLimits: []\n" +
		"  slack:\n    authKind: oauth\n    secrets: {accessToken: S}\n"
	h, ds := Parse("h.yaml", []byte(src), t.TempDir())
	for _, d := range ds {
		t.Errorf("unexpected %v", d)
	}
	if h == nil {
		t.Fatal("no harness")
	}
	got := h.Connections["github"].RateLimits
	for i := range got {
		got[i].Pos = Pos{}
	}
	want := []RateLimit{
		{Requests: 5000, Per: time.Hour},
		{Requests: 80, Per: time.Minute, Burst: 10, Calls: "writes", Tools: []string{"issue.create"}},
		{Requests: 3, Per: time.Second},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("github rateLimits = %+v, want %+v", got, want)
	}
	if l := h.Connections["linear"].RateLimits; l == nil || len(l) != 0 {
		t.Errorf("linear rateLimits = %#v, want an empty non-nil list", l)
	}
	if l := h.Connections["slack"].RateLimits; l != nil {
		t.Errorf("slack rateLimits = %#v, want nil (the connector's)", l)
	}
}
