package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/diag"
)

// The fake credentials below are built from pieces so that secret scanners
// do not mistake this file for a leak; none of them is real.
var (
	fakeStripe = "sk_" + "live_" + "51HqLyjWDarjtT1zdp7dcXq"
	fakeGitHub = "ghp_" + "R2d2C3p0BB8aLuKeSkYwAlKeR0123456789"
	fakeSlack  = "xoxb-" + "2048123456-4096123456789-AbCdEfGhIjKlMnOpQrStUvWx"
	fakeBearer = "Bearer " + "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJl"
	fakeOpenAI = "sk-" + "proj-" + "Qx7Lm2Vb9TzR4cWd8Kp3Hn6Ys1Ga5Ef0"
	fakeURL    = "https://app:" + "Tr0ub4dor3x@mcp.example.com/mcp"
	plainPass  = "hunter2" + "-correct-horse"
)

// problem is an expected diagnostic: where, which rule, and a piece of the
// message.
type problem struct {
	line, col int
	ptr, rule string
	msg       string
}

func (p problem) String() string {
	return fmt.Sprintf("%d:%d %s [%s] ~%q", p.line, p.col, p.ptr, p.rule, p.msg)
}

func render(ds []diag.Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "  %s:%d:%d %s %s [%s] %s\n", d.File, d.Line, d.Column, d.Pointer, d.Severity, d.Rule, d.Message)
	}
	return b.String()
}

// expect checks that ds holds exactly the errors want (in any order;
// warnings are ignored unless listed).
func expect(t *testing.T, ds []diag.Diagnostic, want ...problem) {
	t.Helper()
	used := make([]bool, len(ds))
	for _, w := range want {
		found := false
		for i, d := range ds {
			if used[i] || d.Line != w.line || d.Column != w.col || d.Pointer != w.ptr || d.Rule != w.rule || !strings.Contains(d.Message, w.msg) {
				continue
			}
			used[i], found = true, true
			break
		}
		if !found {
			t.Errorf("missing %v; got:\n%s", w, render(ds))
		}
	}
	for i, d := range ds {
		if !used[i] && d.Severity == diag.Error {
			t.Errorf("unexpected %s:%d:%d %s [%s] %s", d.File, d.Line, d.Column, d.Pointer, d.Rule, d.Message)
		}
	}
}

func TestExampleHarnessLoadsClean(t *testing.T) {
	h, ds, err := Load("../examples/harness.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 0 {
		t.Fatalf("example harness has diagnostics:\n%s", render(ds))
	}
	root, _ := filepath.Abs("..")
	mem := h.MCPServers["memory"]
	if mem == nil || !mem.Stdio() || mem.Command != "node" || mem.Cwd != root || mem.Timeout != 15*time.Second {
		t.Fatalf("memory = %+v", mem)
	}
	if !filepath.IsAbs(mem.Env["MEMORY_FILE_PATH"]) {
		t.Errorf("MEMORY_FILE_PATH must be absolute: server-memory resolves a relative one against its dist/ folder")
	}
	for _, name := range []string{"memory", "everything"} {
		s := h.MCPServers[name]
		if s == nil {
			t.Fatalf("no MCP server %q", name)
		}
		if _, err := os.Stat(filepath.Join(root, "node_modules")); err != nil {
			t.Logf("node_modules not installed; not checking the entry point of %q", name)
			continue
		}
		if _, err := os.Stat(filepath.Join(s.Cwd, s.Args[0])); err != nil {
			t.Errorf("MCP server %q: entry point: %v", name, err)
		}
	}
	st := h.Connections["stripe"]
	if st == nil || st.AuthKind != "api_token" || st.Secrets["apiKey"] != "STRIPE_API_KEY" || st.BaseURL != "http://127.0.0.1:12111" {
		t.Errorf("stripe = %+v", st)
	}
	// Every agent name a bundled example's steps use is bound.
	files, _ := filepath.Glob("../examples/*.json")
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range strings.Split(string(src), `"agent": "`)[1:] {
			name, _, _ := strings.Cut(part, `"`)
			a := h.Agents[name]
			if a == nil {
				t.Errorf("%s: agent %q is not bound by the example harness", filepath.Base(f), name)
				continue
			}
			if a.Driver != "transcript" || a.Settings["transcript"] == nil {
				t.Errorf("agent %q = %+v", name, a)
			}
		}
	}
	if want := filepath.Join(root, "examples", ".env"); len(h.Secrets.Dotenv) != 1 || h.Secrets.Dotenv[0].Resolved != want || !h.Secrets.Dotenv[0].Optional {
		t.Errorf("dotenv = %+v, want %s optional", h.Secrets.Dotenv, want)
	}
	if h.Runtime.MaxToolCalls != 50 || h.Runtime.ApprovalExpiry != 24*time.Hour {
		t.Errorf("runtime = %+v", h.Runtime)
	}
}

func TestDefaults(t *testing.T) {
	h, ds := Parse("h.yaml", []byte("mcpServers:\n  m:\n    command: srv\n"), "/cfg")
	expect(t, ds)
	s := h.MCPServers["m"]
	if s.Timeout != DefaultTimeout || s.Cwd != "/cfg" || s.Env == nil || s.Args != nil {
		t.Errorf("server = %+v", s)
	}
	if !h.Secrets.Env || len(h.Secrets.Dotenv) != 0 || h.Secrets.Prefix != "" {
		t.Errorf("secrets = %+v", h.Secrets)
	}
	if h.Store.SQLite != filepath.Join("/cfg", DefaultSQLite) || h.Runtime.MaxToolCalls != DefaultMaxToolCalls || h.Runtime.ApprovalExpiry != DefaultApprovalExpiry {
		t.Errorf("store %+v runtime %+v", h.Store, h.Runtime)
	}
	h, ds = Parse("h.json", []byte(`{}`), "")
	expect(t, ds)
	if len(h.MCPServers)+len(h.Connections)+len(h.Agents) != 0 {
		t.Errorf("empty harness = %+v", h)
	}
}

