package validate

import (
	"strconv"
	"strings"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
)

// ruleSecretMembers checks that a requires.secrets entry has "name" and
// "purpose" only (spec "The requires declaration": "secrets — Named
// secrets this playbook's bindings reference — names + purposes only,
// never values"; docs/format.md, "requires": "A document names a secret;
// it never holds its value").
//
// The reader leaves the members of secrets entries to this rule, so that
// the message explains why, and it never echoes a member's value. A
// member name that itself looks like a credential is not echoed either
// (the credential rule reports it).
type ruleSecretMembers struct{}

func (ruleSecretMembers) Name() string { return "secret-members" }
func (ruleSecretMembers) Description() string {
	return `a requires.secrets entry has "name" and "purpose" only, never a value`
}

func (ruleSecretMembers) Check(c *Context) {
	if c.Doc.Requires == nil {
		return
	}
	for _, s := range c.Doc.Requires.Secrets {
		what := "a secret"
		if s.Name != nil && credentialIn(s.Name.Value) == "" {
			what = "secret " + strconv.Quote(s.Name.Value)
		}
		for name, v := range s.Node.Members() {
			if contains(playbook.SecretMembers, name) {
				continue
			}
			member := "a member"
			if credentialIn(name) == "" {
				member = "member " + strconv.Quote(name)
			}
			var msg string
			if known, ok := foldMatchSecret(name); ok {
				msg = member + " of " + what + " differs from " + strconv.Quote(known) + " only by case; member names are case-sensitive, write " + strconv.Quote(known)
			} else {
				msg = what + " has " + member + "; a secrets entry holds " + strconv.Quote("name") + " and " + strconv.Quote("purpose") +
					" only: a document names the secrets it needs and never holds their values, so remove it and give the value to the harness"
			}
			c.diags = append(c.diags, c.Doc.At(v.NameOffset(), v.Pointer(), diag.Error, c.rule, "%s", msg))
		}
	}
}

// foldMatchSecret returns the secrets member that name matches ignoring
// case ("Name" for "name").
func foldMatchSecret(name string) (string, bool) {
	for _, f := range playbook.SecretMembers {
		if strings.EqualFold(f, name) {
			return f, true
		}
	}
	return "", false
}
