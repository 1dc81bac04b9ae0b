package httpconn_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/connector"
	"github.com/openplaybook/openplaybook/connector/httpconn"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
)

const secret = "sk_live_supersecretvalue1234"

func def(name string, writes bool) playbook.Definition {
	risk := "read"
	if writes {
		risk = "money"
	}
	return playbook.Definition{
		Name: name, Source: "connector", ConnectorType: "acme", Description: "d", Permissions: []string{"p"},
		InputSchema: jsontext.Value(`{"type":"object"}`), OutputSchema: jsontext.Value(`{"type":"object"}`),
		RiskClass: risk, SideEffecting: &writes, RequiresApproval: &writes, DataScopeResources: []string{"acme.x"},
	}
}

func spec(idem *httpconn.Idempotency) httpconn.Spec {
	return httpconn.Spec{
		Provider: "acme", Title: "Acme", APIRoot: "https://api.acme.test/v1",
		Auth: map[string]httpconn.Auth{
			"api_token": {Secrets: []string{"apiKey"}, Bearer: "apiKey"},
			"oauth":     {Secrets: []string{"accessToken"}, Optional: []string{"refreshToken", "clientId", "clientSecret"}, Bearer: "accessToken", TokenURL: "http://unused.test/token"},
		},
		Errors:      httpconn.ErrorShape{Code: []string{"/error/code"}, Message: []string{"/error/message"}},
		Idempotency: idem,
		Tools: []httpconn.Tool{
			{
				Definition: def("acme.item.get", false),
				Request:    httpconn.Request{Method: "GET", Path: "/items/{id}", Query: map[string]jsontext.Value{"expand": jsontext.Value(`"$/expand"`)}},
				Result:     jsontext.Value(`{"id": "$/id", "name": "$/name", "tags": {"$each": "$/tags", "$map": "$/label"}}`),
			},
			{
				Definition: def("acme.payment.create", true),
				Request:    httpconn.Request{Method: "POST", Path: "/payments", Body: jsontext.Value(`{"amount": "$/amount", "memo": "$/memo"}`)},
				Result:     jsontext.Value(`{"id": "$/id"}`),
			},
		},
	}
}

