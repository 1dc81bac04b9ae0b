// Package vault keeps the OAuth tokens that authorization servers issue
// for the harness's MCP servers and connector connections: sealed with
// AES-256-GCM under a key derived from a named secret, held in the store
// (store.Vault) so that every process and replica on one store reads the
// same tokens, and refreshed single-flight under the store's lease so that
// a rotating refresh token is presented once and is written to the store
// before anything uses what it bought (docs/identity.md, "The credential
// vault").
//
// The store sees only ciphertext; the entry's name is the AEAD's
// associated data, so a sealed value copied under another name does not
// open. Nothing here logs, and no error carries a token.
package vault

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/store"
)

// MinKeyLen is the fewest bytes a vault key secret may have: 32, the
// AES-256 key size (the key is derived from the secret with HKDF-SHA256,
// RFC 5869, but cannot hold more entropy than the secret).
const MinKeyLen = 32

// RefreshTimeout bounds one token request under the lease (well inside
// [store.CredentialLease]).
const RefreshTimeout = 30 * time.Second

// Token is what a vault entry holds: the tokens one grant issued (RFC 6749
// section 5.1) and what the holder needs to tell whether they still belong
// to the credential the harness binds.
type Token struct {
	AccessToken  string `json:"accessToken"`
	RefreshToken string `json:"refreshToken,omitempty"`
	TokenType    string `json:"tokenType,omitempty"`
	// Expiry is when the access token runs out (zero: not said).
	Expiry time.Time `json:"expiry,omitzero"`
	// Scopes are the scopes granted, as the token endpoint said them.
	Scopes []string `json:"scopes,omitempty"`
	// Grant is the grant that began the chain: "refresh_token" (a
	// refresh token bound in the harness), "client_credentials" or
	// "authorization_code" (openplaybook auth login).
	Grant string `json:"grant"`
	// Seed is a fingerprint of the harness credential the chain began
	// from (see [Fingerprint]): when the harness binds another one, the
	// entry is stale and is replaced.
	Seed string `json:"seed,omitempty"`
	// TokenURL is the token endpoint that refreshes it, when the holder
	// learned it by discovery (an MCP server's authorization server).
	TokenURL string `json:"tokenURL,omitempty"`
	// Issued is when the token endpoint issued AccessToken, UTC.
	Issued time.Time `json:"issued,omitzero"`
}

// Fingerprint returns a short one-way digest of parts (the token URL, the
// client id and the bound refresh token or client secret, say): what
// [Token.Seed] holds. It is stored sealed, but reveals nothing even then.
func Fingerprint(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// ErrorCode returns the error code a token endpoint answered (RFC 6749
// section 5.2), fit to put in a message: the code when it is one (at most
// 64 of the characters %x20-21 / %x23-5B / %x5D-7E the RFC allows), else
// a note that it is not. A hostile endpoint's code may otherwise carry
// control characters, a megabyte of text, or a token it was sent.
func ErrorCode(code string) string {
	const max = 64
	if len(code) > max {
		return "(an error code too long to show)"
	}
	for _, c := range []byte(code) {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return "(an error code with characters RFC 6749 does not allow)"
		}
	}
	return code
}

// Key is one AES-256-GCM key of the vault, derived from a secret's value.
type Key struct {
	id   [8]byte
	aead cipher.AEAD
}

// NewKey derives the vault key from secret (the value of the secret that
// store.vault.keySecret names) with HKDF-SHA256 (RFC 5869). It refuses a
// secret shorter than [MinKeyLen] bytes.
func NewKey(secret []byte) (*Key, error) {
	if len(secret) < MinKeyLen {
		return nil, fmt.Errorf("the vault key is only %d bytes; use at least %d (openssl rand -hex 32 makes one)", len(secret), MinKeyLen)
	}
	k, err := hkdf.Key(sha256.New, secret, []byte("openplaybook vault"), "aes-256-gcm key", 32)
	if err != nil {
		return nil, err
	}
	id, err := hkdf.Key(sha256.New, secret, []byte("openplaybook vault"), "key id", 8)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	key := &Key{aead: aead}
	copy(key.id[:], id)
	return key, nil
}

// ID is the key's public identifier (16 hex digits), written in front of
// every entry it seals: `openplaybook auth list` shows it.
func (k *Key) ID() string { return hex.EncodeToString(k.id[:]) }

// The sealed form: magic, key id, nonce, ciphertext+tag.
const magic = "opv1"

