package harness

import (
	"regexp"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/driver/drivers"
)

// shownForm is the form a credential message tells the user to write:
// `write "${secret:GH}" here`, `write GH_TOKEN here`, `write
// api_key=${secret:M_TOKEN} in the URL` or a header.
var shownForm = regexp.MustCompile(`write ("(?:(?:Bearer|Basic|Token) )?\$\{secret:[A-Za-z_][A-Za-z0-9_]*\}"|[A-Za-z_][A-Za-z0-9_]*) here|write ([a-z_]+=\$\{secret:[A-Za-z_][A-Za-z0-9_]*\}) in the URL|"headers": (\{Authorization: "(?:Basic|Bearer) \$\{secret:[A-Za-z_][A-Za-z0-9_]*\}"\})|write (apiKeySecret: [A-Za-z_][A-Za-z0-9_]*) in place of "`)

// TestCredentialFixIsValid pastes a credential into every kind of place of
// the harness file, takes the form the message shows instead, writes it
// there, and checks that the file then has no error: a message never
// tells the user to write what is itself an error. Where no secret is
// expanded, the message must say so, and a reference there must indeed be
// an error.
func TestCredentialFixIsValid(t *testing.T) {
	for _, tc := range []struct {
		name, src, ptr string
		literal        string // the quoted credential in src, replaced by the shown form
		rule           string // "" is RuleCredential
		none           bool   // no secret is expanded at ptr
		key            bool   // the credential is a key
		agentKey       bool   // an agent setting no driver takes: the fix is "apiKeySecret"
		scheme         string // the Authorization scheme the shown form must keep
	}{
		{name: "token in args", src: "mcpServers:\n  m: {command: x, args: [--key, \"" + fakeStripe + "\"]}\n", ptr: "/mcpServers/m/args/1", literal: `"` + fakeStripe + `"`},
		{name: "token in env", src: "mcpServers:\n  m:\n    command: x\n    env: {GH: \"" + fakeGitHub + "\"}\n", ptr: "/mcpServers/m/env/GH", literal: `"` + fakeGitHub + `"`},
		{name: "literal under a sensitive env name", src: "mcpServers:\n  m:\n    command: x\n    env: {DB_PASSWORD: \"" + plainPass + "\"}\n", ptr: "/mcpServers/m/env/DB_PASSWORD", literal: `"` + plainPass + `"`},
		{name: "header of a server with a dash in its name", src: "mcpServers:\n  acme-mcp:\n    url: https://mcp.example.com/mcp\n    headers: {Authorization: \"" + fakeBearer + "\"}\n", ptr: "/mcpServers/acme-mcp/headers/Authorization", literal: `"` + fakeBearer + `"`},
		{name: "short literal header", src: "mcpServers:\n  m:\n    url: https://mcp.example.com/mcp\n    headers: {X-Api-Key: \"" + plainPass + "\"}\n", ptr: "/mcpServers/m/headers/X-Api-Key", literal: `"` + plainPass + `"`},
		{name: "url with a password", src: "mcpServers:\n  m:\n    url: \"" + fakeURL + "\"\n", ptr: "/mcpServers/m/url", literal: "    url: \"" + fakeURL + "\"\n"},
		{name: "url with a token query", src: "mcpServers:\n  m: {url: \"https://mcp.example.com/mcp?api_key=" + plainPass + "\"}\n", ptr: "/mcpServers/m/url", literal: "api_key=" + plainPass},
		{name: "token as a connection secret", src: "connections:\n  slack: {authKind: oauth, secrets: {accessToken: \"" + fakeSlack + "\"}}\n", ptr: "/connections/slack/secrets/accessToken", literal: `"` + fakeSlack + `"`},
		{name: "stripe key as a connection secret", src: "connections:\n  stripe:\n    authKind: api_token\n    secrets:\n      apiKey: \"" + fakeStripe + "\"\n", ptr: "/connections/stripe/secrets/apiKey", literal: `"` + fakeStripe + `"`},
		{name: "plain value as a connection secret", src: "connections:\n  resend: {authKind: api_token, secrets: {apiKey: \"re_" + plainPass + "\"}}\n", ptr: "/connections/resend/secrets/apiKey", literal: `"re_` + plainPass + `"`, rule: RuleName},
		{name: "reference as a connection secret", src: "connections:\n  stripe: {authKind: api_token, secrets: {apiKey: \"${secret:STRIPE_KEY}\"}}\n", ptr: "/connections/stripe/secrets/apiKey", literal: `"${secret:STRIPE_KEY}"`, rule: RuleName},
		{name: "key in agent settings", src: "agents:\n  lou: {driver: openai, model: gpt-4.1, apiKey: \"" + fakeOpenAI + "\"}\n", ptr: "/agents/lou/apiKey", literal: `apiKey: "` + fakeOpenAI + `"`, agentKey: true},
		{name: "literal apiKey of an agent named with a dash", src: "agents:\n  lou-bot: {driver: openai, model: gpt-4.1, apiKey: \"" + plainPass + "\"}\n", ptr: "/agents/lou-bot/apiKey", literal: `apiKey: "` + plainPass + `"`, agentKey: true},
		{name: "literal token of an agent named with a digit first", src: "agents:\n  \"1st\": {driver: openai, model: gpt-4.1, token: \"" + plainPass + "\"}\n", ptr: "/agents/1st/token", literal: `token: "` + plainPass + `"`, agentKey: true},
		{name: "bearer token in a header keeps its scheme", src: "mcpServers:\n  remote:\n    url: https://mcp.example.com/mcp\n    headers: {Authorization: \"Bearer " + fakeGitHub + "\"}\n", ptr: "/mcpServers/remote/headers/Authorization", literal: `"Bearer ` + fakeGitHub + `"`, scheme: "Bearer"},
		{name: "nested agent setting", src: "agents:\n  lou: {driver: x, extra: {headers: [\"" + fakeBearer + "\"]}}\n", ptr: "/agents/lou/extra/headers/0", literal: `"` + fakeBearer + `"`},
		{name: "token as apiKeySecret", src: "agents:\n  lou: {driver: openai, model: gpt-4.1, apiKeySecret: \"" + fakeOpenAI + "\"}\n", ptr: "/agents/lou/apiKeySecret", literal: `"` + fakeOpenAI + `"`},
		{name: "token as operatorTokenSecret", src: "serve:\n  operatorTokenSecret: \"" + fakeGitHub + "\"\n", ptr: "/serve/operatorTokenSecret", literal: `"` + fakeGitHub + `"`},
		{name: "token in a connection baseURL", src: "connections:\n  github:\n    authKind: oauth\n    secrets: {accessToken: T}\n    baseURL: \"https://api.example.com/?token=" + plainPass + "\"\n", ptr: "/connections/github/baseURL", none: true},
		{name: "password in a connection baseURL", src: "connections:\n  github:\n    authKind: oauth\n    secrets: {accessToken: T}\n    baseURL: \"" + fakeURL + "\"\n", ptr: "/connections/github/baseURL", none: true},
		{name: "token in a command", src: "mcpServers:\n  m: {command: \"" + fakeStripe + "\"}\n", ptr: "/mcpServers/m/command", none: true},
		{name: "token in a store path", src: "store: {sqlite: \"" + fakeGitHub + "\"}\n", ptr: "/store/sqlite", none: true},
		{name: "token as a key", src: "agents:\n  \"" + fakeGitHub + "\": {driver: x}\n", ptr: "/agents/" + fakeGitHub, key: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := tc.rule
			if rule == "" {
				rule = RuleCredential
			}
			_, ds := Parse("h.yaml", []byte(tc.src), "")
			var msg string
			for _, d := range ds {
				if d.Rule == rule && (d.Pointer == tc.ptr || tc.key && strings.HasPrefix(d.Pointer, "/agents/")) {
					msg = d.Message
				}
			}
			if msg == "" {
				t.Fatalf("no %s at %s; got:\n%s", rule, tc.ptr, render(ds))
			}
			if !strings.Contains(msg, "never") && !strings.Contains(tc.literal, "${secret:") {
				t.Errorf("message does not say the file never holds credentials: %s", msg)
			}
			switch {
			case tc.key:
				if shownForm.MatchString(msg) || strings.Contains(msg, "${secret:NAME}") {
					t.Errorf("message of a key shows a form to write: %s", msg)
				}
				return
			case tc.none:
				if !strings.Contains(msg, "no secret is expanded here") || shownForm.MatchString(msg) {
					t.Fatalf("message does not say that no secret is expanded here: %s", msg)
				}
				// And that is true: a reference there is an error.
				src := tc.src
				for _, lit := range []string{fakeStripe, fakeGitHub, fakeURL, plainPass} {
					src = strings.ReplaceAll(src, lit, "${secret:X}")
				}
				_, ds := Parse("h.yaml", []byte(src), "")
				if !hasDiag(ds, RuleSecretRef, tc.ptr) {
					t.Errorf("the message says no secret is expanded at %s, but a reference there is accepted:\n%s", tc.ptr, render(ds))
				}
				return
			}
			m := shownForm.FindStringSubmatch(msg)
			if m == nil {
				t.Fatalf("message shows no form to write: %s", msg)
			}
			if tc.agentKey != (m[4] != "") {
				t.Errorf("message shows %q, want the apiKeySecret form: %t", m[0], tc.agentKey)
			}
			if tc.scheme != "" && !strings.HasPrefix(m[1], `"`+tc.scheme+" ") {
				t.Errorf("message shows %s, want the %s scheme kept", m[1], tc.scheme)
			}
			var src string
			switch form := m[1] + m[2] + m[3] + m[4]; {
			case m[3] != "":
				src = strings.Replace(tc.src, tc.literal, "    url: https://mcp.example.com/mcp\n    headers: "+form+"\n", 1)
			default:
				src = strings.Replace(tc.src, tc.literal, form, 1)
			}
			if src == tc.src {
				t.Fatalf("test case: %q is not in the source", tc.literal)
			}
			h, ds := Parse("h.yaml", []byte(src), "")
			if n := diag.Count(ds, diag.Error); n > 0 {
				t.Errorf("message: %s\nwriting what it shows gives %d errors:\n%s\n%s", msg, n, src, render(ds))
			}
			// What a driver reads of an agent's settings is valid too
			// (the preflight's own check).
			if h != nil {
				for _, a := range h.Agents {
					if err := drivers.Check(a.Driver, a.Settings); err != nil && a.Driver != "x" {
						t.Errorf("message: %s\nwriting what it shows, driver %q refuses the settings: %v", msg, a.Driver, err)
					}
				}
			}
		})
	}
}

func hasDiag(ds []diag.Diagnostic, rule, ptr string) bool {
	for _, d := range ds {
		if d.Rule == rule && d.Pointer == ptr {
			return true
		}
	}
	return false
}
