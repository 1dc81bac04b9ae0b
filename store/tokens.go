package store

import (
	"errors"
	"time"
)

// AgentToken is a bearer token of a run's external agent (docs/serve.md).
// The store keeps only the SHA-256 of the token, hex (Hash): a copy of the
// database does not hold a usable token.
type AgentToken struct {
	ID  string // "tok_" and 16 hex digits
	Run string
	// Agent is the agent name the token is for ("": every step of the
	// run bound to driver mcp).
	Agent     string
	Hash      string
	CreatedBy string
	Created   time.Time
	Expires   time.Time
	Revoked   time.Time // zero: not revoked
}

// ErrNoToken is returned when no agent token has the hash or id asked for.
var ErrNoToken = errors.New("no such agent token")
