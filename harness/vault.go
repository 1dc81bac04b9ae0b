package harness

import "strings"

// Vault is store.vault: the key of the credential vault, the part of the
// store that keeps the OAuth tokens authorization servers issue for the
// harness's MCP servers and connections, sealed (package vault;
// docs/identity.md, "The credential vault").
type Vault struct {
	// KeySecret names the secret whose value (at least 32 bytes) the
	// vault's AES-256-GCM key is derived from.
	KeySecret string
	// PreviousKeySecrets name the secrets of earlier keys: entries they
	// sealed still open, and `openplaybook auth rekey` (or the next
	// refresh) seals them with KeySecret's key. Key rotation.
	PreviousKeySecrets []string
	Pos                Pos
}

var vaultKeys = []string{"keySecret", "previousKeySecrets"}

// vault reads store.vault: {keySecret: NAME, previousKeySecrets: [NAME]}.
// Each is a secret's name, never the key itself.
func (d *decoder) vault(n *node) {
	if !d.want(n, kMap, `"vault"`) {
		return
	}
	f := d.fields(n, `"vault"`, vaultKeys)
	v := &Vault{Pos: pos(n)}
	name := func(n *node, label string) (string, bool) {
		s, ok := d.str(n, label)
		if !ok {
			return "", false
		}
		if !envName.MatchString(s) {
			d.errN(n, RuleName, "%s must be a secret's name (^[A-Za-z_][A-Za-z0-9_]*$, such as OPENPLAYBOOK_VAULT_KEY), never the key itself", label)
			return "", false
		}
		if looksLikeKey(s) {
			// A key pasted in place of its secret's name (openssl rand
			// -hex 32 starts with a letter about a third of the time):
			// it must never be quoted as a name in a later message.
			d.flagged[n.ptr] = true
			d.errN(n, RuleCredential, "%s holds what looks like the key itself, not a secret's name; remove it (and make a new key), put the key in the environment or a dotenv file as OPENPLAYBOOK_VAULT_KEY and write keySecret: OPENPLAYBOOK_VAULT_KEY", label)
			return "", false
		}
		return s, true
	}
	ok := true
	if k := f["keySecret"]; k == nil {
		d.errN(n, RuleRequired, `"vault" needs "keySecret": the name of the secret (32 bytes or more; openssl rand -hex 32 makes one) that the vault's key is derived from`)
		ok = false
	} else if s, good := name(k, `"keySecret"`); good {
		v.KeySecret = s
	} else {
		ok = false
	}
	if p := f["previousKeySecrets"]; p != nil && d.want(p, kList, `"previousKeySecrets"`) {
		for _, e := range p.elems {
			s, good := name(e, "each of \"previousKeySecrets\"")
			switch {
			case !good:
				ok = false
			case s == v.KeySecret:
				d.errN(e, RuleValue, "%q is the keySecret itself; previousKeySecrets name only the earlier keys", s)
				ok = false
			default:
				v.PreviousKeySecrets = append(v.PreviousKeySecrets, s)
			}
		}
	}
	if ok {
		d.h.Store.Vault = v
	}
}

// looksLikeKey reports whether a secret's name is more likely a key: 32
// or more characters without an underscore, mixing letters and digits
// (a hex or base64 key; secret names are words joined by underscores).
func looksLikeKey(s string) bool {
	if len(s) < 32 || strings.Contains(s, "_") {
		return false
	}
	return strings.ContainsAny(s, "0123456789") && strings.IndexFunc(s, func(r rune) bool { return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' }) >= 0
}
