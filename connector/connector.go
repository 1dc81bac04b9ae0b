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
)

// Provider is one connector.
type Provider interface {
	// Name is the provider's name as the spec spells it in connectorType
	// and requires.connections[].provider ("stripe").
	Name() string
	// Definitions returns the provider's tool definitions, a fresh copy
	// on each call.
	Definitions() []playbook.Definition
	// Open builds a connection from a harness binding. It sends nothing
	// (see [Connection.Check]); its errors never hold a secret value.
	Open(cfg Config) (Connection, error)
}

// Config is a harness connection, its secrets resolved.
type Config struct {
	// AuthKind is "oauth", "api_token" or "aggregator_link".
	AuthKind string
	// Secrets maps a role ("apiKey", "accessToken", ...) to the secret's
	// value.
	Secrets map[string]string
	// Scopes are the scopes the harness says the credential was granted.
	Scopes []string
	// BaseURL replaces the provider's API root ("" keeps it).
	BaseURL string
	// Timeout bounds one call; zero means the provider's default.
	Timeout time.Duration
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
