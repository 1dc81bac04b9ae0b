package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/openplaybook/openplaybook/diag"
)

const schemaFile = "../schema/harness.schema.json"

// noLoader refuses every URL: the harness schema resolves references
// within itself only, and compiling it never reads a file or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("refusing to load %q", url)
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := doc.(map[string]any)["$id"].(string)
	if id != "https://openplaybook.dev/schema/harness.schema.json" {
		t.Errorf("$id = %q", id)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	c.AssertFormat()
	if err := c.AddResource(id, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// instance reads a harness file's text into the JSON data model (as an
// editor's YAML language server does) for the schema. It fails the test
// on a syntax-level problem, which the schema never sees.
func instance(t *testing.T, name string, src []byte) any {
	t.Helper()
	r := &reader{file: name, src: src}
	root := r.read(syntaxOf(name, src))
	if root == nil {
		t.Fatalf("%s: not readable:\n%s", name, render(r.ds))
	}
	return root.value()
}

func TestExampleHarnessesMatchSchema(t *testing.T) {
	s := compileSchema(t)
	files, _ := filepath.Glob("../examples/harness*.yaml")
	json, _ := filepath.Glob("../examples/harness*.json")
	files = append(files, json...)
	if len(files) == 0 {
		t.Fatal("no example harness")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(instance(t, f, src)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// structural are the reader's rules the schema encodes: where the reader
// reports one of them, the schema must reject the file too.
var structural = []string{RuleUnknownKey, RuleType, RuleRequired, RuleName, RuleTransport, RuleSecretRef, RuleValue}

// TestSchemaAgreesWithReader: on each case the Go reader and the schema
// agree: valid cases are accepted by both; each invalid case gets a
// structural error from the reader and a rejection from the schema.
func TestSchemaAgreesWithReader(t *testing.T) {
	s := compileSchema(t)
	valid := map[string]string{
		"empty":         `{}`,
		"stdio":         "mcpServers:\n  m:\n    command: node\n    args: [server.js, \"--token=${secret:T}\", \"$${literal}\", \"$5\"]\n    env: {A: \"1\", B: \"${secret:B}\"}\n    cwd: ..\n    timeout: 1m30s\n",
		"http":          "mcpServers:\n  acme:\n    url: https://mcp.example.com/mcp\n    headers: {Authorization: \"Bearer ${secret:ACME_MCP_TOKEN}\"}\n",
		"connections":   "connections:\n  stripe: {authKind: api_token, secrets: {apiKey: K}, baseURL: \"http://127.0.0.1:12111\"}\n  gmail: {authKind: oauth, secrets: {accessToken: T, refreshToken: R}, scopes: [a]}\n  plaid: {authKind: aggregator_link, secrets: {accessToken: T2, clientId: C, clientSecret: S}}\n",
		"secrets":       "secrets:\n  env: false\n  prefix: OPB_\n  dotenv: [.env, {path: .env.local, optional: true}]\n",
		"declare":       "mcpServers:\n  m: {command: x, env: {K: \"${secret:K}\"}}\nconnections:\n  stripe: {authKind: api_token, secrets: {apiKey: K}}\nsecrets:\n  declare:\n    K: {mcpServers: [m], connections: [stripe]}\n",
		"agents":        "agents:\n  lou: {driver: transcript, transcript: t/lou.json}\n  rita: {driver: openai, model: m, apiKeySecret: OPENAI_API_KEY, extra: {a: [1, true, null]}}\n",
		"store":         "store: {sqlite: x.db}\nruntime: {approvalExpiry: 90m, maxToolCalls: 5}\n",
		"oidc":          "serve:\n  oidc:\n    issuer: https://id.example.com/\n    clientID: console\n    clientSecretSecret: OIDC_SECRET\n    audience: [api]\n    scopes: [openid, email]\n    claims: {subject: sub, groups: roles}\n    operators: {groups: [ops]}\n    deciders: {subjects: [alice], groups: [finance]}\n    selfApproval: false\n    operatorToken: false\n",
		"policy":        "policy:\n  rules:\n    - {name: big-refunds, tools: [\"stripe.*\", charge.refund], when: \"args.amount > 10000\", effect: requireApproval, reason: two people look}\n    - {name: no-test-money, riskClasses: [money_movement], steps: [pay], when: \"input.env == 'test'\", effect: deny}\n",
		"webhooks":      "serve:\n  webhooks:\n    - {name: ops, url: \"https://hooks.example.com/op?x=1\", signingKeySecret: OPS_KEY, events: [approval.requested, gate.waiting], includeArguments: false}\n    - {name: local, url: \"http://127.0.0.1:9000/hook\", signingKeySecret: K, format: json}\n    - {name: approvers, format: slack, urlSecret: SLACK_WEBHOOK_URL}\n",
		"oidc loopback": "serve: {oidc: {issuer: \"http://127.0.0.1:4444\", clientID: c}}\n",
		"policy who":    "policy:\n  rules:\n    - {name: two, tools: [charge.refund], connectors: [stripe], effect: requireApproval, deciders: {groups: [finance]}, approvals: 2, selfApproval: false}\n    - {name: legal, gates: [review], deciders: {subjects: [carol]}}\n",
		"oidc agents":   "serve: {oidc: {issuer: \"https://id.example.com\", clientID: c, agents: {claim: azp}}}\n",
		"json":          `{"$schema": "../schema/harness.schema.json", "mcpServers": {"m": {"command": "x"}}}`,
		"postgres":      "store: {postgres: {url: \"${secret:OPENPLAYBOOK_DATABASE_URL}\"}, seed: c.json}\n",
	}
	invalid := map[string]string{
		"unknown top-level key":    "stores: {}\n",
		"case-variant key":         "MCPServers: {}\n",
		"unknown server key":       "mcpServers:\n  m: {command: x, arg: [y]}\n",
		"unknown connection key":   "connections:\n  gmail: {authKind: oauth, secrets: {accessToken: T}, scope: [a]}\n",
		"unknown provider":         "connections:\n  strpe: {authKind: api_token, secrets: {apiKey: K}}\n",
		"unknown role":             "connections:\n  stripe: {authKind: api_token, secrets: {apiKey: K, token: T}}\n",
		"wrong type: args":         "mcpServers:\n  m: {command: x, args: y}\n",
		"wrong type: arg number":   "mcpServers:\n  m: {command: x, args: [8080]}\n",
		"wrong type: env":          "mcpServers:\n  m: {command: x, env: [A=1]}\n",
		"wrong type: env value":    "mcpServers:\n  m: {command: x, env: {A: 1}}\n",
		"wrong type: section":      "agents: []\n",
		"wrong type: server":       "mcpServers:\n  m: node server.js\n",
		"wrong type: env flag":     "secrets: {env: \"yes\"}\n",
		"wrong type: maxToolCalls": "runtime: {maxToolCalls: \"5\"}\n",
		"both command and url":     "mcpServers:\n  m: {command: x, url: \"https://x.example.com\"}\n",
		"neither command nor url":  "mcpServers:\n  m: {timeout: 5s}\n",
		"args on an HTTP server":   "mcpServers:\n  m: {url: \"https://x.example.com\", args: [a]}\n",
		"headers on stdio":         "mcpServers:\n  m: {command: x, headers: {A: b}}\n",
		"bad server name":          "mcpServers:\n  Acme: {command: x}\n",
		"server name with a dot":   "mcpServers:\n  acme.search: {command: x}\n",
		"server name a URL":        "mcpServers:\n  \"https://x\": {command: x}\n",
		"bad env name":             "mcpServers:\n  m: {command: x, env: {A-B: x}}\n",
		"bad header name":          "mcpServers:\n  m: {url: \"https://x.example.com\", headers: {\"A B\": x}}\n",
		"url not http":             "mcpServers:\n  m: {url: \"ftp://x.example.com\"}\n",
		"relative url":             "mcpServers:\n  m: {url: /mcp}\n",
		"malformed reference":      "mcpServers:\n  m: {command: x, args: [\"${secrets:T}\"]}\n",
		"bare reference":           "mcpServers:\n  m: {command: x, env: {A: \"${HOME}\"}}\n",
		"reference in command":     "mcpServers:\n  m: {command: \"${secret:BIN}\"}\n",
		"empty command":            "mcpServers:\n  m: {command: \"\"}\n",
		"bad duration":             "mcpServers:\n  m: {command: x, timeout: 10}\n",
		"duration unit":            "runtime: {approvalExpiry: 1d}\n",
		"zero duration":            "runtime: {approvalExpiry: 0s}\n",
		"maxToolCalls zero":        "runtime: {maxToolCalls: 0}\n",
		"authKind missing":         "connections:\n  gmail: {secrets: {accessToken: T}}\n",
		"authKind invalid":         "connections:\n  gmail: {authKind: oauth2, secrets: {accessToken: T}}\n",
		"secrets missing":          "connections:\n  gmail: {authKind: oauth}\n",
		"secret name invalid":      "connections:\n  stripe: {authKind: api_token, secrets: {apiKey: \"my key\"}}\n",
		"dotenv entry":             "secrets: {dotenv: [{optional: true}]}\n",
		"dotenv entry type":        "secrets: {dotenv: [3]}\n",
		"bad prefix":               "secrets: {prefix: \"A-\"}\n",
		"declare: unknown key":     "secrets:\n  declare: {K: {for: [mcp:m]}}\n",
		"declare: bad name":        "secrets:\n  declare: {\"A-B\": {agents: [x]}}\n",
		"declare: list":            "secrets:\n  declare: {K: [x]}\n",
		"declare: empty":           "secrets:\n  declare: {K: {}}\n",
		"agent without driver":     "agents:\n  lou: {transcript: x}\n",
		"agent driver type":        "agents:\n  lou: {driver: 1}\n",
		"agent apiKeySecret":       "agents:\n  lou: {driver: openai, apiKeySecret: \"not a name\"}\n",
		"store path empty":         "store: {sqlite: \"\"}\n",
		"policy allow":             "policy:\n  rules: [{name: a, effect: allow}]\n",
		"policy no name":           "policy:\n  rules: [{effect: deny}]\n",
		"policy no effect":         "policy:\n  rules: [{name: a}]\n",
		"policy approvals zero":    "policy:\n  rules: [{name: a, effect: requireApproval, approvals: 0}]\n",
		"policy approvals 17":      "policy:\n  rules: [{name: a, effect: requireApproval, approvals: 17}]\n",
		"policy approvals string":  "policy:\n  rules: [{name: a, effect: requireApproval, approvals: \"2\"}]\n",
		"policy deciders empty":    "policy:\n  rules: [{name: a, effect: requireApproval, deciders: {}}]\n",
		"oidc agents claim empty":  "serve: {oidc: {issuer: \"https://id.example.com\", clientID: c, agents: {claim: \"\"}}}\n",
		"policy unknown key":       "policy:\n  rules: [{name: a, effect: deny, unless: x}]\n",
		"policy rules a map":       "policy:\n  rules: {a: {effect: deny}}\n",
		"webhook without name":     "serve: {webhooks: [{url: \"https://h.example.com\", signingKeySecret: K}]}\n",
		"webhook without key":      "serve: {webhooks: [{name: a, url: \"https://h.example.com\"}]}\n",
		"webhook http remote":      "serve: {webhooks: [{name: a, url: \"http://h.example.com/x\", signingKeySecret: K}]}\n",
		"webhook url and secret":   "serve: {webhooks: [{name: a, url: \"https://h.example.com\", urlSecret: U, signingKeySecret: K}]}\n",
		"webhook no url":           "serve: {webhooks: [{name: a, signingKeySecret: K}]}\n",
		"webhook slack url":        "serve: {webhooks: [{name: a, format: slack, url: \"https://hooks.slack.com/services/T/B/x\"}]}\n",
		"webhook slack signed":     "serve: {webhooks: [{name: a, format: slack, urlSecret: U, signingKeySecret: K}]}\n",
		"webhook bad event":        "serve: {webhooks: [{name: a, urlSecret: U, signingKeySecret: K, events: [call.started]}]}\n",
		"webhook bad name":         "serve: {webhooks: [{name: Ops, urlSecret: U, signingKeySecret: K}]}\n",
		"webhook key literal":      "serve: {webhooks: [{name: a, urlSecret: U, signingKeySecret: \"whsec 123\"}]}\n",
		"webhook format":           "serve: {webhooks: [{name: a, urlSecret: U, signingKeySecret: K, format: xml}]}\n",
		"webhook user in url":      "serve: {webhooks: [{name: a, url: \"https://u:p@h.example.com\", signingKeySecret: K}]}\n",
		"webhooks a map":           "serve: {webhooks: {a: {urlSecret: U}}}\n",
		"oidc without issuer":      "serve: {oidc: {clientID: c}}\n",
		"oidc http issuer":         "serve: {oidc: {issuer: \"http://id.example.com\", clientID: c}}\n",
		"oidc unknown key":         "serve: {oidc: {issuer: \"https://id.example.com\", clientID: c, client: d}}\n",
		"oidc scopes no openid":    "serve: {oidc: {issuer: \"https://id.example.com\", clientID: c, scopes: [email]}}\n",
		"oidc deciders empty":      "serve: {oidc: {issuer: \"https://id.example.com\", clientID: c, deciders: {subjects: []}}}\n",
		"oidc secret literal":      "serve: {oidc: {issuer: \"https://id.example.com\", clientID: c, clientSecretSecret: \"s3cr3t value\"}}\n",
		"oidc selfApproval string": "serve: {oidc: {issuer: \"https://id.example.com\", clientID: c, selfApproval: \"no\"}}\n",
		"both engines":             "store: {sqlite: x.db, postgres: {url: \"${secret:U}\"}}\n",
		"postgres without url":     "store: {postgres: {}}\n",
		"postgres url empty":       "store: {postgres: {url: \"\"}}\n",
		"postgres unknown key":     "store: {postgres: {url: \"${secret:U}\", pool: 4}}\n",
		"postgres as a string":     "store: {postgres: \"${secret:U}\"}\n",
		"JSON unknown key":         `{"mcpServers": {"m": {"command": "x", "Args": []}}}`,
	}
	for name, src := range valid {
		file := "h.yaml"
		if strings.HasPrefix(src, "{") {
			file = "h.json"
		}
		_, ds := Parse(file, []byte(src), "/h")
		if n := diag.Count(ds, diag.Error); n > 0 {
			t.Errorf("valid %q: reader reports:\n%s", name, render(ds))
		}
		if err := s.Validate(instance(t, file, []byte(src))); err != nil {
			t.Errorf("valid %q: schema rejects: %v", name, err)
		}
	}
	for name, src := range invalid {
		file := "h.yaml"
		if strings.HasPrefix(src, "{") {
			file = "h.json"
		}
		_, ds := Parse(file, []byte(src), "/h")
		ok := false
		for _, d := range ds {
			if d.Severity == diag.Error && slices.Contains(structural, d.Rule) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("invalid %q: reader reports no structural error:\n%s", name, render(ds))
		}
		if err := s.Validate(instance(t, file, []byte(src))); err == nil {
			t.Errorf("invalid %q: schema accepts it", name)
		}
	}
}
