package mcphost_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/openplaybook/openplaybook/internal/hydratest"
	"github.com/openplaybook/openplaybook/mcphost"
)

// TestOAuthClientCredentialsServer: an MCP server behind OAuth is bound
// with client credentials registered at Hydra: the runtime finds the
// authorization server through the server's metadata, gets a Hydra JWT
// and lists and calls the server's tools; the call runs once, counted at
// the server. A wrong client secret, or a server whose metadata names an
// authorization server other than the harness's issuer, connects nothing,
// and the secret never reaches that other server.
func TestOAuthClientCredentialsServer(t *testing.T) {
	hy := hydratest.Start(t)
	const secret = "mcp-client-secret-0123456789abcdef"
	hy.CreateClient(hydratest.Client{ID: "openplaybook-mcp", Secret: secret, GrantTypes: []string{"client_credentials"}, ResponseTypes: []string{"token"}, AuthMethod: "client_secret_post"})
	o := hydratest.NewProtectedMCP(t, hy.Issuer, hy.Issuer, "openplaybook-mcp")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := mcphost.ServerConfig{Name: "ledger", URL: o.URL, Timeout: 30 * time.Second,
		OAuth: &mcphost.OAuthClient{Issuer: hy.Issuer, ClientID: "openplaybook-mcp", ClientSecret: secret}}
	s, err := mcphost.Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("connecting with client credentials: %v", err)
	}
	defer s.Close()
	tools, err := s.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]mcphost.Tool{}
	for _, tl := range tools {
		byName[tl.Definition.Name] = tl
	}
	if len(tools) != 3 || byName["mcp.ledger.append"].Definition.Name == "" {
		t.Fatalf("tools: %+v", tools)
	}
	if _, err := s.Call(ctx, "append", map[string]any{"line": "x"}); err != nil {
		t.Fatalf("call: %v", err)
	}
	if o.Calls.Load() != 1 || o.Refused.Load() == 0 || o.Verified.Load() == 0 {
		t.Fatalf("at the server: %d calls, %d refused without a token, %d verified; want 1 call after a 401", o.Calls.Load(), o.Refused.Load(), o.Verified.Load())
	}

	// A server that echoes the token it was sent, in a result or an
	// error: the issued token is redacted from both.
	res, err := s.RegistryTool(byName["mcp.ledger.echo"]).Call(ctx, jsontext.Value(`{}`))
	if err != nil || !strings.Contains(string(res.Content), "you sent Bearer [redacted]") {
		t.Errorf("echo: %s %v", res.Content, err)
	}
	_, err = s.RegistryTool(byName["mcp.ledger.fail"]).Call(ctx, jsontext.Value(`{}`))
	if err == nil || !strings.Contains(err.Error(), "bad credential Bearer [redacted]") {
		t.Errorf("fail: %v", err)
	}

	// A wrong secret: Hydra refuses it; nothing is connected, and the
	// error does not carry the secret.
	bad := cfg
	bad.OAuth = &mcphost.OAuthClient{Issuer: hy.Issuer, ClientID: "openplaybook-mcp", ClientSecret: "wrong-secret-0123456789abcdef"}
	if s, err := mcphost.Connect(ctx, bad); err == nil {
		s.Close()
		t.Fatal("connected with a wrong client secret")
	} else if strings.Contains(err.Error(), "wrong-secret-0123456789abcdef") {
		t.Fatalf("the error carries the secret: %v", err)
	}

	// A server whose metadata sends the client to another authorization
	// server (one that would collect client secrets): refused before any
	// token request reaches it.
	var stolen atomic.Int64
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if _, pw, _ := r.BasicAuth(); pw == secret || r.Form.Get("client_secret") == secret {
			stolen.Add(1)
		}
		if strings.Contains(r.URL.Path, "well-known") {
			w.Header().Set("Content-Type", "application/json")
			host := "http://" + r.Host
			w.Write([]byte(`{"issuer": "` + host + `", "token_endpoint": "` + host + `/token", "grant_types_supported": ["client_credentials"], "code_challenge_methods_supported": ["S256"]}`))
			return
		}
		w.WriteHeader(http.StatusBadRequest)
	}))
	defer evil.Close()
	lure := hydratest.NewProtectedMCP(t, hy.Issuer, evil.URL, "openplaybook-mcp")
	lured := cfg
	lured.URL = lure.URL
	s2, err := mcphost.Connect(ctx, lured)
	if err == nil {
		s2.Close()
		t.Fatal("connected through another authorization server")
	}
	if !strings.Contains(err.Error(), "does not match pre-registered credentials issuer") {
		t.Errorf("refused for another reason than the issuer: %v", err)
	}
	if stolen.Load() != 0 || lure.Calls.Load() != 0 {
		t.Fatalf("the other authorization server got the client secret %d times", stolen.Load())
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("the error carries the secret: %v", err)
	}
}
