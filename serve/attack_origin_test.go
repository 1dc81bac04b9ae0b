package serve_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestAttackHostAndOrigin: DNS rebinding and cross-origin requests to
// every part of the server (API, console, MCP) are refused before
// anything is done, whatever credentials they carry.
func TestAttackHostAndOrigin(t *testing.T) {
	r := newRig(t, "")
	_, tok, _ := startAgentRun(t, r)
	u, _ := url.Parse(r.ts.URL)
	port := u.Port()
	hosts := []string{"evil.example", "evil.example:" + port, "localhost.evil.example:" + port, "127.0.0.1.nip.io:" + port,
		"LOCALHOST:" + port, "localhost.:" + port, "0x7f000001:" + port, "127.1:" + port, "[::ffff:7f00:1]x:" + port, ""}
	origins := []string{"http://evil.example", "null", "http://localhost:" + port + ".evil.example", "http://127.0.0.1:1",
		"https://127.0.0.1:" + port, "http://localhost.:" + port, "http://127.0.0.1:" + port + "@evil.example", "file://", "http://[::1]:1"}
	targets := []struct{ method, path, auth, body string }{
		{"GET", "/api/v1/runs", "Bearer " + operatorToken, ""},
		{"POST", "/api/v1/runs", "Bearer " + operatorToken, `{"document":{}}`},
		{"GET", "/", "Bearer " + operatorToken, ""},
		{"POST", "/login", "", "token=" + operatorToken},
		{"POST", "/mcp/runs/" + tok.ID, "Bearer " + tok.Token, initBody},
	}
	_, tokPath, _ := strings.Cut(tok.MCPURL, r.ts.URL)
	targets[4].path = tokPath
	do := func(method, path, auth, body, host, origin string) int {
		req, _ := http.NewRequest(method, r.ts.URL+path, strings.NewReader(body))
		if host != "-" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if strings.HasPrefix(body, "{") {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
		} else if body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tg := range targets {
		for _, h := range hosts {
			if h == "" {
				continue // net/http sends the URL's host
			}
			if code := do(tg.method, tg.path, tg.auth, tg.body, h, ""); code != http.StatusForbidden && code != http.StatusBadRequest {
				t.Errorf("BROKEN: %s %s with Host %q: %d, want 403", tg.method, tg.path, h, code)
			}
		}
		for _, o := range origins {
			if code := do(tg.method, tg.path, tg.auth, tg.body, "-", o); code != http.StatusForbidden {
				t.Errorf("BROKEN: %s %s with Origin %q: %d, want 403", tg.method, tg.path, o, code)
			}
		}
	}
	// The same loopback server under its other name is the same origin.
	if code := do("GET", "/api/v1/runs", "Bearer "+operatorToken, "", "localhost:"+port, "http://localhost:"+port); code != http.StatusOK {
		t.Errorf("localhost alias: %d", code)
	}
}

// TestAttackOperatorAuth: what is not exactly the operator's bearer
// token or a live session with its own CSRF token is refused; a cookie
// request that also carries some other Authorization is refused (fail
// closed), and an agent token is no operator token.
func TestAttackOperatorAuth(t *testing.T) {
	r := newRig(t, "")
	run, tok, _ := startAgentRun(t, r)
	b1 := r.browser()
	b1.login()
	b2 := r.browser()
	b2.login()
	cancel := "/api/v1/runs/" + run + "/cancel"
	try := func(b *browser, auth, csrf string) int {
		req, _ := http.NewRequest(http.MethodPost, r.ts.URL+cancel, strings.NewReader(`{"reason":"attack"}`))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if csrf != "" {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		c := http.DefaultClient
		if b != nil {
			c = b.c
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, code := range map[string]int{
		"lower-case scheme":            try(nil, "bearer "+operatorToken, ""),
		"token prefix":                 try(nil, "Bearer "+operatorToken[:len(operatorToken)-1], ""),
		"two blanks":                   try(nil, "Bearer  "+operatorToken, ""),
		"agent token":                  try(nil, "Bearer "+tok.Token, ""),
		"basic":                        try(nil, "Basic b3A6"+operatorToken, ""),
		"cookie and the other's CSRF":  try(b1, "", b2.csrf),
		"cookie, no CSRF":              try(b1, "", ""),
		"cookie, agent token as auth":  try(b1, "Bearer "+tok.Token, b1.csrf),
		"cookie, empty bearer":         try(b1, "Bearer ", b1.csrf),
		"cookie, CSRF as bearer token": try(b1, "Bearer "+b1.csrf, ""),
	} {
		if code != http.StatusUnauthorized && code != http.StatusForbidden {
			t.Errorf("BROKEN: %s: %d, want 401 or 403", name, code)
		}
	}
	if got, _ := r.st.GetRun(t.Context(), run); got.Status.Ended() {
		t.Fatalf("BROKEN: the run was cancelled by a refused request")
	}
}
