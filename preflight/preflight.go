// Package preflight checks documents against a connected harness
// ([host.Host]): what `openplaybook check` does and what `run` does before
// anything executes.
//
// Spec, "The requires declaration": the requires block "is the
// machine-readable statement of what a harness must satisfy before the
// playbook can run"; spec, "Embedded tool definitions": "A runtime
// importing a document checks the embedded definitions against its own
// registry and flags drift". Three kinds of diagnostics come out, each
// positioned in the document (or the harness file) like validate's:
//
//   - resolution (rule registry-resolve): every allowedTools name is a tool
//     this runtime can call;
//   - drift (rules drift-*, package drift): each embedded definition
//     compared with the registry's;
//   - preflight (rules preflight-*): connections, MCP servers and secrets
//     the document requires are there and work; the agents' drivers can be
//     built, the transcripts they replay fit the document, and a model
//     agent's API answers and knows its model.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/drift"
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/drivers"
	"github.com/openplaybook/openplaybook/driver/transcript"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/internal/suggest"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/syntax"
)

// Rule ids of this package; docs/check.md documents each.
const (
	RuleResolve       = "registry-resolve"
	RuleSecret        = "preflight-secret"
	RuleConnection    = "preflight-connection"
	RuleMCPServer     = "preflight-mcp-server"
	RuleMCPTool       = "preflight-mcp-tool"
	RuleMCPToolName   = "preflight-mcp-tool-name"
	RuleAgent         = "preflight-agent"
	RuleTranscript    = "preflight-transcript" // see [Transcript]
	RuleModel         = "preflight-model"
	RuleRegistryClash = host.RuleRegistryClash
	RuleStore         = host.RuleStore
)

// Check returns the resolution, drift and preflight diagnostics of one
// document against the host, positioned in the document. It does not
// repeat what validate reports.
func Check(ctx context.Context, h *host.Host, doc *playbook.Document) []diag.Diagnostic {
	c := &checker{env: h, doc: doc, missingSecrets: map[string]bool{}, transcripts: map[string]bool{}}
	c.resolve()
	c.drift()
	c.secrets()
	c.connections(ctx)
	c.scopes()
	c.mcpServers()
	c.agents(ctx)
	diag.Sort(c.diags)
	return c.diags
}

type checker struct {
	env   *host.Host
	doc   *playbook.Document
	diags []diag.Diagnostic
	// missingSecrets are the secrets already reported as not resolving,
	// so a secret that is both named by the document and the credential
	// of a connection is reported once.
	missingSecrets map[string]bool
	// transcripts are the transcript files already checked (two agents
	// may replay one file).
	transcripts map[string]bool
}

func (c *checker) errorf(n *syntax.Node, rule, format string, args ...any) {
	c.diags = append(c.diags, c.doc.Diag(n, diag.Error, rule, format, args...))
}

// resolve: every well-formed allowedTools name is in the registry and has
// an embedded definition. A name of an MCP server that could not be
// reached is left to that server's preflight error.
//
// validate, given the registry, takes a registry tool for resolved
// (docs/format.md); but a run checks every call against the definition
// the document embeds (its inputSchema, its requiresApproval, the digest
// an approval is bound to), and refuses a call to a tool the document does
// not define. Saying so here, where check and run both look, gives them
// one verdict, before anything runs.
func (c *checker) resolve() {
	reported := map[string]bool{}
	for _, s := range c.doc.Steps {
		if s.AllowedTools == nil {
			continue
		}
		for _, a := range s.AllowedTools.Items {
			name := a.Value
			if playbook.ToolNameProblem(name) != "" || reported[name] {
				continue
			}
			if c.env.Registry.Has(name) {
				if c.doc.ToolNamed(name) == nil {
					reported[name] = true
					c.errorf(a.Node, RuleResolve, "tool %q in %s has no embedded definition in the document's \"tools\", so a run would refuse every call to it; the registry has it (%s): openplaybook pin --write embeds its definition",
						name, stepName(s), registryOrigin(c.env, name))
				}
				continue
			}
			if server, _, ok := playbook.MCPParts(name); ok && c.env.Servers[server] == nil {
				continue
			}
			reported[name] = true
			c.errorf(a.Node, RuleResolve, "tool %q is not in this runtime's registry (%s), so a run would refuse every call to it%s",
				name, c.env.Describe(), suggest.Phrase(name, c.env.Registry.Names()))
		}
	}
}

// stepName names a step in messages: step "id", or "a step" without one.
func stepName(s *playbook.Step) string {
	if s.ID != nil {
		return fmt.Sprintf("step %q", s.ID.Value)
	}
	return "a step"
}

// registryOrigin says where the registry's definition of name comes from:
// "builtin", "connector stripe", "mcp server memory".
func registryOrigin(h *host.Host, name string) string {
	e, _ := h.Registry.Lookup(name)
	return e.Origin.String()
}

