package validate

import (
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/internal/credential/credtest"
	"github.com/openplaybook/openplaybook/internal/testgen"
	"github.com/openplaybook/openplaybook/playbook"
)

// fakeSecrets are fake credentials of every kind, from [credtest].
var fakeSecrets = []string{credtest.StripeLive, credtest.StripeTest, credtest.StripeRK, credtest.Webhook, credtest.GitHubPAT, credtest.GitHubOAuth,
	credtest.GitHubApp, credtest.GitHubFine, credtest.Slack, credtest.AWS, credtest.OpenAI, credtest.Anthropic, credtest.BearerHeader, credtest.PEM, credtest.URLPass, credtest.URLToken,
	credtest.GitLab, credtest.GoogleAPIKey, credtest.SlackHook, credtest.Shopify, credtest.SendGrid, credtest.Vault, credtest.PuTTY}

// TestCredentialNeverEchoed validates documents holding each fake
// credential in a string value, in a member name and inside an
// inputSchema default, and checks that the credential rule reports each
// and that no message of any rule contains any part of the secret.
func TestCredentialNeverEchoed(t *testing.T) {
	for _, secret := range fakeSecrets {
		q := jsonQuote(secret)
		places := map[string]string{
			"description": `"description": ` + q,
			"member name": `"inputSchema": {"type": "object", "properties": {` + q + `: {"type": "string"}}}`,
			"default":     `"inputSchema": {"type": "object", "properties": {"auth": {"type": "string", "default": ` + q + `}}}`,
			"example":     `"inputSchema": {"type": "object", "properties": {"auth": {"type": "string", "examples": [` + q + `]}}}`,
			"bad schema":  `"inputSchema": {"type": "object", "properties": {` + q + `: {"type": "strin"}}}`,
		}
		for place, member := range places {
			src := strings.Replace(r2MinimalDoc, `"inputSchema": {"type": "object", "properties": {}}`, member, 1)
			if place == "description" {
				src = strings.Replace(r2MinimalDoc, `"description": "Does nothing."`, member, 1)
			}
			ds := r2Validate(t, src)
			n := 0
			for _, d := range ds {
				if d.Rule == "credential" {
					n++
				}
				for _, part := range secretParts(secret) {
					if strings.Contains(d.Message, part) || strings.Contains(d.Pointer, part) {
						t.Errorf("%s in %s: diagnostic of [%s] contains %q: %s %s", secret[:6], place, d.Rule, part, d.Pointer, d.Message)
					}
				}
			}
			if n != 1 {
				t.Errorf("%.8s… in %s: got %d credential diagnostics, want 1:\n%s", secret, place, n, golden(ds))
			}
		}
	}
}

// TestNoRuleEchoesCredential puts each fake credential where rules other
// than "credential" quote what they find: (a) as an unknown member name,
// (b) as the name of an MCP server (whose malformed and mismatched tool
// names are reported with it), (c) as a tool name in allowedTools. Every
// diagnostic of every rule that fires must be free of any 8-byte piece of
// the credential, in its message and its pointer: [playbook.Document.At]
// redacts them all.
func TestNoRuleEchoesCredential(t *testing.T) {
	for _, secret := range fakeSecrets {
		q := jsonQuote(secret)
		places := map[string]string{
			"unknown member": strings.Replace(r2MinimalDoc, `"allowedTools": ["note.add"]`,
				`"allowedTools": ["note.add"], `+q+`: true`, 1),
			"MCP server name": strings.Replace(r2MinimalDoc, `"mcpServers": []`,
				`"mcpServers": [{"name": `+q+`, "toolNames": ["mcp.acme.search", "mcp.acme.bad name"], "capabilities": []}]`, 1),
			"allowedTools": strings.Replace(r2MinimalDoc, `"allowedTools": ["note.add"]`,
				`"allowedTools": ["note.add", `+q+`]`, 1),
		}
		for place, src := range places {
			ds := r2Validate(t, src)
			rules := map[string]bool{}
			for _, d := range ds {
				rules[d.Rule] = true
				for _, part := range secretParts(secret) {
					if strings.Contains(d.Message, part) || strings.Contains(d.Pointer, part) {
						t.Errorf("%.8s… as %s: diagnostic of [%s] contains %q: %s %s", secret, place, d.Rule, part, d.Pointer, d.Message)
						break
					}
				}
			}
			// The case is only worth something if the credential rule and
			// at least one rule that quotes names fired.
			others := 0
			for r := range rules {
				if r != "credential" {
					others++
				}
			}
			if !rules["credential"] || others == 0 {
				t.Errorf("%.8s… as %s: want [credential] and another rule, got:\n%s", secret, place, golden(ds))
			}
		}
	}
}

// secretParts returns the pieces of a secret that must never appear in a
// message: the whole and every 8-byte window of its token part.
func secretParts(s string) []string {
	parts := []string{s}
	for i := 0; i+8 <= len(s); i++ {
		w := s[i : i+8]
		// Windows made only of a well-known prefix or of PEM framing are
		// not secret.
		if strings.ContainsAny(w, " \n") || strings.Contains("-----BEGIN RSA PRIVATE KEY-----github_pat_postgres://https://", w) {
			continue
		}
		parts = append(parts, w)
	}
	return parts
}

func jsonQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// r2MinimalDoc is a valid 1.6 document with one primitive tool.
const r2MinimalDoc = `{
  "openplaybook": "1.6",
  "manifest": {"id": "minimal", "name": "Minimal", "version": "1.0.0", "description": "One step.", "requiredConnectors": []},
  "requires": {"connections": [], "mcpServers": [], "secrets": []},
  "tools": [{"name": "note.add", "source": "primitive", "description": "Does nothing.", "permissions": [],
    "riskClass": "internal", "sideEffecting": true, "dataScopeWrites": ["notes"],
    "inputSchema": {"type": "object", "properties": {}}, "outputSchema": {"type": "object"}}],
  "steps": [{"id": "only", "kind": "agent", "agent": "lou", "purpose": "Add a note.", "allowedTools": ["note.add"]}]
}`

// r2Validate reads and validates src and returns every diagnostic.
func r2Validate(t testing.TB, src string) []diag.Diagnostic {
	t.Helper()
	doc, ds := playbook.Read("test.json", []byte(src), nil)
	ds = append(ds, Document(doc, nil)...)
	diag.Sort(ds)
	return ds
}

func TestR2MinimalDocIsValid(t *testing.T) {
	if ds := r2Validate(t, r2MinimalDoc); len(ds) > 0 {
		t.Errorf("want no diagnostics, got:\n%s", golden(ds))
	}
}

// BenchmarkCredential runs the credential rule alone over the generated
// 5 MB, 5,000-tool document. Target: well under 10 ms.
func BenchmarkCredential(b *testing.B) {
	src := testgen.Large(1000, 5000)
	doc, _ := playbook.Read("large.json", src, nil)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		c := &Context{Doc: doc, Opts: &Options{}, rule: "credential"}
		ruleCredential{}.Check(c)
		if len(c.diags) > 0 {
			b.Fatal(c.diags[0].Message)
		}
	}
}