func open(t *testing.T, sp httpconn.Spec, cfg connector.Config) *httpconn.Connection {
	t.Helper()
	p, err := httpconn.New(sp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AuthKind == "" {
		cfg.AuthKind = "api_token"
	}
	if cfg.Secrets == nil {
		cfg.Secrets = map[string]string{"apiKey": secret}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	c, err := p.OpenWith(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func call(t *testing.T, c *httpconn.Connection, name, args string) (string, error) {
	t.Helper()
	ctx := registry.WithCallInfo(context.Background(), registry.CallInfo{Run: "run_1", Step: "s", Attempt: 1, Index: 0})
	res, err := c.Tools()[name].Call(ctx, jsontext.Value(args))
	return string(res.Content), err
}

func TestReadBuildsRequestAndResult(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		io.WriteString(w, `{"id": 9007199254740993, "name": "Widget", "extra": "dropped", "tags": [{"label": "a"}, {"label": "b"}, {}]}`)
	}))
	defer srv.Close()
	c := open(t, spec(nil), connector.Config{BaseURL: srv.URL + "/v1"})
	out, err := call(t, c, "acme.item.get", `{"id": "a/b c", "expand": ["x", "y"]}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":9007199254740993,"name":"Widget","tags":["a","b"]}`; out != want {
		t.Errorf("result %s, want %s (64-bit ids exact, absent elements dropped)", out, want)
	}
	if got.URL.EscapedPath() != "/v1/items/a%2Fb%20c" {
		t.Errorf("path %s: a path argument is escaped, never a new segment", got.URL.EscapedPath())
	}
	if q := got.URL.Query()["expand"]; len(q) != 2 || q[0] != "x" || q[1] != "y" {
		t.Errorf("query %v: an array repeats the parameter", got.URL.Query())
	}
	if got.Header.Get("Authorization") != "Bearer "+secret {
		t.Errorf("Authorization %q", got.Header.Get("Authorization"))
	}
}

func TestPathTraversalRefused(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	c := open(t, spec(nil), connector.Config{BaseURL: srv.URL})
	for _, id := range []string{"..", ".", ""} {
		_, err := call(t, c, "acme.item.get", `{"id": "`+id+`"}`)
		if err == nil || !registry.IsDefinite(err) {
			t.Errorf("id %q: %v; want a definite refusal", id, err)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("%d requests sent for refused arguments", hits.Load())
	}
}

func TestProviderErrorIsClearAndRedacted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"error": {"code": "forbidden", "message": "key `+secret+` lacks scope; also ghp_R8sKq2Lm9XvT4bN7cW1pZ6yH3jD0fG5aE8uQ"}, "debug": "RAWBODY-MARKER"}`)
	}))
	defer srv.Close()
	c := open(t, spec(nil), connector.Config{BaseURL: srv.URL})
	_, err := call(t, c, "acme.item.get", `{"id": "1"}`)
	if err == nil || !registry.IsDefinite(err) {
		t.Fatalf("%v: a 4xx is a definite error", err)
	}
	msg := err.Error()
	for _, bad := range []string{secret, "ghp_R8sKq2Lm9XvT4bN7cW1pZ6yH3jD0fG5aE8uQ", "RAWBODY-MARKER"} {
		if strings.Contains(msg, bad) {
			t.Errorf("the error shows %q: %s", bad, msg)
		}
	}
	for _, want := range []string{"403", "forbidden", "lacks scope"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q: %s", want, msg)
		}
	}
}

func TestReadRetriesWithRetryAfter(t *testing.T) {
	var hits atomic.Int32
	var times []time.Time
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		switch hits.Add(1) {
		case 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.WriteHeader(http.StatusBadGateway)
		default:
			io.WriteString(w, `{"id": "1"}`)
		}
	}))
	defer srv.Close()
	c := open(t, spec(nil), connector.Config{BaseURL: srv.URL})
	if _, err := call(t, c, "acme.item.get", `{"id": "1"}`); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 3 {
		t.Fatalf("%d requests; want 3 (429, 502, 200)", hits.Load())
	}
	if d := times[1].Sub(times[0]); d < 900*time.Millisecond {
		t.Errorf("retried %v after a 429 with Retry-After: 1", d)
	}
}

func TestRetryAfterBeyondTheBoundFails(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error": {"code": "rate_limited", "message": "slow down"}}`)
	}))
	defer srv.Close()
	c := open(t, spec(nil), connector.Config{BaseURL: srv.URL, Timeout: 2 * time.Second})
	start := time.Now()
	_, err := call(t, c, "acme.item.get", `{"id": "1"}`)
	if err == nil || !strings.Contains(err.Error(), "rate_limited") || !registry.IsDefinite(err) {
		t.Fatalf("%v; want the 429's message, definite", err)
	}
	if time.Since(start) > time.Second || hits.Load() != 1 {
		t.Errorf("waited %v, %d requests: a Retry-After past the call's bound gives up at once", time.Since(start), hits.Load())
	}
}

func TestWriteWithoutIdempotencyIsNeverRetried(t *testing.T) {
	for _, status := range []int{500, 502, 503} {
		var hits atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			w.WriteHeader(status)
		}))
		c := open(t, spec(nil), connector.Config{BaseURL: srv.URL})
		_, err := call(t, c, "acme.payment.create", `{"amount": 5}`)
		srv.Close()
		if err == nil || registry.IsDefinite(err) || !strings.Contains(err.Error(), "outcome is unknown") {
			t.Errorf("%d: %v; a write's 5xx is outcome-unknown", status, err)
		}
		if hits.Load() != 1 {
			t.Errorf("%d: %d requests; a write without an idempotency key is sent once", status, hits.Load())
		}
	}
}

func TestWriteLostConnectionIsOutcomeUnknown(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.ReadAll(r.Body)
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close() // the request arrived; the answer is lost
	}))
	defer srv.Close()
	c := open(t, spec(nil), connector.Config{BaseURL: srv.URL})
	_, err := call(t, c, "acme.payment.create", `{"amount": 5}`)
	if err == nil || registry.IsDefinite(err) {
		t.Fatalf("%v; a write whose answer was lost is outcome-unknown", err)
	}
	if hits.Load() != 1 {
		t.Errorf("%d requests; never retried blindly", hits.Load())
	}
}