// drift compares every embedded definition that the registry also has.
func (c *checker) drift() {
	for _, t := range c.doc.Tools {
		if t.Name == nil {
			continue
		}
		entry, ok := c.env.Registry.Lookup(t.Name.Value)
		if !ok {
			continue
		}
		for _, f := range drift.Compare(t.Definition(c.doc.Source), entry.Definition) {
			n := t.Node
			if m := t.Node.Member(f.Field); m != nil {
				n = m
				if f.Path != "" {
					n = descend(m, f.Path)
				}
			}
			c.diags = append(c.diags, c.doc.Diag(n, f.Severity, f.Rule, "%s (registry: %s)", f.Message, entry.Origin))
		}
	}
}

// descend follows a JSON Pointer from n as far as the tree has it.
func descend(n *syntax.Node, ptr string) *syntax.Node {
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		var next *syntax.Node
		switch n.Kind {
		case syntax.Object:
			next = n.Member(tok)
		case syntax.Array:
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err == nil && i >= 0 && i < n.Len() {
				next = n.Child(i)
			}
		}
		if next == nil {
			return n
		}
		n = next
	}
	return n
}

// secrets: every secret the document names resolves to a non-empty value.
func (c *checker) secrets() {
	if c.doc.Requires == nil {
		return
	}
	for _, s := range c.doc.Requires.Secrets {
		if s.Name == nil {
			continue
		}
		if _, err := c.env.Secrets.Resolve(s.Name.Value); err != nil {
			c.missingSecrets[s.Name.Value] = true
			c.errorf(s.Name.Node, RuleSecret, "secret %q does not resolve: %s; set it where the harness's secrets section looks (see docs/harness.md)", s.Name.Value, secretReason(err))
		}
	}
}

func secretReason(err error) string {
	if se, ok := err.(*harness.SecretError); ok {
		return se.Reason
	}
	return err.Error()
}

// connections: every connection the document requires is bound, with the
// declared authKind, the declared scopes granted and its credential
// resolving; the connector accepts it (one preflight request per host).
func (c *checker) connections(ctx context.Context) {
	if c.doc.Requires == nil {
		return
	}
	for _, x := range c.doc.Requires.Connections {
		if x.Provider == nil {
			continue
		}
		p := x.Provider.Value
		bound := c.env.Harness.Connections[p]
		if bound == nil {
			c.errorf(x.Node, RuleConnection, "the harness binds no %q connection; add connections.%s with authKind and secrets to %s", p, p, c.env.Harness.Path)
			continue
		}
		if x.AuthKind != nil && x.AuthKind.Value != bound.AuthKind {
			c.errorf(x.AuthKind.Node, RuleConnection, "the document declares authKind %q for %q but the harness binds %q (%s:%d)", x.AuthKind.Value, p, bound.AuthKind, c.env.Harness.Path, bound.Pos.Line)
		}
		if x.Scopes != nil {
			var missing []string
			for _, s := range x.Scopes.Items {
				if !slices.Contains(bound.Scopes, s.Value) {
					missing = append(missing, fmt.Sprintf("%q", s.Value))
				}
			}
			if len(missing) > 0 {
				c.errorf(x.Scopes.Node, RuleConnection, "the %q connection in the harness is not granted %s; grant them and list them under connections.%s.scopes", p, strings.Join(missing, ", "), p)
			}
		}
		roles, _ := host.RequiredRoles(p, bound.AuthKind)
		resolved := true
		for _, role := range roles {
			secretName := bound.Secrets[role]
			if secretName == "" {
				continue // the connector's own error says which roles it needs
			}
			if _, err := c.env.Secrets.Resolve(secretName); err != nil {
				resolved = false
				if !c.missingSecrets[secretName] { // else reported at the document's secrets entry
					c.errorf(x.Node, RuleConnection, "the credential of the %q connection, secret %q, does not resolve: %s", p, secretName, secretReason(err))
				}
			}
		}
		if !resolved {
			continue
		}
		if err := c.env.ConnectionErrs[p]; err != nil {
			c.errorf(x.Node, RuleConnection, "the %s connector cannot be set up (%s:%d): %v", p, c.env.Harness.Path, bound.Pos.Line, err)
		} else if err := c.env.CheckConnection(ctx, p); err != nil {
			c.errorf(x.Node, RuleConnection, "the %s preflight request failed (a cheap authenticated read): %v", p, err)
		}
	}
}