func TestStrict(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		src  string
		want []problem
	}{
		{"unknown top-level key", "h.yaml", "mcpServers: {}\nstores: {}\n",
			[]problem{{2, 1, "/stores", RuleUnknownKey, `unknown key "stores" in the harness file (did you mean "store"?)`}}},
		{"case-variant key", "h.yaml", "MCPServers:\n  m: {command: x}\n",
			[]problem{{1, 1, "/MCPServers", RuleUnknownKey, `keys are case-sensitive: did you mean "mcpServers"?`}}},
		{"case-variant key in JSON", "h.json", "{\n  \"connections\": {\"stripe\": {\"AuthKind\": \"api_token\", \"secrets\": {\"apiKey\": \"K\"}}}\n}",
			[]problem{
				{2, 30, "/connections/stripe/AuthKind", RuleUnknownKey, `did you mean "authKind"?`},
				{2, 29, "/connections/stripe", RuleRequired, `needs "authKind"`},
			}},
		{"unknown key with no near match", "h.yaml", "runtime:\n  flavour: x\n",
			[]problem{{2, 3, "/runtime/flavour", RuleUnknownKey, `the keys here are "approvalExpiry", "maxToolCalls"`}}},
		{"duplicate key in YAML", "h.yaml", "mcpServers:\n  m:\n    command: a\n    command: b\n",
			[]problem{{4, 5, "/mcpServers/m/command", RuleDuplicateKey, `duplicate key "command" (first at line 3, column 5)`}}},
		{"duplicate key in JSON", "h.json", "{\"store\": {\"sqlite\": \"a\",\n \"sqlite\": \"b\"}}",
			[]problem{{2, 2, "/store/sqlite", RuleDuplicateKey, `"sqlite"`}}},
		{"duplicate key in JSON, escaped", "h.json", `{"store": {}, "s\u0074ore": {}}`,
			[]problem{{1, 15, "/store", RuleDuplicateKey, `"store"`}}},
		{"duplicate top-level section", "h.yaml", "agents: {}\nagents: {}\n",
			[]problem{{2, 1, "/agents", RuleDuplicateKey, `first at line 1, column 1`}}},
		{"wrong type: args", "h.yaml", "mcpServers:\n  m:\n    command: x\n    args: --verbose\n",
			[]problem{{4, 11, "/mcpServers/m/args", RuleType, `"args" must be a list, not a string`}}},
		{"wrong type: number for a string", "h.yaml", "mcpServers:\n  m:\n    command: x\n    args: [--port, 8080]\n",
			[]problem{{4, 20, "/mcpServers/m/args/1", RuleType, `must be a string, not a number; quote it`}}},
		{"wrong type: env value", "h.json", "{\"mcpServers\": {\"m\": {\"command\": \"x\", \"env\": {\"DEBUG\": true}}}}",
			[]problem{{1, 56, "/mcpServers/m/env/DEBUG", RuleType, `environment variable "DEBUG" must be a string, not a boolean`}}},
		{"wrong type: section", "h.yaml", "connections: [stripe]\n",
			[]problem{{1, 14, "/connections", RuleType, `"connections" must be a map, not a list`}}},
		{"wrong type: null section", "h.yaml", "agents:\n",
			[]problem{{1, 8, "/agents", RuleType, `"agents" must be a map, not null`}}},
		{"top level not a map", "h.yaml", "- a\n",
			[]problem{{1, 1, "", RuleType, `the harness file must be a map, not a list`}}},
		{"both command and url", "h.yaml", "mcpServers:\n  m:\n    command: x\n    url: https://mcp.example.com/mcp\n",
			[]problem{{4, 10, "/mcpServers/m/url", RuleTransport, `has both "command" (a stdio server) and "url"`}}},
		{"neither command nor url", "h.yaml", "mcpServers:\n  m:\n    timeout: 5s\n",
			[]problem{{3, 5, "/mcpServers/m", RuleRequired, `needs "command" (a stdio server) or "url"`}}},
		{"stdio keys on an HTTP server", "h.yaml", "mcpServers:\n  m:\n    url: https://mcp.example.com/mcp\n    args: [x]\n",
			[]problem{{4, 11, "/mcpServers/m/args", RuleTransport, `"args" is for stdio servers`}}},
		{"headers on a stdio server", "h.yaml", "mcpServers:\n  m:\n    command: x\n    headers: {X-Trace: on}\n",
			[]problem{{4, 14, "/mcpServers/m/headers", RuleTransport, `"headers" is for HTTP servers`}}},
		{"bad server name", "h.yaml", "mcpServers:\n  Acme.Search:\n    command: x\n",
			[]problem{{2, 3, "/mcpServers/Acme.Search", RuleName, `MCP server name "Acme.Search" is not a logical name`}}},
		{"server name that is a URL", "h.json", `{"mcpServers": {"https://mcp.example.com": {"url": "https://mcp.example.com"}}}`,
			[]problem{{1, 17, "/mcpServers/https:~1~1mcp.example.com", RuleName, `never a URL`}}},
		{"url not http", "h.yaml", "mcpServers:\n  m: {url: ftp://x.example.com/}\n",
			[]problem{{2, 12, "/mcpServers/m/url", RuleValue, `absolute http:// or https:// URL`}}},
		{"header names are case-insensitive", "h.yaml", "mcpServers:\n  m:\n    url: https://x.example.com\n    headers:\n      X-Trace: a\n      x-trace: b\n",
			[]problem{{6, 7, "/mcpServers/m/headers/x-trace", RuleDuplicateKey, `header names are case-insensitive`}}},
		{"bad env name", "h.yaml", "mcpServers:\n  m:\n    command: x\n    env: {1ST: a}\n",
			[]problem{{4, 11, "/mcpServers/m/env/1ST", RuleName, `not an environment variable name`}}},
		{"bad duration", "h.yaml", "mcpServers:\n  m:\n    command: x\n    timeout: 10\n",
			[]problem{{4, 14, "/mcpServers/m/timeout", RuleType, `"timeout" is a number without a unit: write "10s" for 10 seconds`}}},
		{"duration without a unit, quoted", "h.yaml", "mcpServers:\n  m:\n    command: x\n    callTimeout: \"1.5\"\n",
			[]problem{{4, 18, "/mcpServers/m/callTimeout", RuleValue, `"callTimeout" has no unit: write "1.5s" for 1.5 seconds`}}},
		{"rate limit without per", "h.yaml", "connections:\n  github:\n    authKind: api_token\n    secrets: {apiKey: G}\n    rateLimits:\n      - requests: 10\n",
			[]problem{{6, 9, "/connections/github/rateLimits/0", RuleRequired, `needs "per"`}}},
		{"rate limit of zero requests", "h.yaml", "connections:\n  github:\n    authKind: api_token\n    secrets: {apiKey: G}\n    rateLimits: [{requests: 0, per: 1s}]\n",
			[]problem{{5, 29, "/connections/github/rateLimits/0/requests", RuleValue, `"requests" must be a whole number of at least 1`}}},
		{"rate limit over a day", "h.yaml", "connections:\n  github:\n    authKind: api_token\n    secrets: {apiKey: G}\n    rateLimits: [{requests: 5, per: 48h}]\n",
			[]problem{{5, 37, "/connections/github/rateLimits/0/per", RuleValue, `"per" is at most "24h"`}}},
		{"rate limit calls", "h.yaml", "connections:\n  github:\n    authKind: api_token\n    secrets: {apiKey: G}\n    rateLimits: [{requests: 5, per: 1s, calls: Writes}]\n",
			[]problem{{5, 48, "/connections/github/rateLimits/0/calls", RuleValue, `"calls" is "Writes"; it is one of "all", "reads", "writes"`}}},
		{"rate limit fractional burst", "h.yaml", "connections:\n  github:\n    authKind: api_token\n    secrets: {apiKey: G}\n    rateLimits: [{requests: 5, per: 1s, burst: 1.5}]\n",
			[]problem{{5, 48, "/connections/github/rateLimits/0/burst", RuleValue, `"burst" must be a whole number`}}},
		{"rate limit unknown key", "h.yaml", "connections:\n  github:\n    authKind: api_token\n    secrets: {apiKey: G}\n    rateLimits: [{requests: 5, per: 1s, window: 1s}]\n",
			[]problem{{5, 41, "/connections/github/rateLimits/0/window", RuleUnknownKey, `unknown key "window"`}}},
		{"zero without a unit", "h.yaml", "runtime:\n  approvalExpiry: \"0\"\n",
			[]problem{{2, 19, "/runtime/approvalExpiry", RuleValue, `not a duration`}}},
		{"command and arguments in one string", "h.yaml", "mcpServers:\n  m:\n    command: node server.js --port 1\n",
			[]problem{{3, 14, "/mcpServers/m/command", RuleValue, `put the program in "command" and each argument in "args": command: "node", args: ["server.js", "--port", "1"]`}}},
		{"a path and an argument in one string", "h.yaml", "mcpServers:\n  m:\n    command: /usr/bin/node /srv/server.js\n",
			[]problem{{3, 14, "/mcpServers/m/command", RuleValue, `names no program file: it is run directly, never by a shell; put the program in "command" and each argument in "args": command: "/usr/bin/node", args: ["/srv/server.js"]`}}},
		{"bad duration unit", "h.yaml", "runtime:\n  approvalExpiry: 1d\n",
			[]problem{{2, 19, "/runtime/approvalExpiry", RuleValue, `not a duration`}}},
		{"zero duration", "h.yaml", "runtime:\n  approvalExpiry: 0s\n",
			[]problem{{2, 19, "/runtime/approvalExpiry", RuleValue, `greater than zero`}}},
		{"maxToolCalls", "h.yaml", "runtime:\n  maxToolCalls: 0\n",
			[]problem{{2, 17, "/runtime/maxToolCalls", RuleValue, `at least 1`}}},
		{"unknown provider", "h.yaml", "connections:\n  strpe: {authKind: api_token, secrets: {apiKey: K}}\n",
			[]problem{{2, 3, "/connections/strpe", RuleUnknownKey, `unknown provider "strpe" in "connections" (did you mean "stripe"?)`}}},
		{"provider case", "h.yaml", "connections:\n  GitHub: {authKind: oauth, secrets: {accessToken: T}}\n",
			[]problem{{2, 3, "/connections/GitHub", RuleUnknownKey, `did you mean "github"?`}}},
		{"authKind missing and invalid", "h.yaml", "connections:\n  gmail: {secrets: {accessToken: T}}\n  notion: {authKind: oauth2, secrets: {accessToken: T2}}\n",
			[]problem{
				{2, 10, "/connections/gmail", RuleRequired, `connection "gmail" needs "authKind"`},
				{3, 22, "/connections/notion/authKind", RuleValue, `did you mean "oauth"?`},
			}},
		// Which roles a connection needs is the connector's to say
		// (package host checks it, with the roles it needs).
		{"roles are the connector's", "h.yaml", "connections:\n  stripe:\n    authKind: api_token\n    secrets: {accessToken: STRIPE_TOKEN}\n",
			nil},
		{"secrets required", "h.yaml", "connections:\n  resend: {authKind: api_token}\n",
			[]problem{{2, 11, "/connections/resend", RuleRequired, `needs "secrets"`}}},
		{"unknown role", "h.yaml", "connections:\n  stripe: {authKind: api_token, secrets: {apikey: K}}\n",
			[]problem{
				{2, 43, "/connections/stripe/secrets/apikey", RuleUnknownKey, `did you mean "apiKey"?`},
			}},
		{"secret name, not a reference", "h.yaml", "connections:\n  stripe: {authKind: api_token, secrets: {apiKey: \"${secret:K}\"}}\n",
			[]problem{{2, 51, "/connections/stripe/secrets/apiKey", RuleName, `not a reference: the value is already a name, so write K here (the name alone, not "${secret:K}")`}}},
		{"baseURL and tokenURL for any provider", "h.yaml", "connections:\n  gmail:\n    authKind: oauth\n    secrets: {accessToken: T}\n    baseURL: http://localhost:1\n    tokenURL: http://localhost:2/token\n",
			nil},
		{"tokenURL must be http", "h.yaml", "connections:\n  gmail:\n    authKind: oauth\n    secrets: {accessToken: T}\n    tokenURL: ftp://x/token\n",
			[]problem{{5, 15, "/connections/gmail/tokenURL", RuleValue, `http`}}},
		{"scope listed twice is a warning", "h.yaml", "connections:\n  github: {authKind: oauth, secrets: {accessToken: T}, scopes: [repo, repo]}\n",
			nil},
		{"malformed references", "h.yaml", "mcpServers:\n  m:\n    command: x\n    args: [\"${X}\", \"${secrets:X}\", \"${secret:X\", \"${secret:1X}\", \"$${literal}\", \"$HOME\"]\n",
			[]problem{
				{4, 12, "/mcpServers/m/args/0", RuleSecretRef, `only ${secret:NAME} is expanded, not ${X}`},
				{4, 20, "/mcpServers/m/args/1", RuleSecretRef, `not ${secrets:X}`},
				{4, 36, "/mcpServers/m/args/2", RuleSecretRef, `not closed`},
				{4, 50, "/mcpServers/m/args/3", RuleSecretRef, `"1X" is not a secret name`},
			}},
		{"references only where expanded", "h.yaml", "mcpServers:\n  m:\n    command: \"${secret:BIN}\"\n    cwd: \"${secret:DIR}\"\n",
			[]problem{
				{3, 14, "/mcpServers/m/command", RuleSecretRef, `"command" is used as written`},
				{4, 10, "/mcpServers/m/cwd", RuleSecretRef, `"cwd" is used as written`},
			}},
		{"YAML anchors and aliases", "h.yaml", "mcpServers:\n  a: &srv {command: x}\n  b: *srv\n",
			[]problem{
				{2, 6, "/mcpServers/a", RuleYAMLFeature, `anchors (&name) are not accepted`},
				{3, 6, "/mcpServers/b", RuleYAMLFeature, `aliases (*name) are not accepted`},
				{3, 6, "/mcpServers/b", RuleType, `MCP server "b" must be a map, not null`},
			}},
		{"YAML merge key", "h.yaml", "mcpServers:\n  a:\n    <<: {command: x}\n",
			[]problem{
				{3, 5, "/mcpServers/a", RuleYAMLFeature, `merge keys (<<) are not accepted`},
				{3, 5, "/mcpServers/a", RuleRequired, `needs "command"`},
			}},
		{"YAML tag", "h.yaml", "runtime:\n  maxToolCalls: !!int 5\n",
			[]problem{{2, 17, "/runtime/maxToolCalls", RuleYAMLFeature, `tags (!!int) are not accepted`}}},
		{"YAML second document", "h.yaml", "agents: {}\n---\nstore: {}\n",
			[]problem{{2, 1, "", RuleYAMLFeature, `one YAML document`}}},
		{"YAML octal", "h.yaml", "runtime:\n  maxToolCalls: 010\n",
			[]problem{{2, 17, "/runtime/maxToolCalls", RuleValue, `plain decimal ("010" is read by YAML as 8)`}}},
		{"YAML non-string key", "h.yaml", "mcpServers:\n  m:\n    command: x\n    env: {1: a}\n",
			[]problem{{4, 11, "/mcpServers/m/env", RuleType, `a key must be a string`}}},
		{"YAML syntax error", "h.yaml", "mcpServers:\n  m: [a, b\n",
			[]problem{{2, 6, "", RuleSyntax, `']' not found`}}},
		{"YAML tab indentation", "h.yaml", "store:\n\tsqlite: x\n",
			[]problem{{2, 1, "", RuleSyntax, `cannot start any token`}}},
		{"JSON syntax error", "h.json", "{\"store\": {\"sqlite\": }}",
			[]problem{{1, 22, "/store/sqlite", RuleSyntax, `invalid character`}}},
		{"JSON comment", "h.json", "{\n  // the store\n  \"store\": {}\n}",
			[]problem{{2, 3, "", RuleSyntax, `write the harness as YAML`}}},
		{"empty YAML", "h.yaml", "# nothing\n",
			[]problem{{1, 1, "", RuleType, `the harness file is empty`}}},
		{"sniffed JSON", "harness", "{\"stores\": {}}",
			[]problem{{1, 2, "/stores", RuleUnknownKey, `did you mean "store"?`}}},
		{"agent needs a driver", "h.yaml", "agents:\n  lou: {transcript: t.json}\n  rita: {driver: 7}\n",
			[]problem{
				{2, 8, "/agents/lou", RuleRequired, `agent "lou" needs "driver"`},
				{3, 18, "/agents/rita/driver", RuleType, `"driver" must be a string, not a number`},
			}},
		{"dotenv entries", "h.yaml", "secrets:\n  dotenv: [.env, {path: .env.local, optional: true}, {optional: true}, 3]\n",
			[]problem{
				{2, 54, "/secrets/dotenv/2", RuleRequired, `needs "path"`},
				{2, 72, "/secrets/dotenv/3", RuleType, `each dotenv entry must be a path`},
			}},
		{"secrets prefix", "h.yaml", "secrets: {prefix: \"OPB-\"}\n",
			[]problem{{1, 19, "/secrets/prefix", RuleName, `"prefix" must start an environment variable name`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ds := Parse(tc.file, []byte(tc.src), "/h")
			for _, d := range ds {
				if d.File != tc.file {
					t.Errorf("diagnostic file = %q, want %q", d.File, tc.file)
				}
			}
			expect(t, ds, tc.want...)
		})
	}
}