func TestWriteTimeoutIsOutcomeUnknown(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer srv.Close()
	defer close(release)
	c := open(t, spec(nil), connector.Config{BaseURL: srv.URL, Timeout: 300 * time.Millisecond})
	_, err := call(t, c, "acme.payment.create", `{"amount": 5}`)
	if err == nil || registry.IsDefinite(err) || !strings.Contains(err.Error(), "time bound") {
		t.Fatalf("%v; a write that timed out is outcome-unknown", err)
	}
}

func TestIdempotentWriteRetriesWithTheSameKey(t *testing.T) {
	var keys []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n := len(keys)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"id": "pay_1"}`)
	}))
	defer srv.Close()
	c := open(t, spec(&httpconn.Idempotency{Header: "Idempotency-Key"}), connector.Config{BaseURL: srv.URL})
	out, err := call(t, c, "acme.payment.create", `{"amount": 5}`)
	if err != nil || out != `{"id":"pay_1"}` {
		t.Fatalf("%s %v", out, err)
	}
	want := registry.CallInfo{Run: "run_1", Step: "s", Attempt: 1, Index: 0}.IdempotencyKey()
	if len(keys) != 2 || keys[0] != want || keys[1] != want {
		t.Errorf("keys %q; want %q twice", keys, want)
	}
}

func TestIdempotencyKeyInBody(t *testing.T) {
	var body map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&body)
		io.WriteString(w, `{"id": "pay_1"}`)
	}))
	defer srv.Close()
	c := open(t, spec(&httpconn.Idempotency{Body: "idempotency_key"}), connector.Config{BaseURL: srv.URL})
	if _, err := call(t, c, "acme.payment.create", `{"amount": 5}`); err != nil {
		t.Fatal(err)
	}
	if k, _ := body["idempotency_key"].(string); !strings.HasPrefix(k, "opb_") || body["amount"] != 5.0 || body["memo"] != nil {
		t.Errorf("body %v", body)
	}
}

func TestAnswerLimits(t *testing.T) {
	cases := map[string]string{
		"too big":    `{"id": "` + strings.Repeat("x", httpconn.MaxAnswerBytes) + `"}`,
		"not JSON":   `<html>oops</html>`,
		"duplicates": `{"id": "1", "id": "2"}`,
		"too deep":   strings.Repeat("[", 300) + strings.Repeat("]", 300),
	}
	for name, body := range cases {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
		c := open(t, spec(nil), connector.Config{BaseURL: srv.URL})
		_, err := call(t, c, "acme.item.get", `{"id": "1"}`)
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
		_, err = call(t, c, "acme.payment.create", `{"amount": 1}`)
		if err == nil || registry.IsDefinite(err) {
			t.Errorf("%s: a write whose 2xx answer cannot be read: %v; want outcome-unknown", name, err)
		}
		srv.Close()
	}
}

func TestOAuthRefresh(t *testing.T) {
	var tokenHits atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokenHits.Add(1)
		r.ParseForm()
		if r.Form.Get("grant_type") != "refresh_token" || r.Form.Get("refresh_token") != "rt_1" || r.Form.Get("client_id") != "cid" || r.Form.Get("client_secret") != "csecret" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error": "invalid_grant"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token": "at_fresh", "token_type": "Bearer", "expires_in": 3600}`)
	}))
	defer tokens.Close()
	var seen []string
	var mu sync.Mutex
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer at_fresh" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		io.WriteString(w, `{"id": "1"}`)
	}))
	defer api.Close()
	secrets := map[string]string{"accessToken": "at_expired", "refreshToken": "rt_1", "clientId": "cid", "clientSecret": "csecret"}
	c := open(t, spec(nil), connector.Config{AuthKind: "oauth", Secrets: secrets, BaseURL: api.URL, TokenURL: tokens.URL})
	for i := 0; i < 2; i++ {
		if _, err := call(t, c, "acme.item.get", `{"id": "1"}`); err != nil {
			t.Fatal(err)
		}
	}
	if tokenHits.Load() != 1 || len(seen) != 3 || seen[0] != "Bearer at_expired" || seen[2] != "Bearer at_fresh" {
		t.Errorf("token endpoint hit %d times, API saw %q; want one refresh after the first 401", tokenHits.Load(), seen)
	}

	// A refused refresh is a definite error naming the endpoint's code.
	secrets["refreshToken"] = "rt_revoked"
	c = open(t, spec(nil), connector.Config{AuthKind: "oauth", Secrets: secrets, BaseURL: api.URL, TokenURL: tokens.URL})
	_, err := call(t, c, "acme.item.get", `{"id": "1"}`)
	if err == nil || !strings.Contains(err.Error(), "invalid_grant") || strings.Contains(err.Error(), "rt_revoked") {
		t.Errorf("%v", err)
	}
}

