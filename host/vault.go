package host

import (
	"errors"
	"fmt"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/vault"
)

// VaultKeys derives the credential vault's keys from the secrets that
// store.vault names: the current key first, then the earlier ones. A
// secret that is unset or shorter than [vault.MinKeyLen] bytes is an
// error naming the secret, never its value.
func VaultKeys(cfg *harness.Vault, sec *harness.Secrets) (*vault.Key, []*vault.Key, error) {
	key := func(name string) (*vault.Key, error) {
		v, err := sec.Resolve(name)
		if err != nil {
			return nil, fmt.Errorf("the vault key %s: %v", name, err)
		}
		k, err := vault.NewKey([]byte(v))
		if err != nil {
			return nil, fmt.Errorf("the vault key %s: %v", name, err)
		}
		return k, nil
	}
	cur, err := key(cfg.KeySecret)
	if err != nil {
		return nil, nil, err
	}
	var prev []*vault.Key
	for _, name := range cfg.PreviousKeySecrets {
		k, err := key(name)
		if err != nil {
			return nil, nil, err
		}
		prev = append(prev, k)
	}
	return cur, prev, nil
}

// OpenVault returns the credential vault of st with the keys the harness
// names (docs/identity.md, "The credential vault"). It is nil, nil when
// the harness has no store.vault.
func OpenVault(hs *harness.Harness, sec *harness.Secrets, st store.Store) (*vault.Vault, error) {
	if hs.Store == nil || hs.Store.Vault == nil {
		return nil, nil
	}
	cur, prev, err := VaultKeys(hs.Store.Vault, sec)
	if err != nil {
		return nil, err
	}
	sv, ok := store.As[store.Vault](st)
	if !ok {
		return nil, errors.New("the store keeps no credential vault")
	}
	return vault.New(sv, cur, prev...), nil
}

// openVault sets h.Vault over st (nil: the harness's store, opened here
// and closed by Close) and reports the vault's problems as diagnostics at
// store.vault.
func (h *Host) openVault(st store.Store) {
	hs := h.Harness
	if hs.Store == nil || hs.Store.Vault == nil {
		return
	}
	if _, _, err := VaultKeys(hs.Store.Vault, h.Secrets); err != nil {
		h.vaultErr = err
		p := hs.Store.Vault.Pos
		h.Diagnostics = append(h.Diagnostics, diag.Diagnostic{File: hs.Path, Line: p.Line, Column: p.Column, Pointer: p.Pointer, Severity: diag.Error, Rule: RuleStore,
			Message: fmt.Sprintf("the credential vault cannot be opened: %v; connections and MCP servers whose tokens it keeps are not connected", err)})
		return
	}
	if st == nil {
		// Without the caller's store (check, explain, registry), the
		// vault's own: a token refreshed by a preflight must be stored
		// like any other, or a rotated refresh token is lost.
		own, err := OpenStoreFile(hs)
		if err != nil {
			h.vaultErr = fmt.Errorf("opening the store that holds it: %v", err)
			p := hs.Store.Vault.Pos
			h.Diagnostics = append(h.Diagnostics, diag.Diagnostic{File: hs.Path, Line: p.Line, Column: p.Column, Pointer: p.Pointer, Severity: diag.Error, Rule: RuleStore,
				Message: fmt.Sprintf("the credential vault cannot be opened: %v", h.vaultErr)})
			return
		}
		h.ownStore, st = own, own
	}
	v, err := OpenVault(hs, h.Secrets, st)
	if err != nil {
		h.vaultErr = err
		return
	}
	h.Vault = v
}
