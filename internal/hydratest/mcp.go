package hydratest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// ProtectedMCP is a streamable HTTP MCP server (go-sdk) that is an OAuth
// protected resource per the MCP authorization spec: its protected
// resource metadata (RFC 9728) names an authorization server, and every
// request needs a JWT access token that the issuer's keys verify, issued
// to the client it was made for. Its tool "append" counts the calls that
// ran; "echo" and "fail" quote the Authorization header they were sent.
type ProtectedMCP struct {
	// URL is the MCP endpoint.
	URL string
	// Calls counts the tool calls that ran; Refused the requests that came
	// without a token; Verified the tokens accepted.
	Calls, Refused, Verified atomic.Int64
}

// NewProtectedMCP starts the server for t: tokens are verified against
// issuer (OpenID discovery, JWKS) and must carry client_id clientID; the
// metadata names authServer (the issuer, or another to lure a client).
func NewProtectedMCP(t testing.TB, issuer, authServer, clientID string) *ProtectedMCP {
	t.Helper()
	o := &ProtectedMCP{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "append", Description: "Appends a line.", InputSchema: json.RawMessage(`{"type":"object","properties":{"line":{"type":"string"}}}`)}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		o.Calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "appended"}}}, nil, nil
	})
	// echo answers with the token it was sent, fail fails with it: a
	// server that leaks what it got.
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes the request's credential.", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you sent " + req.Extra.Header.Get("Authorization")}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Fails, quoting the request's credential.", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New("bad credential " + req.Extra.Header.Get("Authorization"))
	})
	provider, err := oidc.NewProvider(context.Background(), issuer)
	if err != nil {
		t.Fatal(err)
	}
	verifier := provider.Verifier(&oidc.Config{SkipClientIDCheck: true})
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		tok, err := verifier.Verify(ctx, token)
		if err != nil {
			return nil, auth.ErrInvalidToken
		}
		var claims struct {
			ClientID string `json:"client_id"`
		}
		if tok.Claims(&claims) != nil || claims.ClientID != clientID {
			return nil, auth.ErrInvalidToken
		}
		o.Verified.Add(1)
		return &auth.TokenInfo{Expiration: tok.Expiry, UserID: tok.Subject}, nil
	}
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	o.URL = ts.URL + "/mcp"
	prm := "/.well-known/oauth-protected-resource/mcp"
	mux.Handle(prm, auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: o.URL, AuthorizationServers: []string{authServer}}))
	protected := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: ts.URL + prm})(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			o.Refused.Add(1)
		}
		protected.ServeHTTP(w, r)
	}))
	return o
}