func TestOpenRefusesBadConfig(t *testing.T) {
	p, err := httpconn.New(spec(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]connector.Config{
		"wrong auth kind": {AuthKind: "aggregator_link", Secrets: map[string]string{"apiKey": "k"}},
		"missing role":    {AuthKind: "oauth", Secrets: map[string]string{"apiKey": "k"}},
		"user info":       {AuthKind: "api_token", Secrets: map[string]string{"apiKey": "k"}, BaseURL: "http://u:p@host"},
		"not http":        {AuthKind: "api_token", Secrets: map[string]string{"apiKey": "k"}, BaseURL: "file:///etc"},
		"control chars":   {AuthKind: "api_token", Secrets: map[string]string{"apiKey": "k\r\nX-Evil: 1"}},
	} {
		if _, err := p.Open(cfg); err == nil {
			t.Errorf("%s: opened", name)
		} else if strings.Contains(err.Error(), "X-Evil") {
			t.Errorf("%s: the error quotes the secret: %v", name, err)
		}
	}
}

func TestSpecErrors(t *testing.T) {
	bad := func(f func(*httpconn.Spec)) error {
		s := spec(nil)
		f(&s)
		_, err := httpconn.New(s, nil)
		return err
	}
	for name, f := range map[string]func(*httpconn.Spec){
		"unknown operator": func(s *httpconn.Spec) { s.Tools[0].Result = jsontext.Value(`{"$eval": "x"}`) },
		"bad pointer":      func(s *httpconn.Spec) { s.Tools[0].Result = jsontext.Value(`"$x"`) },
		"unknown hook":     func(s *httpconn.Spec) { s.Tools[0].Hook = "nope" },
		"braces":           func(s *httpconn.Spec) { s.Tools[0].Request.Path = "/items/{id" },
		"check is a write": func(s *httpconn.Spec) { s.Check = &httpconn.Check{Tool: "acme.payment.create"} },
		"duplicate tool":   func(s *httpconn.Spec) { s.Tools[1].Definition.Name = "acme.item.get" },
	} {
		if err := bad(f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestOAuthClientCredentials(t *testing.T) {
	var tokenHits atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := tokenHits.Add(1)
		id, pw, ok := r.BasicAuth()
		r.ParseForm()
		if !ok || id != "cid" || pw != "csecret" || r.Form.Get("grant_type") != "client_credentials" || r.Form.Get("scope") != "transactions:read" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error": "invalid_client"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token": "at_`+string(rune('0'+n))+`", "token_type": "Bearer", "expires_in": 3600}`)
	}))
	defer tokens.Close()
	var seen []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
		if len(seen) == 2 { // the provider revokes the first token
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		io.WriteString(w, `{"id": "1"}`)
	}))
	defer api.Close()
	sp := spec(nil)
	a := sp.Auth["oauth"]
	a.Grant, a.Optional = "client_credentials", []string{"clientId", "clientSecret"}
	sp.Auth["oauth"] = a
	c := open(t, sp, connector.Config{AuthKind: "oauth", Secrets: map[string]string{"clientId": "cid", "clientSecret": "csecret"},
		Scopes: []string{"transactions:read"}, BaseURL: api.URL, TokenURL: tokens.URL})
	for i := 0; i < 2; i++ {
		if _, err := call(t, c, "acme.item.get", `{"id": "1"}`); err != nil {
			t.Fatal(err)
		}
	}
	if tokenHits.Load() != 2 || len(seen) != 3 || seen[0] != "Bearer at_1" || seen[1] != "Bearer at_1" || seen[2] != "Bearer at_2" {
		t.Errorf("token endpoint hit %d times, API saw %q; want a token, reused, and a new one after the 401", tokenHits.Load(), seen)
	}
	c = open(t, sp, connector.Config{AuthKind: "oauth", Secrets: map[string]string{"clientId": "cid", "clientSecret": "wrong"}, BaseURL: api.URL, TokenURL: tokens.URL})
	if _, err := call(t, c, "acme.item.get", `{"id": "1"}`); err == nil || !strings.Contains(err.Error(), "invalid_client") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("%v", err)
	}
}

// headerSpec is spec with the credential in custom headers (Shopify's
// X-Shopify-Access-Token, Plaid's PLAID-SECRET) and in the JSON body
// (Plaid's access_token), which Go's http.Client does not strip when it
// follows a redirect.
func headerSpec() httpconn.Spec {
	sp := spec(nil)
	sp.Auth["api_token"] = httpconn.Auth{Secrets: []string{"apiKey"}, Header: map[string]string{"X-Api-Key": "apiKey"}, Body: map[string]string{"secret": "apiKey"}}
	sp.Tools[0].Request.Method = "POST"
	return sp
}

func TestRedirectsAreNeverFollowed(t *testing.T) {
	var leaked atomic.Int32
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Add(1)
		io.WriteString(w, `{"id": "1"}`)
	}))
	defer evil.Close()
	for _, status := range []int{301, 302, 303, 307, 308} {
		for _, target := range []string{evil.URL + "/steal", "file:///etc/passwd", "/same-host-other-path"} {
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1) > 1 {
					io.WriteString(w, `{"id": "1"}`)
					return
				}
				http.Redirect(w, r, target, status)
			}))
			for _, sp := range []httpconn.Spec{spec(nil), headerSpec()} {
				hits.Store(0)
				c := open(t, sp, connector.Config{BaseURL: srv.URL})
				_, err := call(t, c, "acme.item.get", `{"id": "1"}`)
				if err == nil || !registry.IsDefinite(err) {
					t.Errorf("%d to %s: %v; a read redirected is a definite error", status, target, err)
				}
				if err != nil && strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows the secret: %v", err)
				}
				hits.Store(0)
				_, err = call(t, c, "acme.payment.create", `{"amount": 5}`)
				if err == nil {
					t.Errorf("%d to %s: a write redirected succeeded", status, target)
				}
				if status == 303 && registry.IsDefinite(err) {
					t.Errorf("303 after a write: %v; the provider may have applied it", err)
				}
				if hits.Load() != 1 {
					t.Errorf("%d to %s: %d requests to the API; the redirect was followed", status, target, hits.Load())
				}
			}
			srv.Close()
		}
	}
	if leaked.Load() != 0 {
		t.Errorf("another host got %d requests carrying the credential", leaked.Load())
	}
}

func TestTokenEndpointRedirectIsNotFollowed(t *testing.T) {
	var leaked atomic.Int32
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token": "at_evil", "token_type": "Bearer"}`)
	}))
	defer evil.Close()
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, evil.URL+"/token", http.StatusTemporaryRedirect)
	}))
	defer tokens.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"id": "1"}`) }))
	defer api.Close()
	secrets := map[string]string{"refreshToken": "rt_secret_1", "clientId": "cid", "clientSecret": "csecret_value"}
	c := open(t, spec(nil), connector.Config{AuthKind: "oauth", Secrets: secrets, BaseURL: api.URL, TokenURL: tokens.URL})
	_, err := call(t, c, "acme.item.get", `{"id": "1"}`)
	if err == nil || !registry.IsDefinite(err) {
		t.Errorf("%v; a token endpoint that redirects gives no token", err)
	}
	if leaked.Load() != 0 {
		t.Errorf("the client secret and refresh token were re-posted to another host")
	}
}

func TestSecretAcrossTheClipIsRedacted(t *testing.T) {
	for _, pad := range []int{470, 480, 490, 499} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error": {"code": "bad", "message": "`+strings.Repeat("x", pad)+secret+`"}}`)
		}))
		c := open(t, spec(nil), connector.Config{BaseURL: srv.URL})
		_, err := call(t, c, "acme.item.get", `{"id": "1"}`)
		srv.Close()
		if err == nil {
			t.Fatal("accepted")
		}
		if strings.Contains(err.Error(), secret[:12]) {
			t.Errorf("pad %d: the error shows part of the secret: %s", pad, err.Error()[len(err.Error())-60:])
		}
	}
}

