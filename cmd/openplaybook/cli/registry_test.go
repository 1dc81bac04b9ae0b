package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/host"
)

// TestRegistryListsEveryProvider holds `openplaybook registry --format
// json` to its contract (docs/connectors.md): every provider of the spec,
// each with at least 4 tools, 2 reads and a write, its auth kinds and
// secret roles, and a page in docs/connectors/.
func TestRegistryListsEveryProvider(t *testing.T) {
	code, out, errOut := run(t, nil, "registry", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var cat host.Catalog
	if err := json.Unmarshal([]byte(out), &cat, json.RejectUnknownMembers(true)); err != nil {
		t.Fatalf("the listing is not the documented contract: %v", err)
	}
	if cat.MCPServers != nil {
		t.Errorf("mcpServers is listed without --harness")
	}
	if len(cat.Builtins) == 0 {
		t.Errorf("no built-ins")
	}
	var names []string
	for _, p := range cat.Providers {
		names = append(names, p.Provider)
		reads, writes := 0, 0
		for _, d := range p.Tools {
			if d.ConnectorType != p.Provider || d.Source != "connector" {
				t.Errorf("%s: tool %s has source %q, connectorType %q", p.Provider, d.Name, d.Source, d.ConnectorType)
			}
			if d.SideEffecting != nil && *d.SideEffecting {
				writes++
			} else {
				reads++
			}
		}
		if len(p.Tools) < 4 || reads < 2 || writes < 1 {
			t.Errorf("%s: %d tools, %d reads, %d writes", p.Provider, len(p.Tools), reads, writes)
		}
		if len(p.AuthKinds) == 0 || len(p.Secrets) == 0 || !strings.HasPrefix(p.APIRoot, "https://") {
			t.Errorf("%s: auth kinds %v, secrets %v, apiRoot %q", p.Provider, p.AuthKinds, p.Secrets, p.APIRoot)
		}
		if p.Provider != "stripe" {
			if _, err := os.Stat(filepath.Join("..", "..", "..", "docs", "connectors", p.Provider+".md")); err != nil {
				t.Errorf("%s: no page in docs/connectors/: %v", p.Provider, err)
			}
		}
	}
	want := slices.Clone(harness.Providers)
	slices.Sort(want)
	got := slices.Clone(names)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("providers %v; the spec's are %v", got, want)
	}
}

// TestConnectionAuthErrors: a connection with an auth kind its provider
// does not take, or without a role it needs, is an error at the
// connection in the harness, naming what the provider takes.
func TestConnectionAuthErrors(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "h.yaml")
	src := "connections:\n  github:\n    authKind: aggregator_link\n    secrets: {accessToken: GH_TOKEN}\n  plaid:\n    authKind: aggregator_link\n    secrets: {accessToken: PLAID_TOKEN}\n"
	if err := os.WriteFile(h, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GH_TOKEN", "x")
	t.Setenv("PLAID_TOKEN", "y")
	code, out, errOut := run(t, nil, "check", "--harness", h)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		h + `:3:5: error: the github connector cannot be set up: the github connector does not take authKind "aggregator_link"; it takes oauth (secrets accessToken) or api_token (secrets apiKey) [preflight-connection]`,
		h + `:6:5: error: the plaid connector cannot be set up: the plaid connection (authKind aggregator_link) binds no clientId or apiKey secret; it needs the secret roles clientId, apiKey, accessToken [preflight-connection]`,
	} {
		if !strings.Contains(out+errOut, want) {
			t.Errorf("missing %q in\n%s%s", want, out, errOut)
		}
	}
}

// TestPinAndCheckEveryConnectorTool: pin brings a document embedding every
// connector tool, each with a stale description, in line with the
// registry, and check then finds no drift in any of them.
func TestPinAndCheckEveryConnectorTool(t *testing.T) {
	cat := host.NewCatalog(nil)
	var tools []any
	var names []string
	var conns []any
	var providers []string
	for _, p := range cat.Providers {
		var ns []string
		for _, d := range p.Tools {
			d.Description = "stale: " + d.Description
			tools = append(tools, d)
			ns = append(ns, d.Name)
		}
		names = append(names, ns...)
		providers = append(providers, p.Provider)
		conns = append(conns, map[string]any{"provider": p.Provider, "authKind": p.AuthKinds[0], "scopes": []string{}, "capabilities": ns})
	}
	doc := map[string]any{
		"openplaybook": "1.6",
		"manifest":     map[string]any{"id": "all-connectors", "name": "All", "version": "1.0.0", "description": "Every connector tool.", "requiredConnectors": providers},
		"inputSchema":  map[string]any{"type": "object"},
		"requires":     map[string]any{"connections": conns, "mcpServers": []any{}, "secrets": []any{}},
		"tools":        tools,
		"steps":        []any{map[string]any{"id": "s", "kind": "agent", "agent": "a", "purpose": "All.", "allowedTools": names}},
	}
	dir := t.TempDir()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	docPath, h := filepath.Join(dir, "doc.json"), filepath.Join(dir, "h.yaml")
	if err := os.WriteFile(docPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h, []byte("store: {sqlite: state.db}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run(t, nil, "pin", "--harness", h, "--write", docPath); code != 0 {
		t.Fatalf("pin: exit %d\n%s%s", code, out, errOut)
	}
	pinned, _ := os.ReadFile(docPath)
	if n := strings.Count(string(pinned), "stale: "); n != 0 {
		t.Errorf("%d stale descriptions left after pin", n)
	}
	_, out, errOut := run(t, nil, "check", "--harness", h, "--format", "json", docPath)
	if strings.Contains(out+errOut, `"drift-`) {
		t.Errorf("check finds drift after pin:\n%s", out)
	}
	if !strings.Contains(out, "preflight-connection") {
		t.Errorf("check did not get to preflight (no connection is bound):\n%s%s", out, errOut)
	}
}

// TestConnectionUnusedSettings: a role the auth kind never uses and a
// tokenURL without client credentials are warnings at the connection.
func TestConnectionUnusedSettings(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "h.yaml")
	src := "connections:\n  github:\n    authKind: oauth\n    secrets: {accessToken: GH_TOKEN, apiKey: OTHER}\n    tokenURL: http://127.0.0.1:9/token\n    baseURL: http://127.0.0.1:9\n"
	if err := os.WriteFile(h, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GH_TOKEN", "x")
	t.Setenv("OTHER", "y")
	_, out, errOut := run(t, nil, "check", "--harness", h)
	for _, want := range []string{
		h + `:3:5: warning: the github connector never uses the apiKey secret with authKind oauth`,
		h + `:3:5: warning: tokenURL is used only when the connection also binds clientId and clientSecret`,
	} {
		if !strings.Contains(out+errOut, want) {
			t.Errorf("missing %q in\n%s%s", want, out, errOut)
		}
	}
}
