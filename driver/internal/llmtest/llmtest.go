// Package llmtest holds the test scaffolding the model drivers' tests
// (driver/openai, driver/anthropic) share: a fake model API on loopback.
package llmtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Turn answers one request: req is its body decoded into the driver's
// request type, raw its top-level members as sent.
type Turn[Req any] func(t *testing.T, req Req, raw map[string]jsontext.Value) (status int, body string)

// API is a model API on loopback that answers each POST to Path with the
// next of Turns: as server-sent events (Content-Type text/event-stream)
// when the body begins with "event:", else as JSON. Any other request,
// and one after the last turn, fails the test.
type API[Req any] struct {
	T     *testing.T
	Path  string // such as "/v1/messages"
	Turns []Turn[Req]
	// Header, when set, holds headers to send with the answer to request
	// n (0-based): Retry-After, x-should-retry.
	Header map[int]http.Header

	mu       sync.Mutex
	requests []Req
	headers  []http.Header
}

// Start starts the server; it is closed when the test ends.
func (a *API[Req]) Start() *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != a.Path {
			a.T.Errorf("request %s %s, want POST %s", r.Method, r.URL.Path, a.Path)
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var raw map[string]jsontext.Value
		var req Req
		if err := json.Unmarshal(body, &raw); err != nil {
			a.T.Errorf("request body: %v", err)
		}
		if err := json.Unmarshal(body, &req); err != nil {
			a.T.Errorf("request body: %v", err)
		}
		a.mu.Lock()
		n := len(a.requests)
		a.requests = append(a.requests, req)
		a.headers = append(a.headers, r.Header.Clone())
		a.mu.Unlock()
		if n >= len(a.Turns) {
			a.T.Errorf("unexpected request %d", n+1)
			http.Error(w, "no more turns", http.StatusInternalServerError)
			return
		}
		status, out := a.Turns[n](a.T, req, raw)
		for k, v := range a.Header[n] {
			w.Header()[k] = v
		}
		if strings.HasPrefix(out, "event:") {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		io.WriteString(w, out)
	}))
	a.T.Cleanup(srv.Close)
	return srv
}

// Requests returns the bodies of the requests received so far, in order.
func (a *API[Req]) Requests() []Req {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.requests)
}

// Headers returns the headers of the requests received so far, in order.
func (a *API[Req]) Headers() []http.Header {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.headers)
}
