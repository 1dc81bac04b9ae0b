package serve_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/internal/hydratest"
	"github.com/openplaybook/openplaybook/serve"
)

// mcpStatus POSTs an MCP initialize to u with bearer tok and returns the
// response's status and WWW-Authenticate.
func mcpStatus(t *testing.T, u, tok string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}`
	req, _ := http.NewRequest("POST", u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode, res.Header.Get("WWW-Authenticate")
}

// TestAgentOAuthAtTheGateway: with serve.oidc.agents, a run's MCP URL is
// an OAuth protected resource. Without a token the 401 points at its RFC
// 9728 metadata, which names Hydra; a Hydra client-credentials token for
// that URL, its client_id an agent of the run, connects a go-sdk MCP
// client and is recorded as the run's agent token (by oauth:outside).
// Refused: a token for another run's URL, for another audience, from a
// client that is not an agent of the run, expired, of another issuer,
// alg none, and signed by a key not in the issuer's JWKS. The run's own
// agent tokens keep working.
func TestAgentOAuthAtTheGateway(t *testing.T) {
	ir, run := oauthAgentRun(t)
	ctx := context.Background()
	other, _, err := ir.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatal(err)
	}
	mcpURL := ir.srv.MCPURL(run)

	// Discovery: the 401 and the metadata.
	status, challenge := mcpStatus(t, mcpURL, "")
	meta := ir.ts.URL + "/.well-known/oauth-protected-resource/mcp/runs/" + run
	if status != 401 || challenge != `Bearer resource_metadata="`+meta+`"` {
		t.Fatalf("no token: %d, WWW-Authenticate %q", status, challenge)
	}
	for _, u := range []string{meta, mcpURL + "/.well-known/oauth-protected-resource"} {
		res, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
		}
		err = json.NewDecoder(res.Body).Decode(&m)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 || m.Resource != mcpURL || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != ir.hy.Issuer {
			t.Fatalf("GET %s: %d %+v %v", u, res.StatusCode, m, err)
		}
	}

	// Hydra clients: the run's agent "outside", and "stranger", which is no
	// agent of the run. Their audience allows every run's MCP URL.
	runs := ir.ts.URL + "/mcp/runs"
	for _, id := range []string{"outside", "stranger"} {
		ir.hy.CreateClient(hydratest.Client{ID: id, Secret: id + "-secret-0123456789abcdef", GrantTypes: []string{"client_credentials"},
			AuthMethod: "client_secret_post", Audience: []string{runs, "another-api"}})
	}
	cc := func(id, audience string) string {
		t.Helper()
		tok, code := ir.hy.Token(url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {id + "-secret-0123456789abcdef"}, "audience": {audience}})
		if code != 200 || tok.AccessToken == "" {
			t.Fatalf("client credentials of %s for %s: %d", id, audience, code)
		}
		return tok.AccessToken
	}
	good := cc("outside", mcpURL)
	a := ir.connect(mcpURL, good)
	a.tools(t, "customer__get", "note__add", serve.FinishTool)
	// The MCP inspector's CLI, a real OAuth-aware client, with a token of
	// its own.
	v, code := newInspector(t, mcpURL, cc("outside", mcpURL)).run("--method", "tools/list")
	if got := toolNames(v); code != 0 || !slices.Contains(got, "note__add") {
		t.Fatalf("inspector tools/list with a Hydra token: exit %d, tools %v (%v)", code, got, v)
	}
	toks, err := ir.st.AgentTokens(ctx, run)
	if err != nil || len(toks) != 2 || toks[0].Agent != "outside" || toks[0].CreatedBy != "oauth:outside" {
		t.Fatalf("agent tokens of the run after the OAuth agent connected: %+v, %v", toks, err)
	}

	refused := map[string]string{
		"another run's URL":   cc("outside", ir.srv.MCPURL(other)),
		"another audience":    cc("outside", "another-api"),
		"not an agent of run": cc("stranger", mcpURL),
	}
	key := hydratest.NewKey(t)
	ir.hy.AddSigningKey(key, "agent-key")
	now := time.Now()
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{"iss": ir.hy.Issuer, "sub": "outside", "client_id": "outside", "aud": []string{mcpURL},
			"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	if status, _ := mcpStatus(t, mcpURL, hydratest.SignJWT(t, key, "agent-key", claims(nil))); status != 200 {
		t.Fatalf("a token signed by a key in the JWKS, with valid claims: %d (the refusals below would prove nothing)", status)
	}
	refused["expired"] = hydratest.SignJWT(t, key, "agent-key", claims(func(c map[string]any) {
		c["iat"], c["exp"] = now.Add(-time.Hour).Unix(), now.Add(-30*time.Minute).Unix()
	}))
	refused["another issuer"] = hydratest.SignJWT(t, key, "agent-key", claims(func(c map[string]any) { c["iss"] = "https://evil.example" }))
	refused["a key not in the JWKS"] = hydratest.SignJWT(t, hydratest.NewKey(t), "agent-key", claims(nil))
	refused["alg none"] = algNone(claims(nil))
	for name, tok := range refused {
		status, challenge := mcpStatus(t, mcpURL, tok)
		if status != 401 || !strings.Contains(challenge, `resource_metadata="`+meta+`"`) || !strings.Contains(challenge, `error="invalid_token"`) {
			t.Errorf("%s: %d, WWW-Authenticate %q; want 401 pointing at the metadata", name, status, challenge)
		}
	}
	if toks, _ := ir.st.AgentTokens(ctx, run); len(toks) != 3 {
		t.Errorf("the run has %d agent tokens; want the three valid OAuth ones only", len(toks))
	}

	issued, err := ir.srv.IssueAgentToken(ctx, run, "outside", "tester")
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := mcpStatus(t, mcpURL, issued.Token); status != 200 {
		t.Fatalf("the run's own agent token: %d", status)
	}
}

// oauthAgentRun starts an identity rig whose agents use OAuth
// (serve.oidc.agents, claim client_id) and a run that waits for its agent.
func oauthAgentRun(t *testing.T) (*identityRig, string) {
	t.Helper()
	ir := newIdentityRig(t, "    agents: {claim: client_id}\n")
	run, ds, err := ir.srv.CreateRun(context.Background(), "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatal(err, ds)
	}
	ir.waitStatus(run, "waiting", "agent")
	return ir, run
}

// algNone is an unsigned JWT (RFC 7519, section 6) of claims.
func algNone(claims map[string]any) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]string{"alg": "none", "typ": "JWT"}) + "." + enc(claims) + "."
}

// TestAgentOAuthRevokedBeforeUse: an OAuth agent holds two access tokens
// of the issuer for the run, uses one, and the operator revokes the run's
// agent tokens. Neither is accepted afterwards: the one never sent
// before the revocation was issued before it, and is refused as the used
// one is. A token issued after the revocation is accepted (cutting the
// client off for good is the issuer's to do).
func TestAgentOAuthRevokedBeforeUse(t *testing.T) {
	ir, run := oauthAgentRun(t)
	ctx := context.Background()
	mcpURL := ir.srv.MCPURL(run)
	key := hydratest.NewKey(t)
	ir.hy.AddSigningKey(key, "agent-key")
	mint := func(iat time.Time, jti string) string {
		return hydratest.SignJWT(t, key, "agent-key", map[string]any{"iss": ir.hy.Issuer, "sub": "outside", "client_id": "outside", "aud": []string{mcpURL},
			"iat": iat.Unix(), "exp": iat.Add(10 * time.Minute).Unix(), "jti": jti})
	}
	before := time.Now().Add(-2 * time.Second)
	used, held := mint(before, "used"), mint(before, "held")
	if status, _ := mcpStatus(t, mcpURL, used); status != 200 {
		t.Fatalf("the first token before the revocation: %d", status)
	}
	if n, err := ir.srv.RevokeAgentTokens(ctx, run, "", "operator"); err != nil || n != 1 {
		t.Fatalf("revoking: %d, %v", n, err)
	}
	for name, tok := range map[string]string{"used": used, "held": held} {
		if status, _ := mcpStatus(t, mcpURL, tok); status != 401 {
			t.Errorf("the %s token, issued before the revocation, after it: %d; want 401", name, status)
		}
	}
	if status, _ := mcpStatus(t, mcpURL, mint(time.Now().Add(2*time.Second), "after")); status != 200 {
		t.Errorf("a token issued after the revocation: %d; want 200", status)
	}
}