func TestScopeDuplicateWarning(t *testing.T) {
	h, ds := Parse("h.yaml", []byte("connections:\n  github: {authKind: oauth, secrets: {accessToken: T}, scopes: [repo, repo]}\n"), "")
	if len(ds) != 1 || ds[0].Severity != diag.Warning || ds[0].Rule != RuleDuplicate || ds[0].Pointer != "/connections/github/scopes/1" {
		t.Fatalf("got:\n%s", render(ds))
	}
	if got := h.Connections["github"].Scopes; len(got) != 1 {
		t.Errorf("scopes = %v", got)
	}
}

func TestLimits(t *testing.T) {
	big := []byte("store: {sqlite: \"" + strings.Repeat("a", MaxSize) + "\"}\n")
	_, ds := Parse("h.yaml", big, "")
	expect(t, ds, problem{0, 0, "", RuleLimit, "1 MiB"})

	deep := []byte("agents: {a: {driver: x, s: " + strings.Repeat("[", 200_000) + "}}")
	start := time.Now()
	_, ds = Parse("h.yaml", deep, "")
	expect(t, ds, problem{1, 90, "", RuleLimit, "nesting is deeper than 64"})
	_, ds = Parse("h.json", deep, "")
	if len(ds) == 0 || ds[0].Rule != RuleLimit && ds[0].Rule != RuleSyntax {
		t.Errorf("deep JSON: got:\n%s", render(ds))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("deep nesting took %v", d)
	}

	// A bracket inside a quoted string or a plain scalar is no nesting.
	ok := []byte("agents:\n  a:\n    driver: x\n    s: \"" + strings.Repeat("[", 100) + "\"\n    t: x" + strings.Repeat("[", 100) + "\n    u: '" + strings.Repeat("{", 100) + "'\n")
	_, ds = Parse("h.yaml", ok, "")
	expect(t, ds)
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "h.yaml")
	if err := os.WriteFile(p, []byte("secrets: {dotenv: [sub/.env]}\nstore: {sqlite: /abs/x.db}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, ds, err := Load(p)
	if err != nil || len(ds) != 0 {
		t.Fatalf("err %v ds\n%s", err, render(ds))
	}
	if h.Secrets.Dotenv[0].Resolved != filepath.Join(dir, "sub", ".env") || h.Store.SQLite != "/abs/x.db" || h.Dir != dir {
		t.Errorf("h = %+v %+v %+v", h, h.Secrets, h.Store)
	}
	if _, _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
	bigp := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(bigp, make([]byte, 3*MaxSize), 0o600); err != nil {
		t.Fatal(err)
	}
	_, ds, err = Load(bigp)
	if err != nil || len(ds) != 1 || ds[0].Rule != RuleLimit {
		t.Errorf("big file: err %v ds\n%s", err, render(ds))
	}
}

func TestCredentialLiteralsRejectedWithoutEcho(t *testing.T) {
	for _, tc := range []struct {
		name, file, src, ptr, secret string
		rule                         string // "" is RuleCredential
	}{
		{"stripe key in args", "h.yaml", "mcpServers:\n  m: {command: x, args: [--key, \"" + fakeStripe + "\"]}\n", "/mcpServers/m/args/1", fakeStripe, ""},
		{"github token in env", "h.yaml", "mcpServers:\n  m:\n    command: x\n    env: {GH: \"" + fakeGitHub + "\"}\n", "/mcpServers/m/env/GH", fakeGitHub, ""},
		{"literal under a sensitive env name", "h.yaml", "mcpServers:\n  m:\n    command: x\n    env: {DB_PASSWORD: \"" + plainPass + "\"}\n", "/mcpServers/m/env/DB_PASSWORD", plainPass, ""},
		{"bearer header", "h.yaml", "mcpServers:\n  m:\n    url: https://mcp.example.com/mcp\n    headers: {Authorization: \"" + fakeBearer + "\"}\n", "/mcpServers/m/headers/Authorization", fakeBearer[7:], ""},
		{"short literal in Authorization", "h.yaml", "mcpServers:\n  m:\n    url: https://mcp.example.com/mcp\n    headers: {authorization: \"Bearer " + plainPass + "\"}\n", "/mcpServers/m/headers/authorization", plainPass, ""},
		{"url with password", "h.yaml", "mcpServers:\n  m: {url: \"" + fakeURL + "\"}\n", "/mcpServers/m/url", "Tr0ub4dor3x", ""},
		{"url with token query", "h.json", `{"mcpServers": {"m": {"url": "https://mcp.example.com/mcp?api_key=` + plainPass + `"}}}`, "/mcpServers/m/url", plainPass, ""},
		{"slack token as a connection secret name", "h.yaml", "connections:\n  slack: {authKind: oauth, secrets: {accessToken: \"" + fakeSlack + "\"}}\n", "/connections/slack/secrets/accessToken", fakeSlack, ""},
		{"plain value as a connection secret name", "h.yaml", "connections:\n  resend: {authKind: api_token, secrets: {apiKey: \"re_" + plainPass + "\"}}\n", "/connections/resend/secrets/apiKey", plainPass, RuleName},
		{"openai key in agent settings", "h.yaml", "agents:\n  lou: {driver: openai, apiKey: \"" + fakeOpenAI + "\"}\n", "/agents/lou/apiKey", fakeOpenAI, ""},
		{"literal agent apiKey", "h.yaml", "agents:\n  lou: {driver: openai, apiKey: \"" + plainPass + "\"}\n", "/agents/lou/apiKey", plainPass, ""},
		{"nested agent setting", "h.json", `{"agents": {"lou": {"driver": "x", "extra": {"headers": ["` + fakeBearer + `"]}}}}`, "/agents/lou/extra/headers/0", fakeBearer[7:], ""},
		{"credential as a key", "h.yaml", "agents:\n  \"" + fakeGitHub + "\": {driver: x}\n", "/agents/" + fakeGitHub, fakeGitHub, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ds := Parse(tc.file, []byte(tc.src), "")
			rule := tc.rule
			if rule == "" {
				rule = RuleCredential
			}
			found := false
			for _, d := range ds {
				for i := 0; i+8 <= len(tc.secret); i++ {
					if strings.Contains(d.Message, tc.secret[i:i+8]) {
						t.Fatalf("message echoes the credential: %s", d.Message)
					}
				}
				if d.Rule == rule {
					if d.Pointer == tc.ptr || strings.HasPrefix(tc.ptr, "/agents/") && strings.HasPrefix(d.Pointer, "/agents/") {
						found = true
					}
					if rule == RuleCredential && !strings.Contains(d.Message, "${secret:") && !strings.Contains(d.Message, "a key cannot refer to a secret") && !strings.Contains(d.Message, "write apiKeySecret: ") {
						t.Errorf("message does not say how to fix it: %s", d.Message)
					}
				}
			}
			if !found {
				t.Errorf("no %s at %s; got:\n%s", rule, tc.ptr, render(ds))
			}
			if n := diag.Count(ds, diag.Error); n > 2 {
				t.Errorf("%d errors for one credential:\n%s", n, render(ds))
			}
		})
	}

	// References, placeholders and ordinary values are not credentials.
	_, ds := Parse("h.yaml", []byte(`mcpServers:
  acme:
    url: "https://mcp.example.com/mcp?token=${secret:ACME_Q}&page=1"
    headers:
      Authorization: "Bearer ${secret:ACME_MCP_TOKEN}"
      X-Api-Key: "${secret:ACME_KEY}"
      X-Trace: "on"
  m:
    command: x
    env:
      GITHUB_TOKEN: "${secret:GITHUB_TOKEN}"
      GITHUB_TOKEN_FILE: /run/secrets/gh
      EMPTY_TOKEN: ""
      PRICE: "$${PRICE}"
agents:
  lou: {driver: openai, model: gpt-x, apiKeySecret: OPENAI_API_KEY}
`), "")
	expect(t, ds)
}

