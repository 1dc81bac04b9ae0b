// Package stripe is the Stripe connector: the definitions of its tools for
// the registry ([Definitions]) and their implementations ([Connector.Call]),
// on Stripe's API through github.com/stripe/stripe-go/v82 (API version
// 2025-08-27.basil).
//
// The tools and the requests each makes:
//
//   - charge.history: the customer's charges, newest first (GET
//     /v1/charges). Charges no longer name the invoice they paid (Stripe
//     removed Charge.invoice in 2025-03-31.basil), so when there are charges
//     a second request, GET /v1/invoices with data.payments expanded, finds
//     each charge's invoice among the customer's 100 newest invoices by
//     payment intent (or by charge, for a charge without one). A charge
//     matching no invoice, or several, has no invoiceId; so do all charges
//     when the key may not read invoices (HTTP 403 on that request).
//   - invoice.list: the customer's 100 newest invoices, newest first (GET
//     /v1/invoices).
//   - billing_customer.get: the customer's billing email, name,
//     delinquency and default card (GET /v1/customers/{id}, expanding
//     invoice_settings.default_payment_method and the legacy default_source;
//     a default that is not a card is left out).
//   - charge.get: one charge as it stands now: amount, amount refunded,
//     status, refunded, disputed, customer (GET /v1/charges/{id}); what an
//     approver reads before deciding a refund of it (docs/console.md).
//   - charge.refund: a refund of the charge in full or in part (POST
//     /v1/refunds), sent with the caller's Idempotency-Key
//     ([WithIdempotencyKey]).
//
// Results are Go values ([ChargeHistoryResult], ...) whose JSON encoding,
// with encoding/json or go-json-experiment/json, is the tool's
// outputSchema. stripe-go retries a request that failed on the network, or
// that Stripe marks retryable, up to twice; a refund's retries carry the
// same Idempotency-Key. A refund Stripe answers is in progress under its
// key (HTTP 409, idempotency_key_in_use) is sent again with that key, up
// to [InProgressAttempts] times; a refund that still fails after an
// attempt that may have been applied returns an error wrapping
// [ErrOutcomeUnknown], never a definite failure.
//
// The API key is a secret: no error this package returns contains it, nor
// anything Stripe quotes that looks like a key or an Authorization value.
package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	stripeapi "github.com/stripe/stripe-go/v82"

	"github.com/openplaybook/openplaybook/connector"
	"github.com/openplaybook/openplaybook/connector/ratelimit"
)

// Provider is the connector's provider name, the "stripe" of
// requires.connections[].provider and of connectorType.
const Provider = "stripe"

// DefaultTimeout bounds a call when [Config].Timeout is zero.
const DefaultTimeout = 60 * time.Second

// Config configures [New].
type Config struct {
	// APIKey is the Stripe secret ("sk_...") or restricted ("rk_...") key.
	// Empty is accepted by New, but Call and Check then fail with
	// [ErrNoAPIKey] without sending anything. It must not contain
	// whitespace or control characters (it is never trimmed).
	APIKey string
	// BaseURL is the API's base URL, such as a stripe-mock's
	// "http://127.0.0.1:12111". Empty means Stripe's API,
	// https://api.stripe.com. It must be an absolute http or https URL
	// without user information, query or fragment.
	BaseURL string
	// HTTPClient makes the requests. Nil means stripe-go's default client.
	HTTPClient *http.Client
	// Timeout bounds each Call and Check, stripe-go's own retries
	// included. Zero means [DefaultTimeout]; negative means no bound other
	// than the context's.
	Timeout time.Duration
	// RateLimits replace Stripe's published limits ([Limits]) when not
	// nil; an empty, non-nil list sends without client-side limits.
	RateLimits []connector.RateLimit
}

// Limits are Stripe's published rate limits for key as token buckets
// (docs.stripe.com, "Rate limits"): 100 read and 100 write operations a
// second in live mode, 25 each in test mode (a key starting "sk_test_"
// or "rk_test_"). A call takes a token per request it sends
// (charge.history two) before its first; stripe-go's own retries of them
// take none.
func Limits(key string) []connector.RateLimit {
	n := 100
	if strings.HasPrefix(key, "sk_test_") || strings.HasPrefix(key, "rk_test_") {
		n = 25
	}
	return []connector.RateLimit{{Requests: n, Per: "1s", Calls: "reads"}, {Requests: n, Per: "1s", Calls: "writes"}}
}

// requestsPerCall is how many requests a call of a tool sends, when more
// than one: charge.history reads a page of charges and a page of the
// customer's invoices. Each takes a token.
var requestsPerCall = map[string]int{"charge.history": 2}

// buckets are the process's Stripe token buckets, by API root and key.
var buckets ratelimit.Set

// Connector calls Stripe for the connector's tools. It is safe for
// concurrent use.
type Connector struct {
	key     string
	timeout time.Duration
	client  *stripeapi.Client
	limits  *ratelimit.Buckets
}