// Vault seals, opens and refreshes the entries of a store's credential
// vault. Build it with [New]; it is safe for concurrent use.
type Vault struct {
	st   store.Vault
	keys []*Key // keys[0] seals; the rest only open

	// Poll is how often a process that waits for another's refresh looks
	// again (default 50 ms).
	Poll time.Duration
	now  func() time.Time
}

// New returns the vault over st, sealing with current and opening entries
// sealed with current or any of previous (key rotation: docs/identity.md).
func New(st store.Vault, current *Key, previous ...*Key) *Vault {
	keys := []*Key{current}
	for _, k := range previous {
		if k != nil && k.id != current.id {
			keys = append(keys, k)
		}
	}
	return &Vault{st: st, keys: keys, Poll: 50 * time.Millisecond, now: time.Now}
}

// ErrNotFound is returned (wrapped) when there is no entry by the name.
var ErrNotFound = store.ErrNotFound

// ErrUnknownKey is returned (wrapped) for an entry sealed with a key the
// vault was not given: give the old key as store.vault.previousKeySecrets,
// or remove the entry (openplaybook auth revoke) and bind the credential
// again.
var ErrUnknownKey = errors.New("the vault entry was sealed with a key this harness does not give (store.vault.previousKeySecrets)")

func (v *Vault) seal(name string, t Token) ([]byte, error) {
	plain, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	k := v.keys[0]
	out := make([]byte, 0, len(magic)+len(k.id)+k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	out = append(out, magic...)
	out = append(out, k.id[:]...)
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out = append(out, nonce...)
	return k.aead.Seal(out, nonce, plain, []byte(name)), nil
}

// open returns the token sealed in b under name, and the key that sealed
// it.
func (v *Vault) open(name string, b []byte) (Token, *Key, error) {
	if len(b) < len(magic)+8 || string(b[:len(magic)]) != magic {
		return Token{}, nil, fmt.Errorf("vault entry %q is not a sealed entry of this version", name)
	}
	id := b[len(magic) : len(magic)+8]
	for _, k := range v.keys {
		if string(k.id[:]) != string(id) {
			continue
		}
		rest := b[len(magic)+8:]
		if len(rest) < k.aead.NonceSize()+k.aead.Overhead() {
			return Token{}, nil, fmt.Errorf("vault entry %q is cut short", name)
		}
		plain, err := k.aead.Open(nil, rest[:k.aead.NonceSize()], rest[k.aead.NonceSize():], []byte(name))
		if err != nil {
			return Token{}, nil, fmt.Errorf("vault entry %q does not open with its key: it was altered or moved from another name", name)
		}
		var t Token
		if err := json.Unmarshal(plain, &t); err != nil {
			return Token{}, nil, fmt.Errorf("vault entry %q holds no token", name)
		}
		return t, k, nil
	}
	return Token{}, nil, fmt.Errorf("%w: %q (key %s)", ErrUnknownKey, name, hex.EncodeToString(id))
}

// Get returns the token of the entry named name and the entry's version
// (for [Vault.Put]); [ErrNotFound] when there is none.
func (v *Vault) Get(ctx context.Context, name string) (Token, int64, error) {
	c, err := v.st.Credential(ctx, name)
	if err != nil {
		return Token{}, 0, err
	}
	t, _, err := v.open(name, c.Sealed)
	return t, c.Version, err
}

// Put seals t as the entry named name if the entry's version is still
// version (0: it must not exist) and returns the new version;
// store.ErrConflict when another process wrote it since.
func (v *Vault) Put(ctx context.Context, name string, t Token, version int64) (int64, error) {
	sealed, err := v.seal(name, t)
	if err != nil {
		return 0, fmt.Errorf("sealing vault entry %q: %w", name, err)
	}
	return v.st.PutCredential(ctx, name, sealed, version)
}

// Delete removes the entry named name; [ErrNotFound] when there is none.
func (v *Vault) Delete(ctx context.Context, name string) error {
	return v.st.DeleteCredential(ctx, name)
}

// Entry describes one vault entry without its tokens: what `openplaybook
// auth list` prints.
type Entry struct {
	Name    string
	Version int64
	Updated time.Time
	// KeyID is the id of the key that sealed it; Current whether that is
	// the key the vault seals with now.
	KeyID   string
	Current bool
	// Grant, Expiry, Scopes, HasRefresh and Issued come from the token;
	// they are zero when Err is set.
	Grant      string
	Expiry     time.Time
	Scopes     []string
	HasRefresh bool
	Issued     time.Time
	// Err says why the entry could not be opened (another key, altered).
	Err error
}

// List describes every entry, sorted by name.
func (v *Vault) List(ctx context.Context) ([]Entry, error) {
	cs, err := v.st.Credentials(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(cs))
	for _, c := range cs {
		e := Entry{Name: c.Name, Version: c.Version, Updated: c.Updated}
		if len(c.Sealed) >= len(magic)+8 {
			e.KeyID = hex.EncodeToString(c.Sealed[len(magic) : len(magic)+8])
		}
		t, k, err := v.open(c.Name, c.Sealed)
		if err != nil {
			e.Err = err
		} else {
			e.Current = k == v.keys[0]
			e.Grant, e.Expiry, e.Scopes, e.HasRefresh, e.Issued = t.Grant, t.Expiry, t.Scopes, t.RefreshToken != "", t.Issued
		}
		out = append(out, e)
	}
	return out, nil
}

// Rekey seals every entry that an older key sealed with the current key
// and returns how many it rewrote. An entry written by another process in
// between is left to that process (it sealed it with its own current key).
func (v *Vault) Rekey(ctx context.Context) (int, error) {
	cs, err := v.st.Credentials(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range cs {
		t, k, err := v.open(c.Name, c.Sealed)
		if err != nil {
			return n, err
		}
		if k == v.keys[0] {
			continue
		}
		if _, err := v.Put(ctx, c.Name, t, c.Version); err != nil {
			if errors.Is(err, store.ErrConflict) {
				continue
			}
			return n, err
		}
		n++
	}
	return n, nil
}

// Refresh returns a usable token for the entry named name, getting a new
// one with fetch only when the entry holds none, holds one of another
// seed, or usable says it cannot be used. fetch is called by one holder
// at a time across every process on the store (the store's lease,
// [store.CredentialLease]); it gets the entry's current token (nil when
// there is none of this seed) and a context bounded by [RefreshTimeout].
// What fetch returns is written to the store before Refresh returns it:
// when that write fails, Refresh returns the error and not the token.
//
// A process that finds the lease held waits for the holder's write and
// uses its token, until ctx ends.
func (v *Vault) Refresh(ctx context.Context, name, seed string, usable func(Token) bool, fetch func(ctx context.Context, cur *Token) (Token, error)) (Token, error) {
	holder := rand.Text()
	for {
		cur, version, err := v.current(ctx, name, seed)
		if err != nil {
			return Token{}, err
		}
		if cur != nil && usable(*cur) {
			return *cur, nil
		}
		now := v.now()
		got, err := v.st.LeaseCredential(ctx, name, holder, now, now.Add(store.CredentialLease))
		if err != nil {
			return Token{}, err
		}
		if !got {
			select {
			case <-ctx.Done():
				return Token{}, fmt.Errorf("waiting for another process's token refresh of %q: %w", name, ctx.Err())
			case <-time.After(v.Poll):
			}
			continue
		}
		return v.refreshHeld(ctx, name, seed, holder, usable, fetch, cur, version)
	}
}

func (v *Vault) refreshHeld(ctx context.Context, name, seed, holder string, usable func(Token) bool, fetch func(ctx context.Context, cur *Token) (Token, error), cur *Token, version int64) (Token, error) {
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		v.st.ReleaseCredential(rctx, name, holder)
	}()
	// Another holder may have written between the read and the lease.
	cur, version, err := v.current(ctx, name, seed)
	if err != nil {
		return Token{}, err
	}
	if cur != nil && usable(*cur) {
		return *cur, nil
	}
	fctx, cancel := context.WithTimeout(ctx, RefreshTimeout)
	defer cancel()
	t, err := fetch(fctx, cur)
	if err != nil {
		return Token{}, err
	}
	t.Seed = seed
	if t.Issued.IsZero() {
		t.Issued = v.now().UTC()
	}
	// Written even if ctx ended meanwhile: the token endpoint may have
	// rotated the refresh token, and the new one must not be lost.
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer wcancel()
	if _, err := v.Put(wctx, name, t, version); err != nil {
		return Token{}, fmt.Errorf("the refreshed token of %q could not be stored, so it is not used: %w", name, err)
	}
	return t, nil
}

// current reads the entry named name: nil when there is none or it
// belongs to another seed (with the version to overwrite).
func (v *Vault) current(ctx context.Context, name, seed string) (*Token, int64, error) {
	t, version, err := v.Get(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, 0, nil
	case err != nil:
		return nil, 0, err
	case t.Seed != seed:
		return nil, version, nil
	}
	return &t, version, nil
}