func TestRefreshedTokenIsRedacted(t *testing.T) {
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token": "at_fresh_from_endpoint_42", "refresh_token": "rt_rotated_value_77", "token_type": "Bearer", "expires_in": 3600}`)
	}))
	defer tokens.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"error": {"code": "forbidden", "message": "token `+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+` lacks scope (rt_rotated_value_77)"}}`)
	}))
	defer api.Close()
	secrets := map[string]string{"refreshToken": "rt_1_value", "clientId": "cid", "clientSecret": "csecret"}
	c := open(t, spec(nil), connector.Config{AuthKind: "oauth", Secrets: secrets, BaseURL: api.URL, TokenURL: tokens.URL})
	_, err := call(t, c, "acme.item.get", `{"id": "1"}`)
	if err == nil || !strings.Contains(err.Error(), "lacks scope") {
		t.Fatalf("%v", err)
	}
	for _, bad := range []string{"at_fresh_from_endpoint_42", "rt_rotated_value_77"} {
		if strings.Contains(err.Error(), bad) {
			t.Errorf("the error shows the token the endpoint issued: %v", err)
		}
	}
}

func TestWriteWithoutKeyIsNeverRetried(t *testing.T) {
	var hits atomic.Int32
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c := open(t, spec(&httpconn.Idempotency{Header: "Idempotency-Key"}), connector.Config{BaseURL: srv.URL})
	// No recorded place in a run: no idempotency key can be derived.
	for _, ctx := range []context.Context{context.Background(), registry.WithCallInfo(context.Background(), registry.CallInfo{Run: "run_1", Index: -1})} {
		hits.Store(0)
		_, err := c.Tools()["acme.payment.create"].Call(ctx, jsontext.Value(`{"amount": 5}`))
		if err == nil || registry.IsDefinite(err) {
			t.Errorf("%v; a write's 503 is outcome-unknown", err)
		}
		if hits.Load() != 1 {
			t.Errorf("%d requests (keys %q); a write sent without an idempotency key is never retried", hits.Load(), keys)
		}
	}
}

func TestHugeRetryAfter(t *testing.T) {
	for _, v := range []string{"9223372037", "99999999999999999999", "-5", "Wed, 21 Oct 2099 07:28:00 GMT", "Wed, 21 Oct 2015 07:28:00 GMT", "1.5", "abc"} {
		var hits atomic.Int32
		var times []time.Time
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			times = append(times, time.Now())
			w.Header().Set("Retry-After", v)
			w.WriteHeader(http.StatusTooManyRequests)
		}))
		c := open(t, spec(nil), connector.Config{BaseURL: srv.URL, Timeout: 5 * time.Second})
		start := time.Now()
		_, err := call(t, c, "acme.item.get", `{"id": "1"}`)
		srv.Close()
		if err == nil || !registry.IsDefinite(err) {
			t.Errorf("%s: %v", v, err)
		}
		// The call is bounded by its timeout (5 s), never by the
		// header; the slack is for a loaded machine.
		if time.Since(start) > 30*time.Second || hits.Load() > httpconn.MaxAttempts {
			t.Errorf("%s: took %v, %d attempts", v, time.Since(start), hits.Load())
		}
		// At least the first backoff's lower bound (0.25 s with jitter),
		// less slack for the clock.
		for i := 1; i < len(times); i++ {
			if d := times[i].Sub(times[i-1]); d < 200*time.Millisecond {
				t.Errorf("Retry-After %q: retried after %v, no wait", v, d)
			}
		}
	}
}

func TestGzipBombIsBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		io.WriteString(zw, `{"id": "`)
		chunk := []byte(strings.Repeat("a", 1<<20))
		for i := 0; i < 64; i++ {
			if _, err := zw.Write(chunk); err != nil {
				return
			}
		}
		io.WriteString(zw, `"}`)
		zw.Close()
	}))
	defer srv.Close()
	c := open(t, spec(nil), connector.Config{BaseURL: srv.URL})
	_, err := call(t, c, "acme.item.get", `{"id": "1"}`)
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("%v; want the size limit", err)
	}
}