func TestSecretRefs(t *testing.T) {
	h, ds := Parse("h.yaml", []byte(`mcpServers:
  acme:
    url: https://mcp.example.com/mcp
    headers: {Authorization: "Bearer ${secret:ACME_MCP_TOKEN}"}
  m:
    command: x
    args: ["--a=${secret:A}${secret:B}"]
    env: {T: "${secret:A}"}
connections:
  stripe: {authKind: api_token, secrets: {apiKey: STRIPE_API_KEY}}
agents:
  lou: {driver: openai, apiKeySecret: OPENAI_API_KEY, baseURL: "https://${secret:HOST}/v1"}
`), "")
	expect(t, ds)
	var got []string
	for _, r := range h.SecretRefs() {
		got = append(got, fmt.Sprintf("%s %s %d:%d %s", r.Name, r.Via, r.Pos.Line, r.Pos.Column, r.Pos.Pointer))
	}
	want := []string{
		"ACME_MCP_TOKEN reference 4:30 /mcpServers/acme/headers/Authorization",
		"A reference 7:12 /mcpServers/m/args/0",
		"B reference 7:12 /mcpServers/m/args/0",
		"A reference 8:14 /mcpServers/m/env/T",
		"STRIPE_API_KEY connection 10:51 /connections/stripe/secrets/apiKey",
		"OPENAI_API_KEY agent 12:39 /agents/lou/apiKeySecret",
		"HOST reference 12:64 /agents/lou/baseURL",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("SecretRefs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if names := strings.Join(h.SecretNames(), " "); names != "A ACME_MCP_TOKEN B HOST OPENAI_API_KEY STRIPE_API_KEY" {
		t.Errorf("SecretNames = %s", names)
	}
}

// fakeEnv and fakeFiles stand in for the process environment and the file
// system.
func fakeOpts(env map[string]string, files map[string]string) *SecretsOptions {
	return &SecretsOptions{
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		ReadFile: func(p string) ([]byte, error) {
			if s, ok := files[p]; ok {
				return []byte(s), nil
			}
			return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
		},
	}
}

const (
	valEnv   = "env-value-0123456789"
	valFirst = "first-file-value-abcdef"
	valLast  = "last-file-value-ghijkl"
)

func TestSecretsPrecedenceAndExpand(t *testing.T) {
	cfg := &SecretsConfig{Env: true, Dotenv: []DotenvFile{
		{Path: ".env", Resolved: "/h/.env"},
		{Path: ".env.local", Resolved: "/h/.env.local", Optional: true},
		{Path: ".env.shared", Resolved: "/h/.env.shared"},
	}}
	s := NewSecrets(cfg, fakeOpts(
		map[string]string{"IN_ENV": valEnv, "EMPTY_IN_ENV": "", "ONLY_EMPTY": ""},
		map[string]string{
			"/h/.env":        "IN_ENV=" + valFirst + "\nEMPTY_IN_ENV=" + valFirst + "\nIN_BOTH=" + valFirst + "\n",
			"/h/.env.shared": "IN_BOTH=" + valLast + "\nONLY_LAST=" + valLast + "\n",
		}))
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"IN_ENV", valEnv, true},         // the environment wins
		{"EMPTY_IN_ENV", valFirst, true}, // an empty value is passed over
		{"IN_BOTH", valFirst, true},      // the first file listed wins
		{"ONLY_LAST", valLast, true},     // a missing optional file is skipped
		{"ONLY_EMPTY", "", true},         // set, but only empty
		{"NOWHERE", "", false},           // not set
		{"lower_case_ok", "", false},     // names are case-sensitive
		{"In_Env", "", false},            // no case folding
		{"IN_ENV_", "", false},           // no prefix matching
		{"ONLY_LAST", valLast, true},     // stable on a second lookup
	} {
		v, ok, err := s.Lookup(tc.name)
		if err != nil || v != tc.want || ok != tc.ok {
			t.Errorf("Lookup(%s) = %q, %v, %v; want %q, %v", tc.name, v, ok, err, tc.want, tc.ok)
		}
	}

	got, err := s.Expand("Bearer ${secret:IN_ENV}; $${secret:IN_ENV} $5 ${secret:ONLY_LAST}")
	if want := "Bearer " + valEnv + "; ${secret:IN_ENV} $5 " + valLast; err != nil || got != want {
		t.Errorf("Expand = %q, %v; want %q", got, err, want)
	}
	if got, err := s.Expand("no references"); err != nil || got != "no references" {
		t.Errorf("Expand(plain) = %q, %v", got, err)
	}

	// Errors name the secret and the sources, never a value.
	values := []string{valEnv, valFirst, valLast}
	for _, tc := range []struct{ in, name, reason string }{
		{"x ${secret:NOWHERE} ${secret:IN_ENV}", "NOWHERE", "is not set"},
		{"${secret:IN_ENV}${secret:ONLY_EMPTY}", "ONLY_EMPTY", "is empty"},
	} {
		_, err := s.Expand(tc.in)
		var se *SecretError
		if !errors.As(err, &se) || se.Name != tc.name || !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), `"`+tc.name+`"`) {
			t.Errorf("Expand(%q) error = %v", tc.in, err)
			continue
		}
		for _, v := range values {
			if strings.Contains(err.Error(), v) {
				t.Errorf("error holds a secret value: %v", err)
			}
		}
		if !strings.Contains(err.Error(), "/h/.env.local (optional, missing)") {
			t.Errorf("error does not list the sources: %v", err)
		}
	}
	if _, err := s.Expand("${secret:BAD"); err == nil || !strings.Contains(err.Error(), "not closed") {
		t.Errorf("malformed reference: %v", err)
	}
	if _, _, err := s.Lookup(valEnv); err == nil || strings.Contains(err.Error(), valEnv) {
		t.Errorf("Lookup of a non-name: %v", err)
	}
}

