package preflight

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/drivers"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/store/engine"
)

// Harness is the preflight of a harness alone, with no document: what
// `openplaybook check --harness FILE` with no DOC reports. h must be
// connected with [host.Options.AllServers], so that every server the
// harness binds was started or contacted. Every diagnostic is positioned
// in the harness file, at the binding concerned:
//
//   - every use of a secret resolves to a non-empty value (rule
//     harness-secret-missing, at the use; see [harness.Harness.CheckSecrets]);
//   - every connection with a connector (Stripe) can be set up and the
//     provider accepts its credential, asked once (rule
//     preflight-connection); one whose credential does not resolve is
//     left to its secret's error;
//   - every MCP server starts or answers and lists its tools (rule
//     preflight-mcp-server, with the tail of its standard error); a tool
//     listed under a name that cannot be used is a warning (rule
//     preflight-mcp-tool-name);
//   - every agent's driver can be built as a run would build it (a
//     transcript read, an API key resolved), without sending anything
//     (rule preflight-agent); a transcript path holding "{playbook}" is
//     left to the check of a document;
//   - every secret that only `serve` reads and the harness names
//     explicitly resolves to a non-empty value: each serve.webhooks
//     endpoint's signingKeySecret and urlSecret (at the endpoint) and
//     serve.oidc's clientSecretSecret (at serve.oidc), rule
//     harness-secret-missing, since serve refuses to start without them
//     (the operator token, which has a default name, is left to serve).
//
// It does not repeat the diagnostics of reading the harness, nor
// h.Diagnostics (dotenv files, the store seed, registry clashes).
func Harness(ctx context.Context, h *host.Host) []diag.Diagnostic {
	hs := h.Harness
	var ds []diag.Diagnostic
	at := func(pos harness.Pos, sev diag.Severity, rule, format string, args ...any) {
		ds = append(ds, diag.Diagnostic{File: hs.Path, Line: pos.Line, Column: pos.Column, Pointer: pos.Pointer,
			Severity: sev, Rule: rule, Message: fmt.Sprintf(format, args...)})
	}
	for _, d := range hs.CheckSecrets(h.Secrets) {
		if d.Rule != harness.RuleDotenv { // already in h.Diagnostics
			ds = append(ds, d)
		}
	}

	for _, p := range sortedKeys(hs.Connections) {
		c := hs.Connections[p]
		roles, _ := host.RequiredRoles(p, c.AuthKind)
		unresolved := false
		for _, role := range roles {
			if c.Secrets[role] == "" {
				continue // the connector's own error says which roles it needs
			}
			if _, err := c.Resolve(h.Secrets, role); err != nil {
				unresolved = true // reported at the secret's use
			}
		}
		if unresolved {
			continue
		}
		if err := h.ConnectionErrs[p]; err != nil {
			at(c.Pos, diag.Error, RuleConnection, "the %s connector cannot be set up: %v", p, err)
		} else if err := h.CheckConnection(ctx, p); err != nil {
			at(c.Pos, diag.Error, RuleConnection, "the %s preflight request failed (a cheap authenticated read): %v", p, err)
		}
	}

	for _, name := range sortedKeys(hs.MCPServers) {
		s := hs.MCPServers[name]
		if err := h.ServerErrs[name]; err != nil {
			var se *harness.SecretError
			if errors.As(err, &se) {
				continue // reported at the secret's use
			}
			at(s.Pos, diag.Error, RuleMCPServer, "MCP server %q cannot be used: %v", name, err)
			continue
		}
		for _, t := range h.ServerTools[name] {
			if t.Problem != "" {
				at(s.Pos, diag.Warning, RuleMCPToolName, "MCP server %q lists a tool that cannot be used: %s", name, t.Problem)
			}
		}
	}

	for _, name := range sortedKeys(hs.Agents) {
		a := hs.Agents[name]
		if p, _ := a.Settings["transcript"].(string); a.Driver == "transcript" && strings.Contains(p, "{playbook}") {
			continue // its path depends on the playbook: checked with one
		}
		setup := &driver.Setup{Secret: h.Secrets.Resolve, Expand: h.Secrets.Expand, Path: hs.ResolvePath}
		if _, err := drivers.New(a.Driver, a.Settings, setup); err != nil {
			var se *harness.SecretError
			if errors.As(err, &se) {
				continue // reported at the secret's use
			}
			at(a.Pos, diag.Error, RuleAgent, "agent %q cannot be used: %v", name, err)
		}
	}
	if sv := hs.Serve; sv != nil {
		need := func(pos harness.Pos, what, name string) {
			if name == "" {
				return
			}
			if _, err := h.Secrets.Resolve(name); err != nil {
				msg := err.Error()
				var se *harness.SecretError
				if errors.As(err, &se) {
					msg = fmt.Sprintf("secret %q %s", se.Name, se.Reason)
				}
				at(pos, diag.Error, harness.RuleSecretMissing, "%s: %s; serve refuses to start without it", what, msg)
			}
		}
		for _, w := range sv.Webhooks {
			need(w.Pos, fmt.Sprintf("webhook %q's signingKeySecret", w.Name), w.SigningKeySecret)
			need(w.Pos, fmt.Sprintf("webhook %q's urlSecret", w.Name), w.URLSecret)
		}
		if sv.OIDC != nil {
			need(sv.OIDC.Pos, "serve.oidc's clientSecretSecret", sv.OIDC.ClientSecretSecret)
		}
	}
	for i := range ds {
		ds[i].Message = h.Secrets.Redact(ds[i].Message)
	}
	diag.Sort(ds)
	return ds
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Store is the preflight of the harness's store (rule store, at
// store.postgres.url): for PostgreSQL, the server answers, accepts the
// URL's role and has its database (errors), and the schema version is
// this build's (newer: an error; older or none yet: a warning, since the
// first run migrates it). See [engine.Probe]; nothing is written. A URL
// whose secret does not resolve is left to the secret's own error. SQLite
// gives nothing: the first run creates the file.
func Store(ctx context.Context, h *host.Host) []diag.Diagnostic {
	hs := h.Harness
	if hs.Store == nil || hs.Store.Postgres == nil {
		return nil
	}
	pos := hs.Store.Postgres.Pos
	var ds []diag.Diagnostic
	for _, f := range engine.Probe(ctx, hs, h.Secrets) {
		sev := diag.Warning
		if f.Error {
			sev = diag.Error
		}
		ds = append(ds, diag.Diagnostic{File: hs.Path, Line: pos.Line, Column: pos.Column, Pointer: pos.Pointer,
			Severity: sev, Rule: RuleStore, Message: h.Secrets.Redact("the PostgreSQL store: " + f.Message)})
	}
	return ds
}