func TestHostileAnswersNeverPanic(t *testing.T) {
	bodies := []string{
		`{"id": 1e999999999, "name": -0.0000000000000000000000001e-99999}`,
		"{\"id\": \"\xff\xfe\"}",
		`{"id": "1", "tags": {"label": "x"}}`,
		`{"id": "1", "tags": [1, "x", null, [[]]]}`,
		`null`, `[]`, `"x"`, `123`, `{"id":`, strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat(`}`, 200),
		`{"error": {"code": {"x": 1}, "message": ["m"]}}`,
	}
	for _, b := range bodies {
		for _, status := range []int{200, 400, 500} {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(status)
				io.WriteString(w, b)
			}))
			c := open(t, spec(nil), connector.Config{BaseURL: srv.URL, Timeout: 3 * time.Second})
			call(t, c, "acme.item.get", `{"id": "1"}`)
			_, err := call(t, c, "acme.payment.create", `{"amount": 5}`)
			if status == 500 && registry.IsDefinite(err) {
				t.Errorf("%q %d: %v", b, status, err)
			}
			srv.Close()
		}
	}
}

func TestCookiesAreNotKept(t *testing.T) {
	var cookies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cookies = append(cookies, r.Header.Get("Cookie"))
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1"})
		io.WriteString(w, `{"id": "1"}`)
	}))
	defer srv.Close()
	c := open(t, spec(nil), connector.Config{BaseURL: srv.URL})
	call(t, c, "acme.item.get", `{"id": "1"}`)
	call(t, c, "acme.item.get", `{"id": "1"}`)
	if cookies[1] != "" {
		t.Errorf("a cookie the provider set was sent back: %q", cookies[1])
	}
}