func TestSecretsPrefixAndNoEnv(t *testing.T) {
	env := map[string]string{"OPB_KEY": "prefixed-value", "KEY": "bare-value"}
	s := NewSecrets(&SecretsConfig{Env: true, Prefix: "OPB_"}, fakeOpts(env, nil))
	if v, ok, err := s.Lookup("KEY"); v != "prefixed-value" || !ok || err != nil {
		t.Errorf("prefixed Lookup = %q %v %v", v, ok, err)
	}
	_, err := s.Resolve("OTHER")
	if err == nil || !strings.Contains(err.Error(), "OPB_OTHER") {
		t.Errorf("error should name the variable looked for: %v", err)
	}
	s = NewSecrets(&SecretsConfig{Env: false}, fakeOpts(env, nil))
	if _, ok, _ := s.Lookup("KEY"); ok {
		t.Errorf("env: false still reads the environment")
	}
	if _, err := s.Resolve("KEY"); err == nil || !strings.Contains(err.Error(), "no sources") {
		t.Errorf("Resolve with no sources: %v", err)
	}
	s = NewSecrets(nil, fakeOpts(env, nil))
	if v, _, _ := s.Lookup("KEY"); v != "bare-value" {
		t.Errorf("nil config: Lookup = %q", v)
	}
}

