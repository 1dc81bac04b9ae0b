package stripe

import (
	"context"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/connector"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
)

// NewProvider returns the Stripe connector as a [connector.Provider]. Its
// connections take the secret role "apiKey".
func NewProvider() connector.Provider { return provider{} }

type provider struct{}

func (provider) Name() string                       { return Provider }
func (provider) Definitions() []playbook.Definition { return Definitions() }

func (provider) Open(cfg connector.Config) (connector.Connection, error) {
	key, ok := cfg.Secrets["apiKey"]
	if !ok {
		return nil, fmt.Errorf("the stripe connection binds no apiKey secret")
	}
	return New(Config{APIKey: key, BaseURL: cfg.BaseURL, Timeout: cfg.Timeout})
}

// Tools returns the connector's tools as registry tools. Each call is sent
// with the idempotency key of its place in the run
// ([registry.CallInfo.IdempotencyKey]; see [WithIdempotencyKey]).
func (c *Connector) Tools() map[string]registry.Tool {
	out := make(map[string]registry.Tool, len(tools))
	for name := range tools {
		out[name] = stripeTool{c: c, name: name}
	}
	return out
}

type stripeTool struct {
	c    *Connector
	name string
}

func (t stripeTool) Call(ctx context.Context, args jsontext.Value) (registry.Result, error) {
	if ci, ok := registry.CallInfoOf(ctx); ok {
		ctx = WithIdempotencyKey(ctx, ci.IdempotencyKey())
	}
	v, err := t.c.Call(ctx, t.name, args)
	if err != nil {
		return registry.Result{}, err
	}
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		return registry.Result{}, fmt.Errorf("encoding the result of %s: %w", t.name, err)
	}
	return registry.Result{Content: b}, nil
}
