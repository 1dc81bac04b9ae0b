package validate

import (
	"github.com/openplaybook/openplaybook/internal/credential"
	"github.com/openplaybook/openplaybook/syntax"
)

// minCredentialLen is the length of the shortest string that can hold a
// credential; shorter strings are not scanned.
const minCredentialLen = credential.MinLen

// credentialIn returns what kind of credential s appears to hold, as a
// message names it ("a Stripe secret key"), or "" when it holds none. It
// never returns any part of s. The kinds, and the tolerance for prose and
// placeholders, are those of package internal/credential.
func credentialIn(s string) string {
	if kind, ok := credential.Find(s); ok {
		return credential.Describe(kind)
	}
	return ""
}

// credentialSafePointer returns the JSON Pointer of n, or, when the path
// to n passes through a member whose name looks like a credential, the
// pointer of the object holding the outermost such member: a pointer that
// still resolves in the document and never spells out a credential. (Every
// pointer is redacted by [playbook.Document.At] anyway; the json-schema
// rule uses this one to keep its pointers resolvable.)
func credentialSafePointer(n *syntax.Node) string {
	safe := n
	for x := n; x != nil; x = x.Parent() {
		if key, ok := x.Key(); ok && len(key) >= minCredentialLen && credentialIn(key) != "" {
			safe = x.Parent()
		}
	}
	return safe.Pointer()
}