func TestSecretsBrokenDotenv(t *testing.T) {
	cfg := &SecretsConfig{Env: true, Dotenv: []DotenvFile{
		{Path: ".env", Resolved: "/h/.env"},
		{Path: "required.env", Resolved: "/h/required.env"},
	}}
	s := NewSecrets(cfg, fakeOpts(map[string]string{"A": "from-env-value"}, map[string]string{
		"/h/.env": "GOOD=" + valFirst + "\nthis line holds " + valLast + " and no equals sign\n",
	}))
	// A broken source fails every lookup, even of a name the environment has.
	for _, name := range []string{"A", "GOOD"} {
		if _, _, err := s.Lookup(name); err == nil || !strings.Contains(err.Error(), "/h/.env:2:1") || strings.Contains(err.Error(), valLast) {
			t.Errorf("Lookup(%s): err = %v", name, err)
		}
	}
	ds := s.Check()
	expectFile := func(file string, line, col int, msg string) {
		t.Helper()
		for _, d := range ds {
			if d.File == file && d.Line == line && d.Column == col && d.Rule == RuleDotenv && strings.Contains(d.Message, msg) {
				return
			}
		}
		t.Errorf("missing %s:%d:%d %q; got\n%s", file, line, col, msg, render(ds))
	}
	expectFile("/h/.env", 2, 1, "expected NAME=value")
	expectFile("/h/required.env", 0, 0, "cannot read the dotenv file")
	for _, d := range ds {
		if strings.Contains(d.Message, valLast) || strings.Contains(d.Message, valFirst) {
			t.Errorf("diagnostic holds a value: %s", d.Message)
		}
	}
}

