package validate

import (
	"fmt"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/internal/credential"
	"github.com/openplaybook/openplaybook/syntax"
)

// ruleCredential reports anything in the document that looks like a
// credential: every string value and every member name, anywhere,
// including inside inputSchema and outputSchema (defaults, examples,
// enums). Spec "The requires declaration": "Names and purposes only; never
// credentials"; docs/format.md, "Credentials": "Anything in the document,
// member names and string values alike, that looks like a credential is an
// error naming where it is, without echoing the value".
//
// The kinds recognised are those of package internal/credential; a
// string value is also reported for the name of the member holding it
// ([credential.FindAssigned]: a generated-looking value of "api_key",
// "token" or "client_secret", a password of "password"). The
// message names the kind, and the diagnostic's pointer names the place; no
// part of the value is ever shown: a pointer that passes through a member
// named like a credential is redacted by [playbook.Document.At], as every
// diagnostic is.
type ruleCredential struct{}

func (ruleCredential) Name() string { return "credential" }
func (ruleCredential) Description() string {
	return "the document holds no credential (API keys, tokens, bearer headers, private keys, URLs with passwords, passwords and secrets assigned to names that say so)"
}

// credentialFix is the advice every credential message ends with.
const credentialFix = "a document never holds credentials: remove it, and name the secret in \"requires.secrets\" for the harness to supply"

func (ruleCredential) Check(c *Context) { credentialWalk(c, c.Doc.Root) }

// credentialWalk checks n and everything below it. It is a plain
// recursion rather than [syntax.Walk], and calls [credential.Find]
// directly, because it runs over every value of the document and every
// call's cost shows.
func credentialWalk(c *Context, n *syntax.Node) {
	switch n.Kind {
	case syntax.String:
		if len(n.Text()) >= minCredentialLen {
			if kind, ok := credential.Find(n.Text()); ok {
				c.diags = append(c.diags, c.Doc.At(int(n.Offset), n.Pointer(), diag.Error, c.rule,
					"%s looks like %s; %s", credentialSubject(n), credential.Describe(kind), credentialFix))
			}
		}
	case syntax.Object:
		for name, v := range n.Members() {
			if len(name) >= minCredentialLen {
				if kind, ok := credential.Find(name); ok {
					c.diags = append(c.diags, c.Doc.At(v.NameOffset(), v.Pointer(), diag.Error, c.rule,
						"a member name looks like %s; %s", credential.Describe(kind), credentialFix))
				}
			}
			if v.Kind == syntax.String && len(v.Text()) >= minCredentialLen {
				if kind, ok := credential.FindAssigned(name, v.Text()); ok {
					if _, found := credential.Find(v.Text()); !found {
						c.diags = append(c.diags, c.Doc.At(int(v.Offset), v.Pointer(), diag.Error, c.rule,
							"%s looks like %s; %s", credentialSubject(v), credential.Describe(kind), credentialFix))
					}
				}
			}
			credentialWalk(c, v)
		}
	case syntax.Array:
		for _, e := range n.Elems() {
			credentialWalk(c, e)
		}
	}
}

// credentialSubject names a string value in a message by the member
// holding it, unless that member's name is itself credential-like.
func credentialSubject(n *syntax.Node) string {
	if key, ok := n.Key(); ok && credentialIn(key) == "" {
		return fmt.Sprintf("the value of %q", key)
	}
	return "a string"
}
