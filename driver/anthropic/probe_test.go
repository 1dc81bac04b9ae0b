package anthropic_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/anthropic"
)

// modelAPI is a fake of GET /v1/models/{model_id}: it knows the models
// in known and counts the requests and the keys it got.
func modelAPI(t *testing.T, status int, known ...string) (*httptest.Server, *[]string) {
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, sentKey(r.Header))
		id, ok := strings.CutPrefix(r.URL.Path, "/v1/models/")
		if r.Method != http.MethodGet || !ok {
			t.Errorf("request %s %s, want GET /v1/models/{model_id}", r.Method, r.URL.Path)
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case status != 200:
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key %s"}}`, sentKey(r.Header))
		case len(known) > 0 && known[0] == id:
			fmt.Fprintf(w, `{"type":"model","id":"claude-sonnet-4-5-20250929","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z"}`)
		default:
			w.WriteHeader(404)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"not_found_error","message":"model: %s"}}`, id)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &keys
}

func TestProbe(t *testing.T) {
	model := func(m string) func(*anthropic.Config) {
		return func(c *anthropic.Config) { c.Model = m; c.MaxRetries = 5 }
	}
	t.Run("alias served", func(t *testing.T) {
		srv, keys := modelAPI(t, 200, "claude-sonnet-4-5")
		if err := newDriver(t, srv, model("claude-sonnet-4-5")).Probe(context.Background()); err != nil {
			t.Errorf("Probe = %v", err)
		}
		if len(*keys) != 1 || (*keys)[0] != apiKey {
			t.Errorf("requests with keys %q, want one with the key", *keys)
		}
	})
	t.Run("unknown model", func(t *testing.T) {
		srv, _ := modelAPI(t, 200, "claude-sonnet-4-5")
		err := newDriver(t, srv, model("claude-sonet-4-5")).Probe(context.Background())
		want := fmt.Sprintf(`anthropic: the API at %s does not know the model "claude-sonet-4-5"`, srv.URL)
		if !errors.Is(err, driver.ErrUnknownModel) || err.Error() != want {
			t.Errorf("Probe = %v\nwant %s", err, want)
		}
	})
	t.Run("401", func(t *testing.T) {
		srv, keys := modelAPI(t, 401)
		err := newDriver(t, srv, model("claude-sonnet-4-5")).Probe(context.Background())
		var pe *driver.ProviderError
		if !errors.As(err, &pe) || pe.StatusCode != 401 || pe.Type != "authentication_error" || strings.Contains(err.Error(), apiKey) {
			t.Errorf("Probe = %v", err)
		}
		if len(*keys) != 1 {
			t.Errorf("%d requests, want 1 (a probe is not retried)", len(*keys))
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		err := newDriver(t, srv, model("claude-sonnet-4-5")).Probe(context.Background())
		var pe *driver.ProviderError
		if err == nil || errors.As(err, &pe) || errors.Is(err, driver.ErrUnknownModel) || !strings.Contains(err.Error(), srv.URL) {
			t.Errorf("Probe = %v", err)
		}
	})
}