func TestCheckSecrets(t *testing.T) {
	h, ds := Parse("h.yaml", []byte(`mcpServers:
  m:
    command: x
    env: {T: "${secret:SET}", U: "${secret:UNSET}"}
connections:
  stripe: {authKind: api_token, secrets: {apiKey: STRIPE_API_KEY}}
`), "/h")
	expect(t, ds)
	s := NewSecrets(h.Secrets, fakeOpts(map[string]string{"SET": "a-value-here", "STRIPE_API_KEY": ""}, nil))
	ds = h.CheckSecrets(s)
	expect(t, ds,
		problem{4, 34, "/mcpServers/m/env/U", RuleSecretMissing, `secret "UNSET" is not set (looked in the environment variable UNSET)`},
		problem{6, 51, "/connections/stripe/secrets/apiKey", RuleSecretMissing, `secret "STRIPE_API_KEY" is empty`},
	)
	expect(t, h.CheckSecrets(s, "SET"))
}

func TestParseDotenv(t *testing.T) {
	src := "\xEF\xBB\xBF# comment\n" +
		"\n" +
		"PLAIN=value with spaces   \r\n" +
		"export EXPORTED=yes\n" +
		"  SPACED = around # a comment\n" +
		"HASH=a#b\n" +
		"SINGLE='lit $X \\n # not a comment'  # comment\n" +
		"DOUBLE=\"a\\nb\\t\\\"q\\\" \\$ \\\\ \\z\"\n" +
		"EMPTY=\n" +
		"EMPTY_QUOTED=\"\"\n" +
		"URL=https://example.com/?a=1&b=2\n" +
		"export=not-the-keyword\n"
	vals, errs := ParseDotenv(".env", []byte(src))
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	want := map[string]string{
		"PLAIN": "value with spaces", "EXPORTED": "yes", "SPACED": "around", "HASH": "a#b",
		"SINGLE": "lit $X \\n # not a comment", "DOUBLE": "a\nb\t\"q\" $ \\ \\z",
		"EMPTY": "", "EMPTY_QUOTED": "", "URL": "https://example.com/?a=1&b=2", "export": "not-the-keyword",
	}
	if len(vals) != len(want) {
		t.Errorf("got %d values, want %d: %q", len(vals), len(want), vals)
	}
	for k, v := range want {
		if vals[k] != v {
			t.Errorf("%s = %q, want %q", k, vals[k], v)
		}
	}

	bad := "OK=1\n" +
		"no equals " + valFirst + "\n" +
		"1BAD=x\n" +
		"Q=\"unterminated " + valFirst + "\n" +
		"S='unterminated\n" +
		"T=\"x\" trailing " + valFirst + "\n" +
		"OK=2\n" +
		"  export   E\n"
	vals, errs = ParseDotenv("/p/.env", []byte(bad))
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
		if strings.Contains(e.Error(), valFirst) || strings.Contains(e.Error(), "unterminated") {
			t.Errorf("error quotes the line: %v", e)
		}
	}
	wantErrs := []string{
		"/p/.env:2:1: expected NAME=value",
		`/p/.env:3:1: "1BAD" is not a variable name (^[A-Za-z_][A-Za-z0-9_]*$)`,
		"/p/.env:4:3: the double quote is not closed on this line (in the value of Q)",
		"/p/.env:5:3: the single quote is not closed on this line (in the value of S)",
		"/p/.env:6:7: unexpected text after the closing quote (in the value of T)",
		"/p/.env:7:1: OK is defined twice in this file (first on line 1)",
		"/p/.env:8:12: expected NAME=value",
	}
	if strings.Join(got, "\n") != strings.Join(wantErrs, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantErrs, "\n"))
	}
	if vals["OK"] != "1" {
		t.Errorf("OK = %q; the first definition is kept", vals["OK"])
	}
}

