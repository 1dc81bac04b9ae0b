package store

import (
	"context"
	"time"
)

// ConsoleLogin is one login to the web console of `openplaybook serve`
// (docs/console.md, "Logging in"). The store keeps it so that every
// replica of serve over one store knows it: a login on one replica is
// valid on all, and a logout on one ends it everywhere. Neither the
// session cookie nor its CSRF token is stored, only their SHA-256: a copy
// of the database holds no usable login.
type ConsoleLogin struct {
	// Hash is the SHA-256 (hex) of the session cookie's value.
	Hash string
	// CSRFHash is the SHA-256 (hex) of the login's CSRF token.
	CSRFHash string
	// Who is who logged in, as serve encodes it (JSON).
	Who []byte
	// Created and Expires are UTC; the login ends at Expires.
	Created, Expires time.Time
}

// ConsoleLogins is what an engine that keeps console logins offers (both
// engines here do; optional to the contract, found with [As]). Each
// method is one transaction of its own.
type ConsoleLogins interface {
	// CreateConsoleLogin records l (its Hash must be new) and removes the
	// logins that expired before l.Created.
	CreateConsoleLogin(ctx context.Context, l ConsoleLogin) error
	// ConsoleLogin returns the login whose cookie hashes to hash, or
	// [ErrNotFound] when there is none or it expired at now.
	ConsoleLogin(ctx context.Context, hash string, now time.Time) (ConsoleLogin, error)
	// DeleteConsoleLogin ends the login whose cookie hashes to hash;
	// nothing when there is none.
	DeleteConsoleLogin(ctx context.Context, hash string) error
}
