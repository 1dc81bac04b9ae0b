package serve

import (
	"encoding/json"
	"net/http"
)

// oauthDiscoveryRoutes answers the paths an OAuth-aware MCP client probes
// (MCP authorization: RFC 9728 protected resource metadata, RFC 8414
// authorization server metadata, OpenID Connect discovery, RFC 7591
// dynamic client registration, and the authorize and token endpoints)
// with JSON, never the console's HTML. Where agents do not use OAuth
// (no serve.oidc.agents) they authenticate with the per-run agent token
// the operator issues, and the answer says so; with it, a run's
// protected resource metadata is answered (agentoauth.go) and the other
// paths say where to get a token. Every path under /.well-known/ is
// answered this way.
func (s *Server) oauthDiscoveryRoutes() {
	h := http.HandlerFunc(s.noAgentOAuth)
	s.mux.Handle("/.well-known/", h)
	// RFC 9728, section 3.1: a resource's metadata is at the well-known
	// path inserted before the resource's own path; some clients ask
	// below the resource instead.
	s.mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp/runs/{run}", s.resourceMetadata)
	s.mux.HandleFunc("GET /mcp/runs/{run}/.well-known/oauth-protected-resource", s.resourceMetadata)
	s.mux.Handle("/mcp/runs/{run}/.well-known/", h)
	for _, p := range []string{"/register", "/authorize", "/token", "/oauth/register", "/oauth/authorize", "/oauth/token"} {
		s.mux.Handle(p, h)
	}
}

// noAgentOAuthMessage is what an OAuth discovery or endpoint path answers.
const noAgentOAuthMessage = "this server does not authorize agents with OAuth: an agent authenticates with the agent token of its run, " +
	"which the operator issues (POST /api/v1/runs/RUN/agent-token, or `openplaybook agent-token RUN`); " +
	"send it as Authorization: Bearer <token> to the run's MCP URL (docs/serve.md, \"Agent tokens\")"

func (s *Server) noAgentOAuth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNotFound)
	msg := noAgentOAuthMessage
	if s.agentOAuth() {
		msg = "this server is an OAuth protected resource, not an authorization server: get an access token from " + s.oidc.cfg.Issuer +
			" for the run's MCP URL (the resource named by its metadata, /.well-known/oauth-protected-resource/mcp/runs/RUN), " +
			"or use the run's agent token, which the operator issues (docs/serve.md)"
	}
	// error and error_description as OAuth error responses have them
	// (RFC 6749, section 5.2), which an OAuth client shows.
	_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_request", "error_description": msg})
}
