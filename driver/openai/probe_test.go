package openai_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/openai"
)

// TestProbe: GET {baseURL}/models with the key, once (never retried);
// the model listed, not listed (with a suggestion), a server that lists
// no models (404), a refused key, an unreachable port.
func TestProbe(t *testing.T) {
	var requests []string
	status, body := 200, ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests = append(requests, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	defer srv.Close()
	probe := func(model string) error {
		requests = nil
		return newDriver(t, srv, func(c *openai.Config) { c.Model = model; c.MaxRetries = 5 }).Probe(context.Background())
	}
	body = `{"object":"list","data":[{"id":"llama3.1:8b","object":"model","created":1,"owned_by":"library"},{"id":"qwen2.5:7b","object":"model","created":1,"owned_by":"library"}]}`
	if err := probe("qwen2.5:7b"); err != nil || len(requests) != 1 || requests[0] != "GET /v1/models Bearer "+apiKey {
		t.Errorf("listed: %v, requests %q", err, requests)
	}
	err := probe("llama3.1:7b")
	if !errors.Is(err, driver.ErrUnknownModel) || !strings.Contains(err.Error(), `does not list the model "llama3.1:7b" (it lists 2); did you mean "llama3.1:8b"?`) {
		t.Errorf("unknown: %v", err)
	}
	status, body = 404, `404 page not found`
	var pe *driver.ProviderError
	if err := probe("m"); !errors.As(err, &pe) || pe.StatusCode != 404 || len(requests) != 1 {
		t.Errorf("no list: %v, %d requests", err, len(requests))
	}
	status, body = 401, `{"error":{"message":"Incorrect API key provided: `+apiKey+`","type":"invalid_request_error","code":"invalid_api_key"}}`
	if err := probe("m"); !errors.As(err, &pe) || pe.StatusCode != 401 || strings.Contains(err.Error(), apiKey) {
		t.Errorf("401: %v", err)
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	err = newDriver(t, gone, nil).Probe(context.Background())
	if err == nil || errors.As(err, &pe) || !driver.Transient(err) || !strings.Contains(err.Error(), gone.URL+"/v1") {
		t.Errorf("unreachable: %v", err)
	}
}
