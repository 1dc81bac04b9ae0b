package harness

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestSecretBindingImplied(t *testing.T) {
	// No declare section: each secret used by one destination only is
	// bound to it, as harness files were written before secrets.declare.
	h, ds := Parse("h.yaml", []byte(`mcpServers:
  acme:
    url: https://mcp.example.com/mcp
    headers: {Authorization: "Bearer ${secret:ACME_TOKEN}"}
  gh:
    command: x
    args: ["--token=${secret:GH_TOKEN}"]
    env: {GITHUB_TOKEN: "${secret:GH_TOKEN}"}
connections:
  stripe: {authKind: api_token, secrets: {apiKey: STRIPE_API_KEY}}
agents:
  rita: {driver: openai, apiKeySecret: OPENAI_API_KEY}
`), "/h")
	expect(t, ds)
	for what, got := range map[string][]string{
		"acme": h.MCPServers["acme"].BoundSecrets, "gh": h.MCPServers["gh"].BoundSecrets,
		"stripe": h.Connections["stripe"].BoundSecrets, "rita": h.Agents["rita"].BoundSecrets,
	} {
		want := map[string][]string{"acme": {"ACME_TOKEN"}, "gh": {"GH_TOKEN"}, "stripe": {"STRIPE_API_KEY"}, "rita": {"OPENAI_API_KEY"}}[what]
		if !slices.Equal(got, want) {
			t.Errorf("%s: BoundSecrets = %q, want %q", what, got, want)
		}
	}
}

// A secret that one destination uses is not handed to another one by
// adding a reference: the file must say so.
func TestSecretBindingSharedNeedsDeclaration(t *testing.T) {
	_, ds := Parse("h.yaml", []byte(`connections:
  stripe: {authKind: api_token, secrets: {apiKey: STRIPE_API_KEY}}
mcpServers:
  evil:
    command: x
    args: ["--key=${secret:STRIPE_API_KEY}"]
`), "/h")
	const msg = `secret "STRIPE_API_KEY" is used by connection "stripe" and MCP server "evil"; a secret goes to one destination unless the harness binds it to more: add under "secrets": declare: {STRIPE_API_KEY: {mcpServers: [evil], connections: [stripe]}}`
	expect(t, ds,
		problem{2, 51, "/connections/stripe/secrets/apiKey", RuleSecretBinding, msg},
		problem{6, 12, "/mcpServers/evil/args/0", RuleSecretBinding, msg},
	)
}

func TestSecretBindingDeclared(t *testing.T) {
	src := `mcpServers:
  acme:
    url: https://mcp.example.com/mcp
    headers: {Authorization: "Bearer ${secret:ACME_TOKEN}"}
  evil:
    command: x
    env: {K: "${secret:STRIPE_API_KEY}", U: "${secret:UNDECLARED}"}
connections:
  stripe: {authKind: api_token, secrets: {apiKey: STRIPE_API_KEY}}
secrets:
  declare:
    STRIPE_API_KEY: {connections: [stripe]}
    ACME_TOKEN: {mcpServers: [acme, acmee]}
    EMPTY: {}
`
	h, ds := Parse("h.yaml", []byte(src), "/h")
	expect(t, ds,
		problem{7, 14, "/mcpServers/evil/env/K", RuleSecretBinding,
			`secret "STRIPE_API_KEY" is not bound to MCP server "evil"; it is declared (line 12) for connection "stripe" only: to let MCP server "evil" use it, add mcpServers: [evil] to its declaration`},
		problem{7, 45, "/mcpServers/evil/env/U", RuleSecretBinding,
			`secret "UNDECLARED" is not declared; with a "declare" section under "secrets", every secret the file uses is declared with the destinations that may use it: add UNDECLARED: {mcpServers: [evil]} there`},
		problem{13, 37, "/secrets/declare/ACME_TOKEN/mcpServers/1", RuleSecretBinding,
			`secret "ACME_TOKEN" is declared for MCP server "acmee", which the harness does not have (did you mean "acme"?)`},
		problem{14, 12, "/secrets/declare/EMPTY", RuleValue, `binds it to nothing`},
	)
	if got := h.MCPServers["evil"].BoundSecrets; len(got) != 0 {
		t.Errorf("evil: BoundSecrets = %q", got)
	}
	if got := h.MCPServers["acme"].BoundSecrets; !slices.Equal(got, []string{"ACME_TOKEN"}) {
		t.Errorf("acme: BoundSecrets = %q", got)
	}

	// Expand fails closed on the server the file did not bind the
	// secret to, and never looks the secret up.
	looked := map[string]bool{}
	sec := NewSecrets(nil, &SecretsOptions{LookupEnv: func(k string) (string, bool) { looked[k] = true; return valEnv, true }})
	_, err := h.MCPServers["evil"].Expand(sec)
	var be *BindingError
	if !errors.As(err, &be) || be.Name == "" || be.For != "mcp:evil" {
		t.Fatalf("evil: Expand = %v, want a *BindingError", err)
	}
	if strings.Contains(err.Error(), valEnv) || looked["STRIPE_API_KEY"] || looked["UNDECLARED"] {
		t.Errorf("evil: secret looked up or printed: %v, %v", err, looked)
	}
	if acme, err := h.MCPServers["acme"].Expand(sec); err != nil || acme.Headers["Authorization"] != "Bearer "+valEnv {
		t.Errorf("acme: %v", err)
	}
	if v, err := h.Connections["stripe"].Resolve(sec, "apiKey"); err != nil || v != valEnv {
		t.Errorf("stripe: Resolve = %v", err)
	}
}

// A binding built by hand, not read by Parse, binds nothing: Expand and
// Resolve refuse every secret.
func TestSecretBindingFailsClosed(t *testing.T) {
	sec := NewSecrets(nil, fakeOpts(map[string]string{"T": valEnv}, nil))
	s := &MCPServer{Name: "m", Command: "x", Args: []string{"${secret:T}"}}
	if _, err := s.Expand(sec); err == nil || err.Error() != `argument 1 of MCP server "m": harness: secret "T" is not bound to MCP server "m" (see secrets.declare in the harness file)` {
		t.Errorf("Expand = %v", err)
	}
	s.BoundSecrets = []string{"T"}
	if out, err := s.Expand(sec); err != nil || out.Args[0] != valEnv {
		t.Errorf("Expand with the binding = %v", err)
	}
	c := &Connection{Provider: "stripe", Secrets: map[string]string{"apiKey": "T"}}
	var be *BindingError
	if _, err := c.Resolve(sec, "apiKey"); !errors.As(err, &be) {
		t.Errorf("Resolve = %v", err)
	}
	if _, err := c.Resolve(sec, "accessToken"); err == nil {
		t.Errorf("Resolve of an unbound role: no error")
	}
}
