package harness

import (
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
)

// TestStorePostgres: store.postgres is read with its URL as written (the
// secret reference kept), SQLite is then "", and the secret the URL names
// is a use of a secret like any other (checked by preflight, redacted).
func TestStorePostgres(t *testing.T) {
	h, ds := Parse("h.yaml", []byte("store:\n  postgres:\n    url: \"${secret:OPENPLAYBOOK_DATABASE_URL}\"\n"), "/h")
	if diag.Count(ds, diag.Error) > 0 {
		t.Fatalf("diagnostics:\n%s", render(ds))
	}
	if h.Store.Postgres == nil || h.Store.Postgres.URL != "${secret:OPENPLAYBOOK_DATABASE_URL}" || h.Store.SQLite != "" || h.Store.Engine() != "postgres" {
		t.Fatalf("store = %+v, postgres %+v", h.Store, h.Store.Postgres)
	}
	if p := h.Store.Postgres.Pos; p.Line != 3 || p.Pointer != "/store/postgres/url" {
		t.Errorf("pos = %+v", p)
	}
	if names := h.SecretNames(); len(names) != 1 || names[0] != "OPENPLAYBOOK_DATABASE_URL" {
		t.Errorf("secret names = %v", names)
	}

	const url = "postgres://app:s3cr3t-pw@db.internal:5432/openplaybook?sslmode=require"
	sec := NewSecrets(h.Secrets, &SecretsOptions{LookupEnv: func(k string) (string, bool) {
		if k == "OPENPLAYBOOK_DATABASE_URL" {
			return url, true
		}
		return "", false
	}})
	got, err := h.Store.Postgres.Expand(sec)
	if err != nil || got != url {
		t.Fatalf("Expand = %q, %v", got, err)
	}
	if r := sec.Redact("connecting to " + url); strings.Contains(r, "s3cr3t") {
		t.Errorf("the resolved URL is not redacted: %q", r)
	}
	ds = h.CheckSecrets(NewSecrets(h.Secrets, &SecretsOptions{LookupEnv: func(string) (string, bool) { return "", false }}))
	expect(t, ds, problem{3, 10, "/store/postgres/url", RuleSecretMissing, `secret "OPENPLAYBOOK_DATABASE_URL" is not set`})

	// A value that is not a PostgreSQL URL is refused without being shown.
	bad := NewSecrets(h.Secrets, &SecretsOptions{LookupEnv: func(k string) (string, bool) { return "mysql://u:pw@h/db", true }})
	if _, err := h.Store.Postgres.Expand(bad); err == nil || strings.Contains(err.Error(), "pw") || !strings.Contains(err.Error(), "postgres://") {
		t.Errorf("Expand of a mysql URL: %v", err)
	}
}

// TestStoreDefaultSQLite: without a store section, or with store.sqlite,
// the engine is SQLite.
func TestStoreDefaultSQLite(t *testing.T) {
	for _, src := range []string{"{}", "store: {sqlite: x.db}\n"} {
		h, ds := Parse("h.yaml", []byte(src), "/h")
		if diag.Count(ds, diag.Error) > 0 || h.Store.Engine() != "sqlite" || h.Store.SQLite == "" || h.Store.Postgres != nil {
			t.Errorf("%q: store %+v, diagnostics:\n%s", src, h.Store, render(ds))
		}
	}
}

func TestStorePostgresErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      problem
	}{
		{"both engines", "store:\n  sqlite: x.db\n  postgres: {url: \"${secret:U}\"}\n",
			problem{3, 13, "/store/postgres", RuleValue, `"store" has both "sqlite" and "postgres"; give one engine`}},
		{"both engines, postgres first", "store:\n  postgres: {url: \"${secret:U}\"}\n  sqlite: x.db\n",
			problem{3, 11, "/store/sqlite", RuleValue, `has both "sqlite" and "postgres"`}},
		{"no url", "store: {postgres: {}}\n",
			problem{1, 19, "/store/postgres", RuleRequired, `"postgres" needs "url"`}},
		{"not a postgres URL", "store: {postgres: {url: \"mysql://db/x\"}}\n",
			problem{1, 25, "/store/postgres/url", RuleValue, `must be a postgres:// or postgresql:// URL`}},
		{"literal password", "store: {postgres: {url: \"postgres://app:hunter2hunter2@db/x\"}}\n",
			problem{1, 25, "/store/postgres/url", RuleCredential, ``}},
		{"literal password parameter", "store: {postgres: {url: \"postgresql://db/x?user=app&password=hunter2\"}}\n",
			problem{1, 25, "/store/postgres/url", RuleCredential, `"password"`}},
		{"malformed reference", "store: {postgres: {url: \"${secret:}\"}}\n",
			problem{1, 25, "/store/postgres/url", RuleSecretRef, ``}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ds := Parse("h.yaml", []byte(tc.src), "/h")
			expect(t, ds, tc.want)
			for _, d := range ds {
				if strings.Contains(d.Message, "hunter2") {
					t.Errorf("a diagnostic quotes the password: %s", d.Message)
				}
			}
			_ = h
		})
	}
	// A password given by reference, the rest literal, is fine.
	h, ds := Parse("h.yaml", []byte("store: {postgres: {url: \"postgres://app:${secret:PGPASSWORD}@db/x\"}}\n"), "/h")
	if diag.Count(ds, diag.Error) > 0 || h.Store.Postgres == nil {
		t.Errorf("password by reference: %s", render(ds))
	}
}

