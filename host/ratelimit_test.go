package host

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/connector/ratelimit"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/registry"
)

// TestHarnessRateLimits: a connection's rateLimits in the harness file
// reach its connector: the provider (a loopback server that counts
// requests) sees one request of a tool limited to one an hour, and the
// second call is refused before it is sent. A limit naming a tool the
// catalog does not have fails the connection, saying which.
func TestHarnessRateLimits(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object": "list", "data": []}`))
	}))
	defer srv.Close()
	open := func(limits string) *Host {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("RESEND_KEY=re_test_1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		src := "secrets:\n  env: false\n  dotenv: [.env]\nconnections:\n  resend:\n    authKind: api_token\n    secrets: {apiKey: RESEND_KEY}\n    baseURL: " + srv.URL + "\n    rateLimits: " + limits + "\n"
		hs, ds := harness.Parse(filepath.Join(dir, "h.yaml"), []byte(src), dir)
		for _, d := range ds {
			t.Fatalf("harness: %v", d)
		}
		h := Connect(context.Background(), hs, nil, nil)
		t.Cleanup(func() { h.Close() })
		return h
	}

	h := open("[{requests: 1, per: 1h, tools: [resend.domain.list]}]")
	conn := h.Connections["resend"]
	if conn == nil {
		t.Fatalf("no resend connection: %v", h.ConnectionErrs["resend"])
	}
	list := conn.Tools()["resend.domain.list"]
	var errs []error
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 5e9)
		_, err := list.Call(ctx, jsontext.Value(`{}`))
		cancel()
		errs = append(errs, err)
	}
	if errs[0] != nil {
		t.Fatalf("first call: %v", errs[0])
	}
	if !errors.Is(errs[1], ratelimit.ErrLimited) || !registry.IsDefinite(errs[1]) {
		t.Errorf("second call = %v; want a definite rate-limit refusal", errs[1])
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("the provider got %d requests, want 1", n)
	}

	bad := open("[{requests: 1, per: 1h, tools: [resend.domain.lists]}]")
	if err := bad.ConnectionErrs["resend"]; err == nil || !strings.Contains(err.Error(), `rateLimits/0: tools names "resend.domain.lists"`) {
		t.Errorf("a limit on an unknown tool: %v", err)
	}
}