func TestRedactor(t *testing.T) {
	r := Redactor([]string{"abc", "s3cr3t-value", "s3cr3t-value-longer", `quo"te\slash`, "a b&c=d", ""})
	for in, want := range map[string]string{
		"token=s3cr3t-value-longer;":           "token=[redacted];",
		"s3cr3t-value and s3cr3t-value":        "[redacted] and [redacted]",
		`{"k":"quo\"te\\slash"}`:               `{"k":"[redacted]"}`,
		"quo\"te\\slash":                       "[redacted]",
		"https://x.example.com/?q=a+b%26c%3Dd": "https://x.example.com/?q=[redacted]",
		"short abc stays":                      "short abc stays",
		"nothing here":                         "nothing here",
	} {
		if got := r(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Redactor(nil)("x"); got != "x" {
		t.Errorf("empty redactor changed text: %q", got)
	}

	s := NewSecrets(nil, fakeOpts(map[string]string{"K": valEnv, "J": valFirst}, nil))
	if got := s.Redact("a " + valEnv + " b"); got != "a "+valEnv+" b" {
		t.Errorf("Redact before any lookup = %q", got)
	}
	if _, err := s.Expand("${secret:K}"); err != nil {
		t.Fatal(err)
	}
	if got := s.Redact("a " + valEnv + " b " + valFirst); got != "a [redacted] b "+valFirst {
		t.Errorf("Redact = %q", got)
	}
}

func TestSecretsNeverFormatted(t *testing.T) {
	s := NewSecrets(nil, fakeOpts(map[string]string{"K": valEnv}, nil))
	if _, _, err := s.Lookup("K"); err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("resolver", "s", s)
	for _, out := range []string{fmt.Sprintf("%v %+v %#v %s", s, s, s, s), fmt.Sprint(s), logged.String()} {
		if strings.Contains(out, valEnv) || !strings.Contains(out, "redacted") {
			t.Errorf("formatted Secrets: %s", out)
		}
	}
}

func TestYAMLColumnsAreBytes(t *testing.T) {
	// "é" is two bytes: the unknown key after it starts at byte column 8.
	_, ds := Parse("h.yaml", []byte("agents:\n  \"é\": {driver: x, \"ü\": 1}\nstores: {}\n"), "")
	expect(t, ds, problem{3, 1, "/stores", RuleUnknownKey, "stores"})
	_, ds = Parse("h.yaml", []byte("store: {\"é\": 1, x: 2}\n"), "")
	expect(t, ds,
		problem{1, 9, "/store/é", RuleUnknownKey, `"é"`},
		problem{1, 18, "/store/x", RuleUnknownKey, `"x"`},
	)
}

func TestMCPServerExpand(t *testing.T) {
	h, ds := Parse("h.yaml", []byte(`mcpServers:
  acme:
    url: "https://mcp.example.com/mcp?team=${secret:TEAM}"
    headers: {Authorization: "Bearer ${secret:TOKEN}"}
  m:
    command: x
    args: ["--key=${secret:TOKEN}", plain]
    env: {A: "${secret:TEAM}", B: b}
  broken:
    command: x
    env: {C: "${secret:UNSET}"}
secrets:
  declare:
    TOKEN: {mcpServers: [acme, m]}
    TEAM: {mcpServers: [acme, m]}
    UNSET: {mcpServers: [broken]}
`), "/h")
	expect(t, ds)
	sec := NewSecrets(nil, fakeOpts(map[string]string{"TOKEN": valEnv, "TEAM": "team-42"}, nil))
	acme, err := h.MCPServers["acme"].Expand(sec)
	if err != nil || acme.URL != "https://mcp.example.com/mcp?team=team-42" || acme.Headers["Authorization"] != "Bearer "+valEnv {
		t.Errorf("acme = %+v, %v", acme, err)
	}
	if h.MCPServers["acme"].Headers["Authorization"] != "Bearer ${secret:TOKEN}" {
		t.Errorf("Expand modified the harness")
	}
	m, err := h.MCPServers["m"].Expand(sec)
	if err != nil || m.Args[0] != "--key="+valEnv || m.Args[1] != "plain" || m.Env["A"] != "team-42" || m.Env["B"] != "b" {
		t.Errorf("m = %+v, %v", m, err)
	}
	_, err = h.MCPServers["broken"].Expand(sec)
	if err == nil || err.Error() != `env C of MCP server "broken": harness: secret "UNSET" is not set (looked in the environment variable UNSET)` {
		t.Errorf("broken: %v", err)
	}
}

// TestCommandPathWithBlank: a command with a blank that names a program
// file (a path with a space in it) is not flagged; the same path with an
// argument after it is, with the split shown.
func TestCommandPathWithBlank(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "My Tools", "server")
	if err := os.MkdirAll(filepath.Dir(prog), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		command, want string
	}{
		{prog, ""},
		{"My Tools/server", ""}, // relative to the harness directory
		{prog + " --stdio", fmt.Sprintf(`command: %q, args: ["--stdio"]`, prog)},
		{"My Tools/server --stdio", `command: "My Tools/server", args: ["--stdio"]`},
		{"node server.js", `command: "node", args: ["server.js"]`},
	} {
		src := fmt.Sprintf("mcpServers:\n  m:\n    command: %q\n", tc.command)
		_, ds := Parse("h.yaml", []byte(src), dir)
		var got []string
		for _, d := range ds {
			got = append(got, d.Message)
		}
		switch {
		case tc.want == "" && len(ds) != 0:
			t.Errorf("command %q: want no diagnostic, got %q", tc.command, got)
		case tc.want != "" && (len(ds) != 1 || ds[0].Severity != diag.Warning || ds[0].Pointer != "/mcpServers/m/command" || !strings.Contains(ds[0].Message, tc.want)):
			t.Errorf("command %q: want one warning with %q, got %q", tc.command, tc.want, got)
		}
	}
}

// TestPolicyDiagnostics: a condition that does not compile, a rule name
// given twice and a bad tool pattern are errors at their place; a valid
// policy is compiled.
func TestPolicyDiagnostics(t *testing.T) {
	src := "policy:\n  rules:\n    - {name: a, when: \"args.amount >\", effect: deny}\n    - {name: a, effect: deny}\n    - {name: b, tools: [\"[\"], effect: requireApproval}\n    - {name: c, when: \"1 + 2\", effect: deny}\n"
	h, ds := Parse("h.yaml", []byte(src), "")
	if h.Policy != nil {
		t.Fatal("a policy with errors was compiled")
	}
	want := map[int]string{3: "not a valid CEL expression", 4: "given twice", 5: "not a pattern", 6: "not a valid CEL expression"}
	for line, sub := range want {
		found := false
		for _, d := range ds {
			if d.Line == line && strings.Contains(d.Message, sub) {
				found = true
			}
		}
		if !found {
			t.Errorf("line %d: no diagnostic saying %q in %v", line, sub, ds)
		}
	}
	h, ds = Parse("h.yaml", []byte("policy:\n  rules: [{name: a, when: \"args.amount > 10000\", effect: requireApproval}]\n"), "")
	if len(ds) != 0 || h.Policy.Len() != 1 {
		t.Fatalf("valid policy: %v, %d rules", ds, h.Policy.Len())
	}
	// Rules that would loosen or make no sense: deciders on a deny, a gate
	// rule about tools, a gate rule that denies.
	for src, sub := range map[string]string{
		"policy:\n  rules: [{name: a, effect: deny, deciders: {groups: [x]}}]\n":           "a deny rule refuses the call",
		"policy:\n  rules: [{name: a, effect: deny, approvals: 2}]\n":                      "a deny rule refuses the call",
		"policy:\n  rules: [{name: a, tools: [x], gates: [g], deciders: {groups: [x]}}]\n": "a rule about gates",
		"policy:\n  rules: [{name: a, gates: [g], effect: deny}]\n":                        "a rule about gates",
		"policy:\n  rules: [{name: a, effect: requireApproval, approvals: 1.5}]\n":         "a whole number from 1 to 16",
	} {
		h, ds := Parse("h.yaml", []byte(src), "")
		if h.Policy != nil || len(ds) == 0 || !strings.Contains(render(ds), sub) {
			t.Errorf("%q: policy %v, diagnostics %s; want an error saying %q", src, h.Policy, render(ds), sub)
		}
	}
	h, ds = Parse("h.yaml", []byte("policy:\n  rules: [{name: g, gates: [review], deciders: {subjects: [carol]}, approvals: 2}, {name: c, connectors: [stripe], effect: requireApproval, selfApproval: true}]\n"), "")
	if len(ds) != 0 || h.Policy.Len() != 2 {
		t.Fatalf("valid gate and connector rules: %s, %d rules", render(ds), h.Policy.Len())
	}
}
