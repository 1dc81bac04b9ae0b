package stripemock

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// Request is one request a [Recorder] passed on upstream.
type Request struct {
	Method string
	Path   string
	// Query is the raw query string, without "?".
	Query  string
	Header http.Header
	// Body is the request body as sent (form-encoded for Stripe's v1 API).
	Body []byte
}

// Form parses Body as a form (what stripe-go sends on POST). It returns
// nil when the body is not a valid form.
func (r Request) Form() url.Values {
	v, err := url.ParseQuery(string(r.Body))
	if err != nil {
		return nil
	}
	return v
}

// Recorder is a reverse proxy on a loopback port that records every request
// before passing it on to stripe-mock, so a test can count the requests
// that reached "Stripe" and look at their headers and bodies. It is safe
// for concurrent use.
type Recorder struct {
	// URL is the proxy's base URL; point the Stripe client here.
	URL string

	mu   sync.Mutex
	reqs []Request
}

// Proxy starts a [Recorder] in front of the stripe-mock at upstream (a base
// URL from [Start]). It is closed in t.Cleanup. Proxies are cheap: start one
// per test, all in front of one stripe-mock.
func Proxy(t testing.TB, upstream string) *Recorder {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatalf("stripemock: upstream URL: %v", err)
	}
	r := &Recorder{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		r.mu.Lock()
		r.reqs = append(r.reqs, Request{
			Method: req.Method,
			Path:   req.URL.Path,
			Query:  req.URL.RawQuery,
			Header: req.Header.Clone(),
			Body:   body,
		})
		r.mu.Unlock()
		rp.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Count returns how many requests the proxy has received.
func (r *Recorder) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// Requests returns the requests received so far, oldest first.
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

// StartCounting starts stripe-mock (see [Start]) behind a [Recorder] and
// returns the proxy's base URL and a function counting the requests that
// reached it. Use [Proxy] directly to see the requests themselves.
func StartCounting(t testing.TB) (baseURL string, count func() int) {
	t.Helper()
	r := Proxy(t, Start(t))
	return r.URL, r.Count
}
