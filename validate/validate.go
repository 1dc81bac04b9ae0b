// Package validate checks an OpenPlaybook document read by package
// [playbook] against every structural and consistency rule of
// docs/format.md.
//
// Each rule is a type in its own file (rule_<name>.go) with a stable
// kebab-case name; [Rules] lists them explicitly. docs/rules.md documents
// every rule with a failing example, its message and the fix.
package validate

import (
	"fmt"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/syntax"
)

// Rule is one named check.
type Rule interface {
	// Name is the stable kebab-case id shown in brackets after a message.
	Name() string
	// Description is a one-line summary for docs and --help.
	Description() string
	// Check reports what it finds through c.
	Check(c *Context)
}

// Options configures [Document]. A nil *Options means defaults.
type Options struct {
	// Registry, when set, reports whether the runtime's tool registry
	// knows a tool name; allowedTools entries it knows resolve even
	// without an embedded definition. Nil means no registry: names
	// resolve against the embedded tools only. (A run still needs the
	// definition embedded: package preflight reports such a name, rule
	// registry-resolve, for check and run alike.)
	Registry func(name string) bool
}

// Context is what a rule sees: the document and a way to report.
type Context struct {
	Doc  *playbook.Document
	Opts *Options

	rule    string
	diags   []diag.Diagnostic
	schemas []embeddedSchema // embeddedSchemas(Doc), once
	gotSch  bool
}

// embedded returns the document's embedded schemas, found once for all
// the rules that read them.
func (c *Context) embedded() []embeddedSchema {
	if !c.gotSch {
		c.schemas, c.gotSch = embeddedSchemas(c.Doc), true
	}
	return c.schemas
}

// Errorf reports an error at node n.
func (c *Context) Errorf(n *syntax.Node, format string, args ...any) {
	c.report(n, diag.Error, format, args...)
}

// Warnf reports a warning at node n.
func (c *Context) Warnf(n *syntax.Node, format string, args ...any) {
	c.report(n, diag.Warning, format, args...)
}

// Infof reports advice at node n.
func (c *Context) Infof(n *syntax.Node, format string, args ...any) {
	c.report(n, diag.Info, format, args...)
}

// ErrorAtName reports an error at the name of member name of object obj
// (falling back to obj when there is no such member), with the pointer
// of the member's value. It suits problems with a member's presence.
func (c *Context) ErrorAtName(obj *syntax.Node, name string, format string, args ...any) {
	c.atName(obj, name, diag.Error, format, args...)
}

// WarnAtName is [Context.ErrorAtName] for a warning.
func (c *Context) WarnAtName(obj *syntax.Node, name string, format string, args ...any) {
	c.atName(obj, name, diag.Warning, format, args...)
}

func (c *Context) atName(obj *syntax.Node, name string, sev diag.Severity, format string, args ...any) {
	for k, v := range obj.Members() {
		if k == name {
			c.diags = append(c.diags, c.Doc.At(v.NameOffset(), v.Pointer(), sev, c.rule, format, args...))
			return
		}
	}
	c.report(obj, sev, format, args...)
}

func (c *Context) report(n *syntax.Node, sev diag.Severity, format string, args ...any) {
	c.diags = append(c.diags, c.Doc.Diag(n, sev, c.rule, format, args...))
}

// Rules returns every rule, in the order they run.
func Rules() []Rule {
	return []Rule{
		ruleRequired{},
		ruleEnum{},
		ruleVersion{},
		ruleManifestID{},
		ruleManifestVersion{},
		ruleManifestConnectorsUnique{},
		ruleStepID{},
		ruleStepIDUnique{},
		ruleStepMembers{},
		ruleStepRef{},
		ruleUnreachableStep{},
		ruleToolName{},
		ruleToolNameUnique{},
		ruleToolNameReserved{},
		ruleAllowedToolsForm{},
		ruleAllowedToolsResolve{},
		ruleAllowedToolsDuplicate{},
		ruleMCPSource{},
		ruleMCPServerName{},
		ruleMCPToolNames{},
		ruleMCPCapabilitiesReserved{},
		ruleConnectorType{},
		ruleConnectionsMatch{},
		ruleConnectionCapabilities{},
		ruleReadTool{},
		ruleSideEffectWrites{},
		ruleSecretMembers{},
		ruleCredential{},
		ruleJSONSchema{},
		ruleInputSchemaShape{},
		ruleSchemaPatternAnchor{},
		ruleSchemaKeywordTypo{},
		ruleSchemaAddress{},
		ruleUnusedTool{},
	}
}

// Document runs every rule over doc and returns what they found, sorted by
// position. It does not repeat the reader's diagnostics ([playbook.Read]
// returns those). A rule that panics is a bug; Document turns the panic
// into an error diagnostic naming the rule rather than crashing.
func Document(doc *playbook.Document, opts *Options) []diag.Diagnostic {
	if opts == nil {
		opts = &Options{}
	}
	if doc.Root == nil {
		return nil
	}
	c := &Context{Doc: doc, Opts: opts}
	for _, r := range Rules() {
		c.rule = r.Name()
		run(c, r)
	}
	diag.Sort(c.diags)
	return c.diags
}

func run(c *Context, r Rule) {
	defer func() {
		if p := recover(); p != nil {
			c.diags = append(c.diags, c.Doc.At(0, "", diag.Error, "internal",
				"rule %q failed: %v; this is a bug in openplaybook, please report it", r.Name(), fmt.Sprint(p)))
		}
	}()
	r.Check(c)
}

// AllRuleNames returns the id of every diagnostic openplaybook's reader and
// validator can give: the reader's (syntax and model) and then [Rules].
func AllRuleNames() []string {
	names := []string{
		syntax.RuleSyntax, syntax.RuleDuplicateMember, syntax.RuleInvalidUTF8,
		syntax.RuleByteOrderMark, syntax.RuleComment, syntax.RuleTrailingComma,
		syntax.RuleTrailingData, syntax.RuleNonFinite, syntax.RuleLimit,
		playbook.RuleType, playbook.RuleUnknownMember, playbook.RuleMemberCase,
	}
	for _, r := range Rules() {
		names = append(names, r.Name())
	}
	return names
}
