// Package connector defines what a connector is: a provider's tool catalog
// (full embedded definitions) and how its tools are executed once a
// harness binds a connection to it (spec, "Connector tools, named by the
// provider's tool set: charge.history from the Stripe connector").
//
// Each provider lives in its own package below this one and provides a
// [Provider]; package host lists them explicitly and registers their
// tools. The runtime never names a provider: it executes calls through
// the [registry.Tool] values a [Connection] gives.
package connector

import (
	"context"
	"time"

	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/vault"
)

// Provider is one connector.
type Provider interface {
	// Name is the provider's name as the spec spells it in connectorType
	// and requires.connections[].provider ("stripe").
	Name() string
	// Info describes the provider: its API root and the auth kinds and
	// secret roles a connection may use.
	Info() Info
	// Definitions returns the provider's tool definitions, a fresh copy
	// on each call.
	Definitions() []playbook.Definition
	// Open builds a connection from a harness binding. It sends nothing
	// (see [Connection.Check]); its errors never hold a secret value.
	Open(cfg Config) (Connection, error)
}

// Info describes a provider ("openplaybook registry" prints it).
type Info struct {
	// Title is the provider's display name ("GitHub").
	Title string
	// APIRoot is the API's base URL ("https://api.github.com"), the
	// servers[0].url of the provider's published API description; a
	// harness connection's baseURL replaces it.
	APIRoot string
	// AuthKinds are the auth kinds a connection may use, in a fixed order.
	AuthKinds []AuthKind
}

// AuthKind is one way to authenticate to a provider.
type AuthKind struct {
	// Kind is "oauth", "api_token" or "aggregator_link".
	Kind string
	// Secrets are the secret roles a connection of this kind must bind;
	// Optional the roles it may also bind.
	Secrets, Optional []string
}

// Kind returns the entry of kind k, or false.
func (i Info) Kind(k string) (AuthKind, bool) {
	for _, a := range i.AuthKinds {
		if a.Kind == k {
			return a, true
		}
	}
	return AuthKind{}, false
}

// Config is a harness connection, its secrets resolved.
type Config struct {
	// AuthKind is "oauth", "api_token" or "aggregator_link".
	AuthKind string
	// Secrets maps a role ("apiKey", "accessToken", ...) to the secret's
	// value: every role the auth kind needs, and the optional roles the
	// harness binds.
	Secrets map[string]string
	// Scopes are the scopes the harness says the credential was granted.
	Scopes []string
	// BaseURL replaces the provider's API root ("" keeps it).
	BaseURL string
	// TokenURL replaces the provider's OAuth token endpoint ("" keeps it).
	TokenURL string
	// Timeout bounds one call; zero means the provider's default.
	Timeout time.Duration
	// Vault, when set, keeps the tokens a token endpoint issues for the
	// connection (entry "connection:<provider>"), so that every process
	// on the store uses and refreshes one chain of them; nil keeps them
	// in memory only (docs/identity.md, "The credential vault").
	Vault *vault.Vault
	// RateLimits, when not nil, replace the provider's published rate
	// limits for this connection (a harness's plan may allow more or
	// less); an empty, non-nil list sends without client-side limits.
	RateLimits []RateLimit
}

// RateLimit is one of a provider's published rate limits in machine
// form: a client-side token bucket (package connector/ratelimit, on
// golang.org/x/time/rate) that every request of a connection takes a
// token from before it is sent, so a run keeps under the provider's
// limit instead of collecting 429s.
//
// The bucket holds Burst tokens (Requests when Burst is 0) and refills
// at Requests per Per. A request waits for its token for at most what
// is left of the call's timeout; when the token would come later, the
// request is not sent and the call fails definitely ("nothing was
// sent"): a limit that is hit refuses, it never queues without bound.
//
// Buckets are per connection: every connection of one process opened on
// the same provider, API root and credential shares them (a provider
// counts per credential), across runs. Replicas do not share them; give
// each replica its share in the harness (docs/connectors.md, "Rate
// limits").
type RateLimit struct {
	// Requests is how many requests the provider allows per Per (> 0).
	Requests int `json:"requests"`
	// Per is the window, a Go duration ("1s", "1m", "1h", "24h"), more
	// than zero and at most 24h.
	Per string `json:"per"`
	// Burst is how many requests may go at once after a quiet spell;
	// 0 means Requests (a provider that counts in fixed windows lets a
	// whole window's requests go at once).
	Burst int `json:"burst,omitempty"`
	// Calls is which of the tools' requests take a token: "" or "all",
	// "reads" (tools that are not side-effecting) or "writes"
	// (side-effecting tools).
	Calls string `json:"calls,omitempty"`
	// Tools, when set, limits the bucket to these tools of the
	// provider's catalog (exact names; a per-endpoint limit).
	Tools []string `json:"tools,omitempty"`
}

// Connection is a provider bound to one credential.
type Connection interface {
	// Tools returns the implementation of every tool of the provider's
	// Definitions, by name.
	Tools() map[string]registry.Tool
	// Check is a preflight: one cheap authenticated request; nil when
	// the provider accepts the credential.
	Check(ctx context.Context) error
}
