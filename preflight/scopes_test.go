package preflight_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/connector/httpconn"
	"github.com/openplaybook/openplaybook/connector/providers"
	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/preflight"
	"github.com/openplaybook/openplaybook/registry"
)

// scopeCheck checks a document embedding the registry's own definitions
// of tools (so nothing drifts) against a harness whose provider
// connection has the given scopes line ("" for none), and returns the
// preflight-connection-scope diagnostics.
func scopeCheck(t *testing.T, provider, scopes string, tools ...string) []diag.Diagnostic {
	t.Helper()
	src := fmt.Sprintf("connections:\n  %s:\n    authKind: api_token\n    secrets: {apiKey: K}\n", provider)
	if scopes != "" {
		src += "    scopes: " + scopes + "\n"
	}
	h, ds := harness.Parse("h.yaml", []byte(src), t.TempDir())
	if n := diag.Count(ds, diag.Error); n > 0 {
		t.Fatalf("harness: %v", ds)
	}
	env := &host.Host{Harness: h, Registry: registry.New(), Secrets: harness.NewSecrets(h.Secrets, &harness.SecretsOptions{LookupEnv: func(string) (string, bool) { return "", false }})}
	all := allProviders(t)
	defs := map[string]playbook.Definition{}
	for _, p := range all {
		for _, d := range p.Definitions() {
			if err := env.Registry.Add(d, registry.Origin{Kind: registry.Connector, Name: p.Name()}, nil); err != nil {
				t.Fatal(err)
			}
			defs[d.Name] = d
		}
	}
	var embedded []string
	for _, name := range tools {
		d, ok := defs[name]
		if !ok {
			t.Fatalf("no connector tool %q", name)
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		embedded = append(embedded, string(b))
	}
	doc, rds := playbook.Read("doc.json", []byte(`{"openplaybook": "1.6", "tools": [`+strings.Join(embedded, ",\n")+`], "steps": []}`), nil)
	if doc == nil {
		t.Fatalf("document: %v", rds)
	}
	var out []diag.Diagnostic
	for _, d := range preflight.Check(context.Background(), env, doc) {
		if d.Rule == preflight.RuleConnectionScope {
			out = append(out, d)
		}
	}
	return out
}

var providerList []*httpconn.Provider

func allProviders(t *testing.T) []*httpconn.Provider {
	t.Helper()
	if providerList == nil {
		all, err := providers.All()
		if err != nil {
			t.Fatal(err)
		}
		providerList = all
	}
	return providerList
}

func TestConnectionScopes(t *testing.T) {
	// The newcomer's case: issues:read granted, a tool needing
	// issues:write. An error at the tool's permissions, naming the
	// harness place and the scope that would do.
	ds := scopeCheck(t, "github", "[metadata:read, issues:read]", "github.issues.list", "github.issue.create")
	if len(ds) != 1 {
		t.Fatalf("want one diagnostic, got %v", ds)
	}
	d := ds[0]
	if d.Severity != diag.Error || d.Pointer != "/tools/1/permissions" || d.File != "doc.json" || d.Line == 0 || d.Column == 0 {
		t.Errorf("diagnostic at %s:%d:%d %s (%s), want an error at doc.json /tools/1/permissions", d.File, d.Line, d.Column, d.Pointer, d.Severity)
	}
	for _, want := range []string{`tool "github.issue.create" needs "issues:write"`, `h.yaml:5:13`, `"metadata:read", "issues:read"`, `add "issues:write" to connections.github.scopes`} {
		if !strings.Contains(d.Message, want) {
			t.Errorf("message lacks %q: %s", want, d.Message)
		}
	}

	for _, tc := range []struct {
		name, provider, scopes string
		tools                  []string
		want                   diag.Severity // 0: no diagnostic
		says                   string
	}{
		{"write covers read", "github", "[issues:write]", []string{"github.issues.list"}, 0, ""},
		{"read does not cover write", "github", "[contents:read]", []string{"github.release.create"}, diag.Error, `"contents:write"`},
		{"no scopes listed: nothing said", "github", "", []string{"github.issue.create"}, 0, ""},
		{"exact names: a case variant covers nothing", "github", "[Issues:Write]", []string{"github.issue.create"}, diag.Error, `"issues:write"`},
		{"exact names: blanks", "github", `["issues:write "]`, []string{"github.issue.create"}, diag.Error, `"issues:write"`},
		{"one of two covered is a warning", "github", "[issues:write]", []string{"github.issue.comment.create"}, diag.Warning, `"pull_requests:write"`},
		{"read scope listed where the read tool needs it", "github", "[issues:read]", []string{"github.issues.list"}, 0, ""},
		{"shopify write covers read", "shopify", "[write_orders]", []string{"shopify.orders.list"}, 0, ""},
		{"shopify read does not cover write", "shopify", "[read_orders]", []string{"shopify.order.update"}, diag.Error, `"write_orders"`},
		{"a scope of another provider's vocabulary", "stripe_financial_connections", "[transactions:read]", []string{"stripe_financial_connections.account.list"}, diag.Error, `"financial_connections_accounts:read" or "financial_connections_accounts:write"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := scopeCheck(t, tc.provider, tc.scopes, tc.tools...)
			switch {
			case tc.want == 0 && len(ds) > 0:
				t.Errorf("want none, got %v", ds)
			case tc.want != 0 && (len(ds) != 1 || ds[0].Severity != tc.want || !strings.Contains(ds[0].Message, tc.says)):
				t.Errorf("want one %s saying %s, got %v", tc.want, tc.says, ds)
			}
		})
	}
}

// TestConnectionScopesEveryTool: every connector tool, against its
// provider's connection granted exactly the tool's own permissions, is
// covered; granted only a scope no provider has, it is an error (unless it
// needs no scope), whose message lists scopes that would be valid, and
// granting the first of them for each missing permission covers it.
func TestConnectionScopesEveryTool(t *testing.T) {
	all := allProviders(t)
	n := 0
	for _, p := range all {
		for _, d := range p.Definitions() {
			n++
			own, _ := json.Marshal(d.Permissions)
			if ds := scopeCheck(t, p.Name(), string(own), d.Name); len(ds) > 0 {
				t.Errorf("%s granted its own permissions %s: %v", d.Name, own, ds)
			}
			ds := scopeCheck(t, p.Name(), "[no_such:scope]", d.Name)
			needsNone := len(d.Permissions) == 1 && (d.Permissions[0] == "none" || d.Permissions[0] == "public")
			if needsNone {
				if len(ds) > 0 {
					t.Errorf("%s needs no scope, got %v", d.Name, ds)
				}
				continue
			}
			if len(ds) != 1 || ds[0].Severity != diag.Error {
				t.Errorf("%s (permissions %s) with only an unknown scope: want one error, got %v", d.Name, own, ds)
				continue
			}
			for _, perm := range d.Permissions {
				_, fix, _ := strings.Cut(ds[0].Message, "; once the credential is granted")
				if !strings.Contains(fix, fmt.Sprintf("%q", perm)) {
					t.Errorf("%s: the message does not list %q as valid: %s", d.Name, perm, ds[0].Message)
				}
			}
		}
	}
	if n < 100 {
		t.Fatalf("only %d connector tools", n)
	}
}