// New returns a connector for cfg. It sends nothing; see
// [Connector.Check] for a preflight. Its errors never contain the key.
func New(cfg Config) (*Connector, error) {
	for _, r := range cfg.APIKey {
		if r <= ' ' || r == 0x7f || r > '~' {
			return nil, errors.New("stripe: the API key contains whitespace, control or non-ASCII characters")
		}
	}
	bc := &stripeapi.BackendConfig{
		// Every attempt stripe-go makes is seen, so that a call whose
		// earlier attempt may have been applied is not reported as
		// definitely failed ([ErrOutcomeUnknown]).
		HTTPClient: trackingClient(cfg.HTTPClient),
		// Errors are returned to the caller; stripe-go must not also
		// write them to stderr.
		LeveledLogger: &stripeapi.LeveledLogger{Level: stripeapi.LevelNull},
	}
	if cfg.BaseURL != "" {
		u, err := url.Parse(cfg.BaseURL)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https"):
			// The text of err would quote the URL; it may hold secrets.
			return nil, errors.New("stripe: BaseURL must be an absolute http or https URL, like \"http://127.0.0.1:12111\"")
		case u.Host == "":
			return nil, errors.New("stripe: BaseURL has no host")
		case u.User != nil:
			return nil, errors.New("stripe: BaseURL must not carry user information (credentials belong in APIKey)")
		case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
			return nil, errors.New("stripe: BaseURL must not have a query or fragment")
		}
		bc.URL = stripeapi.String(strings.TrimRight(cfg.BaseURL, "/"))
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	rl := cfg.RateLimits
	if rl == nil {
		rl = Limits(cfg.APIKey)
	}
	limits, err := ratelimit.Compile(rl, func(name string) bool { _, ok := tools[name]; return ok }, "stripe: rateLimits")
	if err != nil {
		return nil, err
	}
	root := cfg.BaseURL
	if root == "" {
		root = "https://api.stripe.com"
	}
	return &Connector{
		key:     cfg.APIKey,
		timeout: timeout,
		client:  stripeapi.NewClient(cfg.APIKey, stripeapi.WithBackends(stripeapi.NewBackendsWithConfig(bc))),
		limits:  buckets.For(limits, strings.TrimRight(root, "/"), map[string]string{"apiKey": cfg.APIKey}),
	}, nil
}

type idempotencyKeyCtx struct{}

// WithIdempotencyKey returns a context under which [Connector.Call] sends
// key as Stripe's Idempotency-Key on the requests that change something
// (today only charge.refund's), so that a call retried with the same key is
// executed by Stripe at most once: Stripe answers the retry with the first
// response. Derive the key from the run and the call, never at random.
//
// The key must be 1 to 255 printable ASCII characters, without leading or
// trailing spaces; Call rejects any other key rather than alter it. An empty
// key means none: stripe-go then makes up a random key per call, which
// protects only its own network retries.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

func idempotencyKey(ctx context.Context) (string, error) {
	key, _ := ctx.Value(idempotencyKeyCtx{}).(string)
	if key == "" {
		return "", nil
	}
	if len(key) > 255 {
		return "", fmt.Errorf("idempotency key is %d bytes long, at most 255 are allowed", len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < ' ' || c > '~' {
			return "", fmt.Errorf("idempotency key has a byte 0x%02x at offset %d; only printable ASCII is allowed", c, i)
		}
	}
	if key[0] == ' ' || key[len(key)-1] == ' ' {
		return "", errors.New("idempotency key has leading or trailing spaces")
	}
	return key, nil
}

// tool is one tool's implementation: it decodes args and calls Stripe.
type tool func(c *Connector, ctx context.Context, args []byte) (any, error)

var tools = map[string]tool{
	"charge.history":       (*Connector).chargeHistory,
	"invoice.list":         (*Connector).invoiceList,
	"billing_customer.get": (*Connector).billingCustomerGet,
	"charge.get":           (*Connector).chargeGet,
	"charge.refund":        (*Connector).chargeRefund,
}

// Call calls the tool named tool (compared byte for byte) with args, the
// JSON object of its arguments (nil or empty means {}), and returns its
// result: a value whose JSON encoding matches the tool's outputSchema.
//
// The runtime validates args against the tool's inputSchema first; Call
// checks them again and reports a mismatch as [ErrInvalidArguments]
// without calling Stripe. An unknown tool is [ErrUnknownTool], naming it.
// Stripe's own errors are [*Error]; when a request that changes
// something may have been applied although the call failed, the error
// also wraps [ErrOutcomeUnknown]. Call is bounded by [Config].Timeout.
func (c *Connector) Call(ctx context.Context, tool string, args []byte) (result any, err error) {
	impl, ok := tools[tool]
	if !ok {
		return nil, fmt.Errorf("stripe: %w %q; the Stripe connector has %s", ErrUnknownTool, tool, quotedNames())
	}
	if c.key == "" {
		return nil, ErrNoAPIKey
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	if err := c.limits.Take(ctx, Provider, ratelimit.Tool{Name: tool, Writes: writes()[tool], Requests: requestsPerCall[tool]}); err != nil {
		return nil, fmt.Errorf("stripe: %w (nothing was sent)", err)
	}
	ctx, log := withAttemptLog(ctx)
	result, err = impl(c, ctx, args)
	if err != nil && log.mayHaveApplied() {
		return nil, fmt.Errorf("%w; %w", err, ErrOutcomeUnknown)
	}
	return result, err
}

// Check is a preflight: it makes one cheap authenticated request (listing
// at most one charge, GET /v1/charges?limit=1) and returns nil when Stripe
// accepts the key. A key Stripe does not know is an [*Error] with
// HTTPStatus 401. A valid restricted key without permission to read charges
// (HTTP 403) passes: it authenticates, and each tool's permission is
// checked by Stripe when it is called. Check's errors never contain the key.
func (c *Connector) Check(ctx context.Context) error {
	if c.key == "" {
		return ErrNoAPIKey
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	params := &stripeapi.ChargeListParams{}
	params.Limit = stripeapi.Int64(1)
	params.Single = true
	for _, err := range c.client.V1Charges.List(ctx, params) {
		if err != nil {
			var se *stripeapi.Error
			if errors.As(err, &se) && se.HTTPStatusCode == http.StatusForbidden {
				return nil
			}
			return c.apiError("", err)
		}
		break
	}
	return nil
}

func (c *Connector) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout < 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.timeout)
}

func quotedNames() string {
	names := make([]string, 0, len(tools))
	for name := range tools {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, n := range names {
		names[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(names, ", ")
}
