package serve_test

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"testing"
)

// TestOAuthDiscoveryAnswersJSON: every path an OAuth-aware MCP client
// probes (the MCP inspector asks for protected resource metadata, then
// authorization server metadata, then registers a client) is answered
// with a JSON OAuth error saying to ask the operator for an agent token,
// never the console's HTML page.
func TestOAuthDiscoveryAnswersJSON(t *testing.T) {
	r := newRig(t, "")
	paths := []struct{ method, path string }{
		{"GET", "/.well-known/oauth-protected-resource"},
		{"GET", "/.well-known/oauth-protected-resource/mcp/runs/run_0123456789abcdef"},
		{"GET", "/mcp/runs/run_0123456789abcdef/.well-known/oauth-protected-resource"},
		{"GET", "/.well-known/oauth-authorization-server"},
		{"GET", "/.well-known/oauth-authorization-server/mcp/runs/run_0123456789abcdef"},
		{"GET", "/.well-known/openid-configuration"},
		{"GET", "/mcp/runs/run_0123456789abcdef/.well-known/openid-configuration"},
		{"POST", "/register"},
		{"GET", "/authorize"},
		{"POST", "/token"},
	}
	for _, p := range paths {
		req, _ := http.NewRequest(p.method, r.ts.URL+p.path, strings.NewReader(`{"redirect_uris": ["http://127.0.0.1:6274/oauth/callback"]}`))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
		var e struct {
			Error            string `json:"error"`
			ErrorDescription string `json:"error_description"`
		}
		if res.StatusCode != http.StatusNotFound || mt != "application/json" || json.Unmarshal(body, &e) != nil ||
			e.Error == "" || !strings.Contains(e.ErrorDescription, "agent token") || strings.Contains(string(body), "<!DOCTYPE") {
			t.Errorf("%s %s: %d %s: %s", p.method, p.path, res.StatusCode, mt, body)
		}
	}
}
