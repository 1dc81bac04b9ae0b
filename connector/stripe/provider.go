package stripe

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/connector"
	"github.com/openplaybook/openplaybook/connector/ratelimit"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
	stripeapi "github.com/stripe/stripe-go/v82"
)

// NewProvider returns the Stripe connector as a [connector.Provider]. Its
// connections take the secret role "apiKey".
func NewProvider() connector.Provider { return provider{} }

type provider struct{}

func (provider) Name() string                       { return Provider }
func (provider) Definitions() []playbook.Definition { return Definitions() }

// Info: api_token binds a secret or restricted key (role "apiKey");
// oauth binds the access token of a Stripe Connect OAuth grant (role
// "accessToken"), which Stripe takes as a key.
func (provider) Info() connector.Info {
	return connector.Info{Title: "Stripe", APIRoot: "https://api.stripe.com", AuthKinds: []connector.AuthKind{
		{Kind: "oauth", Secrets: []string{"accessToken"}},
		{Kind: "api_token", Secrets: []string{"apiKey"}},
	}}
}

func (provider) Open(cfg connector.Config) (connector.Connection, error) {
	// A Stripe Connect access token is used as the key.
	role := "apiKey"
	if cfg.AuthKind == "oauth" {
		role = "accessToken"
	}
	key, ok := cfg.Secrets[role]
	if !ok {
		return nil, fmt.Errorf("the stripe connection binds no %s secret", role)
	}
	return New(Config{APIKey: key, BaseURL: cfg.BaseURL, Timeout: cfg.Timeout, RateLimits: cfg.RateLimits})
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
		return registry.Result{}, outcome(err)
	}
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		return registry.Result{}, fmt.Errorf("encoding the result of %s: %w", t.name, err)
	}
	return registry.Result{Content: b}, nil
}

// outcome marks the errors whose outcome is known as definite: arguments
// refused before any request, no API key, and Stripe's answers with a
// 4xx status when no attempt of the call may have been applied (a 429
// is a request Stripe did not run; an idempotency_error says the key was
// used with other parameters). A 5xx answer, a timeout, a network error,
// a 409 that says a request with the same key is in progress, and any
// answer after an attempt that may have been applied
// ([ErrOutcomeUnknown]) leave the outcome unknown.
func outcome(err error) error {
	var se *Error
	switch {
	case errors.Is(err, ErrOutcomeUnknown):
		return err
	case errors.Is(err, ErrInvalidArguments), errors.Is(err, ErrUnknownTool), errors.Is(err, ErrNoAPIKey), errors.Is(err, ratelimit.ErrLimited):
		return registry.Definite(err)
	case errors.As(err, &se) && (se.Code == string(stripeapi.ErrorCodeIdempotencyKeyInUse) || (se.HTTPStatus == 409 && se.Type != string(stripeapi.ErrorTypeIdempotency))):
		return err
	case errors.As(err, &se) && se.HTTPStatus >= 400 && se.HTTPStatus < 500:
		return registry.Definite(err)
	}
	return err
}
