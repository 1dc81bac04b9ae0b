package preflight

import (
	"fmt"
	"strings"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
)

// RuleConnectionScope: a connection's scopes in the harness do not cover
// the permissions of a connector tool the document embeds (docs/check.md).
const RuleConnectionScope = "preflight-connection-scope"

// scopes: every connector tool the document embeds, of a provider whose
// harness connection lists its scopes, has its permissions covered by
// them. The permissions are the registry's (what the tool needs now), or
// the document's for a tool the registry lacks. A connection without
// scopes says nothing of them and is not checked.
//
// A tool's permissions are read as all needed; but a definition cannot say
// "one of" (GitHub's issue comment lists issues:write and
// pull_requests:write, one for issues, one for pull requests). So none
// covered is an error (no call can succeed), some covered a warning (a
// call may be refused by the provider).
func (c *checker) scopes() {
	for _, t := range c.doc.Tools {
		if t.Name == nil || playbook.Str(t.Source) != "connector" || t.ConnectorType == nil {
			continue
		}
		p := t.ConnectorType.Value
		bound := c.env.Harness.Connections[p]
		if bound == nil || len(bound.Scopes) == 0 {
			continue
		}
		perms := t.Permissions.Values()
		if e, ok := c.env.Registry.Lookup(t.Name.Value); ok && e.Definition.Permissions != nil {
			perms = e.Definition.Permissions
		}
		var missing []string
		for _, need := range perms {
			if !covered(p, bound.Scopes, need) {
				missing = append(missing, need)
			}
		}
		if len(missing) == 0 {
			continue
		}
		n := t.Node
		if t.Permissions != nil {
			n = t.Permissions.Node
		}
		sev, why := diag.Error, "so every call to it would be refused by "+p
		if len(missing) < len(perms) {
			sev, why = diag.Warning, "so a call that needs them may be refused by "+p
		}
		var fixes []string
		for _, m := range missing {
			fixes = append(fixes, strings.Join(quoteAll(coveredBy(p, m)), " or "))
		}
		where := fmt.Sprintf("%s:%d", c.env.Harness.Path, bound.Pos.Line)
		if bound.ScopesPos.Line > 0 {
			where = fmt.Sprintf("%s:%d:%d", c.env.Harness.Path, bound.ScopesPos.Line, bound.ScopesPos.Column)
		}
		c.diags = append(c.diags, c.doc.Diag(n, sev, RuleConnectionScope,
			"tool %q needs %s, which the %q connection's scopes in the harness (%s: %s) do not cover, %s; once the credential is granted %s, add %s to connections.%s.scopes",
			t.Name.Value, and(quoteAll(missing)), p, where, strings.Join(quoteAll(bound.Scopes), ", "), why, pronoun(len(missing)), and(fixes), p))
	}
}

// covered reports whether one of the granted scopes of a connection to
// provider covers the permission need (see [coveredBy]).
func covered(provider string, granted []string, need string) bool {
	alts := coveredBy(provider, need)
	if alts == nil {
		return true
	}
	for _, alt := range alts {
		for _, g := range granted {
			if g == alt {
				return true
			}
		}
	}
	return false
}

// coveredBy returns the scopes of provider that grant the permission need,
// nil when it needs none: need itself, byte for byte, and the broader
// scopes that the provider's own documentation says include it. No other
// relation is assumed:
//
//   - "<x>:read" is covered by "<x>:write" (GitHub's fine-grained
//     permissions: "write" includes "read"; PostHog, Ramp, Vercel and
//     Stripe Financial Connections name their scopes the same way);
//   - Shopify's "read_<x>" by "write_<x>" ("write access scopes include
//     read access");
//   - Mercury's "read" by "read-write";
//   - Linear's "issues:create" and "comments:create" by "write";
//   - Slack's "none" and Gusto's "public" need no scope (Slack's
//     auth.test, Gusto's token info: any token may call them).
func coveredBy(provider, need string) []string {
	switch {
	case provider == "slack" && need == "none", provider == "gusto" && need == "public":
		return nil
	}
	out := []string{need}
	switch {
	case strings.HasSuffix(need, ":read") && provider != "linear":
		out = append(out, strings.TrimSuffix(need, ":read")+":write")
	case provider == "shopify" && strings.HasPrefix(need, "read_"):
		out = append(out, "write_"+strings.TrimPrefix(need, "read_"))
	case provider == "mercury" && need == "read":
		out = append(out, "read-write")
	case provider == "linear" && (need == "issues:create" || need == "comments:create"):
		out = append(out, "write")
	}
	return out
}

// and joins xs as "a", "a and b" or "a, b and c".
func and(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

func quoteAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}
