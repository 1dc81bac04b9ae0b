package report

import (
	"github.com/openplaybook/openplaybook/harness"
)

// checkRules describes the rules `openplaybook check` adds to those of
// [Catalog]: registry resolution and preflight (packages preflight and
// host, docs/check.md), drift (package drift, docs/drift.md) and the
// harness file's reader (package harness, docs/check.md). They are
// written out here, not imported, so that package report does not depend
// on the runtime; TestCheckRulesComplete checks this list against the
// rule ids those packages' sources define.
var checkRules = []Rule{
	{"registry-resolve", "every allowedTools name is a tool the runtime's registry knows and the document embeds"},

	{"drift-name", "an embedded tool definition has the registry's name"},
	{"drift-source", "an embedded tool definition has the registry's source"},
	{"drift-description", "an embedded tool definition has the registry's description"},
	{"drift-permissions", "an embedded tool definition lists the registry's permissions"},
	{"drift-data-scope-writes", "an embedded tool definition lists the registry's data scope writes"},
	{"drift-data-scope-resources", "an embedded tool definition lists the registry's data scope resources"},
	{"drift-requires-approval", "an embedded tool definition has the registry's requiresApproval"},
	{"drift-risk-class", "an embedded tool definition has the registry's riskClass"},
	{"drift-side-effecting", "an embedded tool definition has the registry's sideEffecting"},
	{"drift-connector-type", "an embedded tool definition has the registry's connectorType"},
	{"drift-scope", "an embedded tool definition has the registry's scope"},
	{"drift-harness-schema", "an embedded tool definition has the registry's harness input and output schemas"},
	{"drift-input-schema", "an embedded tool definition's inputSchema accepts what the registry's does"},
	{"drift-output-schema", "an embedded tool definition's outputSchema allows what the registry's tool returns"},

	{"preflight-secret", "every secret in requires.secrets resolves to a non-empty value"},
	{"preflight-connection", "every connection in requires.connections is bound in the harness and usable"},
	{"preflight-connection-unused", "a harness connection binds nothing its connector never uses"},
	{"preflight-connection-vault", "an OAuth connection's refreshed tokens have a credential vault to live in"},
	{"preflight-connection-scope", "a harness connection's scopes cover the permissions of the connector tools the document embeds"},
	{"preflight-mcp-server", "every server in requires.mcpServers is bound in the harness and answers"},
	{"preflight-mcp-tool", "every name in a server's toolNames is a tool the live server lists"},
	{"preflight-mcp-tool-name", "every tool a server lists can be named mcp.<server>.<tool>"},
	{"preflight-agent", "every step's agent has a binding in the harness"},
	{"preflight-transcript", "every step id a transcript records calls for is an agent step of the playbook"},
	{"preflight-model", "every model binding a step uses reaches its API, which accepts the key and knows the model"},
	{"preflight-registry", "no two sources of the registry claim the same tool name"},
	{"preflight-store", "the harness's store seed and credential vault keys can be used"},

	{harness.RuleSyntax, "the harness file is well-formed YAML or JSON"},
	{harness.RuleLimit, "the harness file is within the size and depth limits"},
	{harness.RuleYAMLFeature, "the harness file uses no anchors, aliases, tags, directives or other documents"},
	{harness.RuleDuplicateKey, "no map of the harness file has a key twice"},
	{harness.RuleUnknownKey, "every key of the harness file is one its format defines"},
	{harness.RuleType, "every value of the harness file has the type its format gives it"},
	{harness.RuleRequired, "every required key of the harness file is present"},
	{harness.RuleName, "every name in the harness file is well-formed"},
	{harness.RuleValue, "every value of the harness file is one its format allows"},
	{harness.RuleTransport, "every MCP server of the harness file has exactly one transport"},
	{harness.RuleCredential, "the harness file holds no literal credential"},
	{harness.RuleSecretRef, "every ${...} reference in the harness file is well-formed and where references are expanded"},
	{harness.RuleDuplicate, "no scope or dotenv file is listed twice"},
	{harness.RuleDotenv, "every dotenv file the harness names can be read and parses"},
	{harness.RuleSecretMissing, "every secret the harness uses is set and not empty"},
	{harness.RuleSecretBinding, "every secret is used only by the destinations it is declared for"},
}

// AllRules returns every rule id openplaybook can report: those of
// [Catalog] (the reader's and the validator's, in that order), then
// "internal" (openplaybook itself failed), then the rules of
// `openplaybook check`. It is the default
// rule list of the sarif format, so a rule's ruleIndex does not depend on
// which command wrote the log or on what it found.
func AllRules() []Rule {
	rules := append(Catalog(), Rule{"internal", "openplaybook itself did not fail while checking the document"})
	return append(rules, checkRules...)
}

// ruleDoc is what the documentation says of one rule, cut from its
// section in docs/*.md by `go test ./report -run TestRuleDocs -update`
// into ruledocs_gen.go.
type ruleDoc struct {
	// Page is the documentation file, relative to the repository root
	// ("docs/rules.md"), and Anchor the GitHub anchor of the rule's
	// heading on it.
	Page, Anchor string
	// Full is the section's first paragraph (Markdown), less a
	// paragraph that only gives the severity.
	Full string
	// Fix is the paragraph that starts "Fix:" or "What to do:", if any.
	Fix string
	// Level is the SARIF level ("error", "warning", "note") of a rule
	// whose documentation gives one severity, "" for one whose severity
	// depends on the case (most drift rules).
	Level string
}