// mcpServers: every server the document requires is bound, answers, and
// lists every tool name the document declares for it.
func (c *checker) mcpServers() {
	if c.doc.Requires == nil {
		return
	}
	for _, s := range c.doc.Requires.MCPServers {
		if s.Name == nil {
			continue
		}
		name := s.Name.Value
		if c.env.Harness.MCPServers[name] == nil {
			bound := make([]string, 0, len(c.env.Harness.MCPServers))
			for n := range c.env.Harness.MCPServers {
				bound = append(bound, n)
			}
			sort.Strings(bound)
			c.errorf(s.Name.Node, RuleMCPServer, "the harness binds no MCP server %q%s; add mcpServers.%s (command or url) to %s", name, suggest.Phrase(name, bound), name, c.env.Harness.Path)
			continue
		}
		if err := c.env.ServerErrs[name]; err != nil {
			c.errorf(s.Name.Node, RuleMCPServer, "MCP server %q cannot be used: %v", name, err)
			continue
		}
		listed := map[string]bool{}
		var names []string
		for _, t := range c.env.ServerTools[name] {
			if t.Problem != "" {
				c.diags = append(c.diags, c.doc.Diag(s.Name.Node, diag.Warning, RuleMCPToolName, "MCP server %q lists a tool that cannot be used: %s", name, t.Problem))
				continue
			}
			listed[t.Name] = true
			names = append(names, t.Name)
		}
		if s.ToolNames == nil {
			continue
		}
		for _, tn := range s.ToolNames.Items {
			if !listed[tn.Value] {
				c.errorf(tn.Node, RuleMCPTool, "MCP server %q does not list tool %q%s; it lists %d tools", name, tn.Value, suggest.Phrase(tn.Value, names), len(names))
			}
		}
	}
}

// agents: every agent a step names is bound in the harness, its driver
// can be built, and a model driver's API answers (see probe).
func (c *checker) agents(ctx context.Context) {
	seen := map[string]bool{}
	for _, s := range c.doc.Steps {
		if s.Agent == nil || seen[s.Agent.Value] {
			continue
		}
		seen[s.Agent.Value] = true
		b := c.env.Harness.Agents[s.Agent.Value]
		if b == nil {
			c.errorf(s.Agent.Node, RuleAgent, "the harness binds no agent %q; add agents.%s with a driver (transcript, openai, openai-responses, anthropic or mcp)", s.Agent.Value, s.Agent.Value)
			continue
		}
		// Build the driver as a run would (a transcript is read, an API
		// key secret resolved), without sending anything.
		setup := &driver.Setup{Secret: c.env.Secrets.Resolve, Expand: c.env.Secrets.Expand, Path: c.env.Harness.ResolvePath}
		if c.doc.Manifest != nil {
			setup.PlaybookID = playbook.Str(c.doc.Manifest.ID)
		}
		d, err := drivers.New(b.Driver, b.Settings, setup)
		if err != nil {
			c.errorf(s.Agent.Node, RuleAgent, "the harness's binding of agent %q (%s:%d) cannot be used: %v", s.Agent.Value, c.env.Harness.Path, b.Pos.Line, err)
			continue
		}
		if td, ok := d.(*transcript.Driver); ok && !c.transcripts[td.Transcript().File] {
			c.transcripts[td.Transcript().File] = true
			c.diags = append(c.diags, Transcript(c.doc, td.Transcript())...)
		}
		c.probe(ctx, b, d)
	}
}

// probe: a model driver's API is reachable, accepts the key and knows the
// model (one request per agent binding, however many documents use it;
// see [driver.Prober]). Reported at the binding in the harness file: an
// error when the API cannot be reached or refuses the key (401, 403), a
// warning when it does not know the model or answers another error.
func (c *checker) probe(ctx context.Context, b *harness.Agent, d driver.Driver) {
	first, err := c.env.ProbeAgent(ctx, b.Name, d)
	if !first || err == nil {
		return
	}
	sev := diag.Error
	who := fmt.Sprintf("agent %q (driver %s)", b.Name, b.Driver)
	var msg string
	var pe *driver.ProviderError
	switch {
	case errors.Is(err, driver.ErrUnknownModel):
		sev = diag.Warning
		msg = fmt.Sprintf("%s: %v; a run fails when the step asks the model: correct \"model\"", who, err)
	case errors.As(err, &pe) && (pe.StatusCode == 401 || pe.StatusCode == 403):
		msg = fmt.Sprintf("%s: the model API refuses the key: %v; check the secret \"apiKeySecret\" names", who, err)
	case errors.As(err, &pe):
		sev = diag.Warning
		msg = fmt.Sprintf("%s: the model could not be confirmed: %v", who, err)
	default:
		msg = fmt.Sprintf("%s: the model API cannot be reached: %v; check \"baseURL\" and that the server runs", who, err)
	}
	c.diags = append(c.diags, diag.Diagnostic{File: c.env.Harness.Path, Line: b.Pos.Line, Column: b.Pos.Column, Pointer: b.Pos.Pointer,
		Severity: sev, Rule: RuleModel, Message: msg})
}
