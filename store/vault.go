package store

import (
	"context"
	"errors"
	"time"
)

// Credential is one entry of the credential vault (docs/identity.md, "The
// credential vault"): the OAuth tokens an authorization server issued for
// one MCP server or provider connection, sealed by package vault. The
// store never sees them in the clear: Sealed is AEAD ciphertext bound to
// Name.
type Credential struct {
	// Name is "mcp:<server>" or "connection:<provider>" (the destination
	// names of the harness's secret binding).
	Name string
	// Sealed is the sealed entry, as package vault wrote it.
	Sealed []byte
	// Version is 1 after the first write and grows by one with each
	// write: [Vault.PutCredential] is a compare-and-swap on it.
	Version int64
	// Updated is when it was last written, UTC.
	Updated time.Time
}

// ErrConflict is returned (wrapped) by [Vault.PutCredential] when the
// entry's version is no longer the one the caller read: another process
// wrote it in between.
var ErrConflict = errors.New("store: the entry was written by another process since it was read")

// CredentialLease bounds how long a [Vault.LeaseCredential] holder may take
// to refresh a token before another process may take the lease: longer than
// one token request takes (package vault gives up on one after 30 s).
const CredentialLease = time.Minute

// Vault is what an engine that keeps the credential vault offers (both
// engines here do; optional to the contract, found with [As]). Each method
// is one transaction of its own; none takes a run's lock.
//
// The lease makes a refresh single-flight across processes and replicas:
// the one holder refreshes, the others wait for its write and read it,
// so a rotating refresh token (RFC 6749 section 10.4, OAuth 2.1 section
// 4.3.1) is presented once.
type Vault interface {
	// Credential returns the entry named name, or [ErrNotFound].
	Credential(ctx context.Context, name string) (Credential, error)
	// Credentials returns every entry, sorted by name.
	Credentials(ctx context.Context) ([]Credential, error)
	// PutCredential writes sealed as the entry named name if its version
	// is still version (0: it must not exist yet) and returns the new
	// version; [ErrConflict] when it is not.
	PutCredential(ctx context.Context, name string, sealed []byte, version int64) (int64, error)
	// DeleteCredential removes the entry and any lease on it;
	// [ErrNotFound] when there is none.
	DeleteCredential(ctx context.Context, name string) error
	// LeaseCredential gives holder the lease on name until until, if
	// no other holder has one that has not run out at now; it reports
	// whether holder has it. The entry need not exist.
	LeaseCredential(ctx context.Context, name, holder string, now, until time.Time) (bool, error)
	// ReleaseCredential ends holder's lease on name (nothing when holder
	// does not hold it).
	ReleaseCredential(ctx context.Context, name, holder string) error
}