// TestStoreVault: store.vault names the key's secret and earlier keys'
// secrets; a missing keySecret, a key written in place of a name, and an
// earlier key that is the current one are refused where they are.
func TestStoreVault(t *testing.T) {
	h, ds := Parse("h.yaml", []byte("store:\n  vault:\n    keySecret: OPENPLAYBOOK_VAULT_KEY\n    previousKeySecrets: [OLD_KEY]\n"), "/h")
	if diag.Count(ds, diag.Error) > 0 {
		t.Fatalf("diagnostics:\n%s", render(ds))
	}
	if v := h.Store.Vault; v == nil || v.KeySecret != "OPENPLAYBOOK_VAULT_KEY" || len(v.PreviousKeySecrets) != 1 || v.PreviousKeySecrets[0] != "OLD_KEY" || v.Pos.Pointer != "/store/vault" {
		t.Fatalf("vault = %+v", h.Store.Vault)
	}
	for _, c := range []struct{ src, ptr, rule string }{
		{"store:\n  vault: {}\n", "/store/vault", RuleRequired},
		{"store:\n  vault: {keySecret: \"3f9a0c1e-not-a-name\"}\n", "/store/vault/keySecret", RuleName},
		{"store:\n  vault: {keySecret: K, previousKeySecrets: [K]}\n", "/store/vault/previousKeySecrets/0", RuleValue},
		{"store:\n  vault: {keySecret: ea0c7bfa91d2c3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6f5a3}\n", "/store/vault/keySecret", RuleCredential},
		{"store:\n  vault: {keySecret: K, key: abc}\n", "/store/vault/key", RuleUnknownKey},
	} {
		h, ds := Parse("h.yaml", []byte(c.src), "/h")
		found := false
		for _, d := range ds {
			found = found || (d.Pointer == c.ptr && d.Rule == c.rule && d.Severity == diag.Error)
		}
		if !found || (c.rule != RuleUnknownKey && h.Store.Vault != nil) {
			t.Errorf("%q: want %s at %s; got vault %+v and\n%s", c.src, c.rule, c.ptr, h.Store.Vault, render(ds))
		}
		if strings.Contains(render(ds), "ea0c7bfa91d2") {
			t.Errorf("%q: a diagnostic quotes the pasted key:\n%s", c.src, render(ds))
		}
	}
}

// TestServerOAuth: mcpServers.<name>.oauth names the issuer and the
// client; the secret is a reference bound to the server and expanded with
// the others; a literal secret, a stdio server, a missing field and an
// issuer that is no http URL are refused where they are.
func TestServerOAuth(t *testing.T) {
	src := "mcpServers:\n  ledger:\n    url: https://mcp.example.com/mcp\n    oauth:\n      issuer: https://auth.example.com/\n      clientId: openplaybook\n      clientSecret: \"${secret:LEDGER_CLIENT_SECRET}\"\n"
	h, ds := Parse("h.yaml", []byte(src), "/h")
	if diag.Count(ds, diag.Error) > 0 {
		t.Fatalf("diagnostics:\n%s", render(ds))
	}
	o := h.MCPServers["ledger"].OAuth
	if o == nil || o.Issuer != "https://auth.example.com/" || o.ClientID != "openplaybook" || o.ClientSecret != "${secret:LEDGER_CLIENT_SECRET}" || o.Pos.Pointer != "/mcpServers/ledger/oauth" {
		t.Fatalf("oauth = %+v", o)
	}
	sec := NewSecrets(h.Secrets, &SecretsOptions{LookupEnv: func(k string) (string, bool) {
		return "client-secret-value-0123456789", k == "LEDGER_CLIENT_SECRET"
	}})
	x, err := h.MCPServers["ledger"].Expand(sec)
	if err != nil || x.OAuth.ClientSecret != "client-secret-value-0123456789" || h.MCPServers["ledger"].OAuth.ClientSecret != "${secret:LEDGER_CLIENT_SECRET}" {
		t.Fatalf("Expand: %+v %v", x.OAuth, err)
	}
	if r := sec.Redact("token request with client-secret-value-0123456789"); strings.Contains(r, "client-secret-value") {
		t.Errorf("the client secret is not redacted: %q", r)
	}
	for _, c := range []struct{ src, ptr, rule string }{
		{"mcpServers:\n  l:\n    url: https://m.example/mcp\n    oauth: {issuer: https://a.example, clientId: c, clientSecret: hunter2-literal-secret}\n", "/mcpServers/l/oauth/clientSecret", RuleCredential},
		{"mcpServers:\n  l:\n    command: srv\n    oauth: {issuer: https://a.example, clientId: c, clientSecret: \"${secret:S}\"}\n", "/mcpServers/l/oauth", RuleTransport},
		{"mcpServers:\n  l:\n    url: https://m.example/mcp\n    oauth: {issuer: https://a.example, clientSecret: \"${secret:S}\"}\n", "/mcpServers/l/oauth", RuleRequired},
		{"mcpServers:\n  l:\n    url: https://m.example/mcp\n    oauth: {issuer: \"ftp://a.example\", clientId: c, clientSecret: \"${secret:S}\"}\n", "/mcpServers/l/oauth/issuer", RuleValue},
		{"mcpServers:\n  l:\n    url: https://m.example/mcp\n    oauth: {issuer: \"${secret:ISS}\", clientId: c, clientSecret: \"${secret:S}\"}\n", "/mcpServers/l/oauth/issuer", RuleSecretRef},
	} {
		h, ds := Parse("h.yaml", []byte(c.src), "/h")
		found := false
		for _, d := range ds {
			found = found || (d.Pointer == c.ptr && d.Rule == c.rule && d.Severity == diag.Error)
		}
		if s := h.MCPServers["l"]; !found || (s != nil && s.OAuth != nil) {
			t.Errorf("%q: want %s at %s; got\n%s", c.src, c.rule, c.ptr, render(ds))
		}
	}
}
