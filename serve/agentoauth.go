package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/openplaybook/openplaybook/store"
)

// Agents over OAuth (MCP authorization, 2025-11-25): with
// serve.oidc.agents set, each run's MCP URL is an OAuth 2.1 protected
// resource. Its RFC 9728 metadata names serve.oidc.issuer as the
// authorization server; a 401 points at it (WWW-Authenticate: Bearer
// resource_metadata="..."); and a JWT access token of the issuer whose
// "aud" holds the run's MCP URL is accepted, its serve.oidc.agents.claim
// naming the agent. The first use of such a token records it as an agent
// token of the run (agent.token-issued, by "oauth:" and its subject),
// expiring with it: revocation, session ownership and the re-check before
// a held call then work as for agent tokens.

// agentOAuth reports whether agents may use OAuth access tokens.
func (s *Server) agentOAuth() bool { return s.oidc != nil && s.oidc.cfg.AgentClaim != "" }

// resourceMetadataURL is the RFC 9728 metadata URL of run's MCP URL.
func (s *Server) resourceMetadataURL(run string) string {
	return s.opt.BaseURL + "/.well-known/oauth-protected-resource" + strings.TrimPrefix(s.MCPURL(run), s.opt.BaseURL)
}

// challenge is the WWW-Authenticate value of a 401 at run's MCP URL;
// invalid is true when a token was sent and refused (RFC 6750, 3.1).
func (s *Server) challenge(run string, invalid bool) string {
	v := `Bearer realm="openplaybook"`
	if s.agentOAuth() {
		v = `Bearer resource_metadata="` + s.resourceMetadataURL(run) + `"`
	}
	if invalid {
		v += `, error="invalid_token"`
	}
	return v
}

// resourceMetadata answers RFC 9728 protected resource metadata for a
// run's MCP URL; where agents do not use OAuth, the JSON error saying to
// ask the operator for an agent token.
func (s *Server) resourceMetadata(w http.ResponseWriter, r *http.Request) {
	if !s.agentOAuth() {
		s.noAgentOAuth(w, r)
		return
	}
	run := r.PathValue("run")
	w.Header().Set("Content-Type", "application/json")
	if _, err := s.st.GetRun(r.Context(), run); err != nil {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_request", "error_description": "there is no run " + run})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"resource":                 s.MCPURL(run),
		"authorization_servers":    []string{s.oidc.cfg.Issuer},
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "openplaybook run " + run,
	})
}

// looksJWT reports whether tok has a JWT's three dot-separated parts
// (agent tokens are "opa_..." with none).
func looksJWT(tok string) bool { return strings.Count(tok, ".") == 2 }

// agentFromJWT verifies raw as an agent's OAuth access token for run and
// returns the agent token record that stands for it, recording it on
// first use (expiring with the token, at most serve's agent token
// lifetime later). It refuses (an error) a token that is not the issuer's
// (signature from its JWKS, asymmetric algorithms only, iss), expired,
// whose "aud" does not hold the run's MCP URL, whose agent claim is
// not one of the run's agents, or issued before a revocation of that
// agent's tokens of the run.
func (s *Server) agentFromJWT(ctx context.Context, run, raw string) (store.AgentToken, error) {
	p, err := s.oidc.discover(ctx)
	if err != nil {
		return store.AgentToken{}, err
	}
	tok, err := p.Verifier(&oidc.Config{ClientID: s.MCPURL(run)}).Verify(ctx, raw)
	if err != nil {
		return store.AgentToken{}, err
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return store.AgentToken{}, err
	}
	agent, _ := claims[s.oidc.cfg.AgentClaim].(string)
	if agent == "" {
		return store.AgentToken{}, fmt.Errorf("the token has no %q claim (serve.oidc.agents.claim) naming an agent", s.oidc.cfg.AgentClaim)
	}
	r, err := s.st.GetRun(ctx, run)
	if err != nil {
		return store.AgentToken{}, err
	}
	if r.Status.Ended() {
		return store.AgentToken{}, ErrBadAgentToken
	}
	if err := runHasAgent(r, agent); err != nil {
		return store.AgentToken{}, err
	}
	if err := issuedAfterRevocations(ctx, s.st, run, agent, tok.IssuedAt); err != nil {
		return store.AgentToken{}, err
	}
	by := "oauth:" + tok.Subject
	// It expires with the token, and no later than an issued agent
	// token would.
	expires := tok.Expiry.UTC().Truncate(time.Second)
	if limit := time.Now().Add(s.opt.AgentTokenTTL).UTC(); expires.After(limit) {
		expires = limit
	}
	rec, err := s.recordAgentToken(ctx, run, agent, hashHex(raw), by, expires)
	if err != nil {
		// Another request with the same token recorded it first.
		if again, err2 := AgentToken(ctx, s.st, run, raw); err2 == nil {
			return again, nil
		}
		return store.AgentToken{}, err
	}
	return rec, tokenUsable(ctx, s.st, rec, run)
}

// issuedAfterRevocations refuses an access token for agent of run that
// was issued (its "iat", whole seconds) no later than a revocation of one
// of that agent's tokens of the run: revoking ends the tokens the issuer
// had given the agent by then, those not yet sent included. A token with
// no "iat" is refused once there has been one.
func issuedAfterRevocations(ctx context.Context, st store.Store, run, agent string, iat time.Time) error {
	toks, err := st.AgentTokens(ctx, run)
	if err != nil {
		return err
	}
	for _, t := range toks {
		if t.Agent == agent && !t.Revoked.IsZero() && !iat.After(t.Revoked) {
			return fmt.Errorf("the token was issued (%s) before agent %s's tokens of run %s were revoked (%s)", iat.UTC().Format(time.RFC3339), agent, run, t.Revoked.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// agentBearer checks the bearer token of a request to run's MCP URL: an
// agent token, or (with serve.oidc.agents) an OAuth access token.
func (s *Server) agentBearer(ctx context.Context, run, tok string) (store.AgentToken, error) {
	rec, err := AgentToken(ctx, s.st, run, tok)
	if err == nil || !errors.Is(err, ErrBadAgentToken) || !s.agentOAuth() || !looksJWT(tok) || rec.ID != "" {
		return rec, err
	}
	rec, jerr := s.agentFromJWT(ctx, run, tok)
	if jerr != nil {
		s.logf("agent OAuth token for run %s refused: %s", run, s.redact(jerr.Error()))
		return store.AgentToken{}, ErrBadAgentToken
	}
	return rec, nil
}