func TestWriteWithoutIdempotencyIsNotRetriedOn429(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, `{"id": "pay_1"}`)
	}))
	defer srv.Close()
	c := open(t, spec(nil), connector.Config{BaseURL: srv.URL})
	_, err := call(t, c, "acme.payment.create", `{"amount": 5}`)
	if err == nil || !registry.IsDefinite(err) || hits.Load() != 1 {
		t.Errorf("%v, %d requests; a write the provider does not make idempotent is sent once, its 429 definite", err, hits.Load())
	}
}

func TestIssuedTokenNotInResult(t *testing.T) {
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token": "at_issued_value_1234", "token_type": "Bearer", "expires_in": 3600}`)
	}))
	defer tokens.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"id": "1", "name": "echo `+r.Header.Get("Authorization")+`", "tags": [{"label": "at_issued_value_1234"}]}`)
	}))
	defer api.Close()
	secrets := map[string]string{"refreshToken": "rt_1_value", "clientId": "cid", "clientSecret": "csecret"}
	c := open(t, spec(nil), connector.Config{AuthKind: "oauth", Secrets: secrets, BaseURL: api.URL, TokenURL: tokens.URL})
	out, err := call(t, c, "acme.item.get", `{"id": "1"}`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "at_issued_value_1234") || !strings.Contains(out, "echo Bearer [redacted]") {
		t.Errorf("result %s: the token the endpoint issued reaches the agent", out)
	}
}

func TestEscapedDotSegmentsRefused(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, `{"id": "1"}`)
	}))
	defer srv.Close()
	c := open(t, spec(nil), connector.Config{BaseURL: srv.URL})
	// Sent as one escaped segment, but a server or proxy that decodes
	// %2F (or reads "\" as "/") before resolving dot segments would route
	// them to another endpoint.
	for _, id := range []string{"x/../../admin", `..\admin`, "a/.", `.\x`, "../payments"} {
		_, err := call(t, c, "acme.item.get", `{"id": `+strings.ReplaceAll(`"`+id+`"`, `\`, `\\`)+`}`)
		if err == nil || !registry.IsDefinite(err) {
			t.Errorf("id %q: %v; want a definite refusal", id, err)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("%d requests sent for refused arguments", hits.Load())
	}
	for _, id := range []string{"a/b c", "..x", "x..", "%2e%2e", "...", "a.b"} {
		if _, err := call(t, c, "acme.item.get", `{"id": "`+id+`"}`); err != nil {
			t.Errorf("id %q: %v", id, err)
		}
	}
}

func TestWriteAnswerWithoutItsResultIsOutcomeUnknown(t *testing.T) {
	sp := spec(nil)
	gql := def("acme.thing.create", true)
	sp.Tools = append(sp.Tools, httpconn.Tool{
		Definition: gql,
		Request:    httpconn.Request{Method: "POST", Path: "/graphql", GraphQL: &httpconn.GraphQL{Query: "mutation { thingCreate { thing { id } } }"}},
		Result:     jsontext.Value(`{"id": "$/thingCreate/thing/id"}`),
	})
	for tool, bodies := range map[string][]string{
		"acme.payment.create": {`{}`, `{"unrelated": 1}`, `null`, ``},
		"acme.thing.create":   {`{"data": null}`, `{}`, `{"errors": {"message": "boom"}, "data": {"thingCreate": {"thing": {"id": "1"}}}}`, `{"data": {"thingCreate": null}}`},
	} {
		for _, b := range bodies {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, b) }))
			c := open(t, sp, connector.Config{BaseURL: srv.URL})
			out, err := call(t, c, tool, `{"amount": 5}`)
			srv.Close()
			if err == nil || registry.IsDefinite(err) {
				t.Errorf("%s answered 200 %q: %s %v; want outcome-unknown, not an empty result", tool, b, out, err)
			}
		}
	}
}

func TestHeaderControlCharactersRefusedBeforeSending(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, `{"id": "1"}`)
	}))
	defer srv.Close()
	sp := spec(nil)
	sp.Tools[1].Request.Headers = map[string]jsontext.Value{"X-Memo": jsontext.Value(`"$/memo"`)}
	c := open(t, sp, connector.Config{BaseURL: srv.URL})
	for _, memo := range []string{`a\u0001b`, `a\u007fb`, `a\u000bb`} {
		_, err := call(t, c, "acme.payment.create", `{"amount": 5, "memo": "`+memo+`"}`)
		if err == nil || !registry.IsDefinite(err) {
			t.Errorf("memo %s: %v; a header Go would refuse is refused before sending (definite)", memo, err)
		}
	}

	// A token endpoint issuing a token that cannot be a header value.
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token": "at_\u0001bad", "token_type": "Bearer", "expires_in": 3600}`)
	}))
	defer tokens.Close()
	secrets := map[string]string{"refreshToken": "rt_1_value", "clientId": "cid", "clientSecret": "csecret"}
	c = open(t, spec(nil), connector.Config{AuthKind: "oauth", Secrets: secrets, BaseURL: srv.URL, TokenURL: tokens.URL})
	if _, err := call(t, c, "acme.payment.create", `{"amount": 5}`); err == nil || !registry.IsDefinite(err) {
		t.Errorf("%v; want a definite refusal", err)
	}
	if hits.Load() != 0 {
		t.Errorf("%d requests sent", hits.Load())
	}
}

// A provider that echoes the token its endpoint issued (and the
// connection's own secret) percent-encoded, as a TypeScript or Python
// server writes it into a URL, or half escaped: neither the error nor the
// result shows any of it.
func TestIssuedTokenEchoedEncodedIsRedacted(t *testing.T) {
	const issued = "at_fresh/from+endpoint=42&x"
	const refresh = "rt 1/value&more"
	forms := func(v string) []string {
		var all, mixed strings.Builder
		for i := 0; i < len(v); i++ {
			c := v[i]
			fmt.Fprintf(&all, "%%%02x", c)
			if i%2 == 0 && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
				mixed.WriteByte(c)
			} else {
				fmt.Fprintf(&mixed, "%%%02X", c)
			}
		}
		return []string{strings.ReplaceAll(url.QueryEscape(v), "+", "%20"), all.String(), mixed.String()}
	}
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token": "`+issued+`", "token_type": "Bearer", "expires_in": 3600}`)
	}))
	defer tokens.Close()
	var sent atomic.Int32
	for i, echo := range append(forms(issued), forms(refresh)...) {
		for _, fail := range []bool{true, false} {
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") == "Bearer "+issued {
					sent.Add(1)
				}
				if fail {
					w.WriteHeader(http.StatusForbidden)
					io.WriteString(w, `{"error": {"code": "forbidden", "message": "callback https://x.example/cb?token=`+echo+` lacks scope"}}`)
					return
				}
				io.WriteString(w, `{"id": "1", "name": "see https://x.example/cb?token=`+echo+`", "tags": []}`)
			}))
			secrets := map[string]string{"refreshToken": refresh, "clientId": "cid", "clientSecret": "csecret"}
			c := open(t, spec(nil), connector.Config{AuthKind: "oauth", Secrets: secrets, BaseURL: api.URL, TokenURL: tokens.URL})
			out, err := call(t, c, "acme.item.get", `{"id": "1"}`)
			api.Close()
			text := out
			if err != nil {
				text = err.Error()
			}
			if fail == (err == nil) || !strings.Contains(text, "[redacted]") || strings.Contains(text, echo) {
				t.Errorf("echo %d (%q), failing %v: %q, %v; want the echo redacted", i, echo, fail, out, err)
			}
		}
	}
	if sent.Load() == 0 {
		t.Fatal("the issued token was never sent")
	}
}
