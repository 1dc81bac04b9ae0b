package stripe

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	stripeapi "github.com/stripe/stripe-go/v82"
)

var (
	// ErrUnknownTool is wrapped by the error [Connector.Call] returns for a
	// tool name this connector does not have.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrInvalidArguments is wrapped by the error [Connector.Call] returns
	// when the arguments do not fit the tool's inputSchema. Nothing was sent
	// to Stripe.
	ErrInvalidArguments = errors.New("invalid arguments")
	// ErrNoAPIKey is returned by [Connector.Call] and [Connector.Check] when
	// the connector has no API key. Nothing was sent to Stripe.
	ErrNoAPIKey = errors.New("stripe: no API key configured")
)

// Error is an error answered by Stripe (or stripe-mock): an HTTP status
// with Stripe's error object. Retrieve it with errors.As.
//
// Message is Stripe's message with the API key and anything that looks like
// a key or an Authorization value removed; no field ever holds the key.
type Error struct {
	// Tool is the tool being called, or "" for [Connector.Check].
	Tool string
	// HTTPStatus is the HTTP status code (400, 401, 402, 403, 404, 429, 5xx).
	HTTPStatus int
	// Type is Stripe's error type: "api_error", "card_error",
	// "idempotency_error" or "invalid_request_error".
	Type string
	// Code is Stripe's error code when it gives one, such as
	// "resource_missing" or "charge_already_refunded".
	Code string
	// DeclineCode is the card issuer's decline code for card errors.
	DeclineCode string
	// Param is the request parameter the error is about, if any.
	Param string
	// Message is Stripe's human-readable message, redacted.
	Message string
	// RequestID is Stripe's request id ("req_..."), for support.
	RequestID string
}

// Error formats the error as
// "stripe: <tool>: <type> <code>: <message> (HTTP <status>, request <id>)",
// leaving out the parts Stripe did not give.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("stripe: ")
	if e.Tool != "" {
		b.WriteString(e.Tool)
	} else {
		b.WriteString("check")
	}
	b.WriteString(": ")
	kind := strings.TrimSpace(strings.Join([]string{e.Type, e.Code, e.DeclineCode}, " "))
	if kind != "" {
		b.WriteString(strings.Join(strings.Fields(kind), " "))
		b.WriteString(": ")
	}
	if e.Message != "" {
		b.WriteString(e.Message)
	} else {
		b.WriteString("request failed")
	}
	if e.Param != "" {
		fmt.Fprintf(&b, " (param %q)", e.Param)
	}
	b.WriteString(" (HTTP ")
	fmt.Fprint(&b, e.HTTPStatus)
	if e.RequestID != "" {
		b.WriteString(", request ")
		b.WriteString(e.RequestID)
	}
	b.WriteString(")")
	return b.String()
}

// keyLike matches Stripe API keys (secret, restricted, publishable; live
// and test, also Stripe's masked form "sk_test_****abcd") and Authorization
// values, wherever a message quotes them. stripe-mock quotes the whole
// Authorization header it rejected; Stripe quotes a masked key.
var keyLike = regexp.MustCompile(`\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9*]*|\bBearer\s+[^\s'"]+`)

// redact removes key from s, and anything that looks like a key or an
// Authorization value.
func redact(s, key string) string {
	if key != "" {
		s = strings.ReplaceAll(s, key, "[redacted]")
	}
	return keyLike.ReplaceAllString(s, "[redacted]")
}

// apiError turns an error from stripe-go into this package's error: an
// [*Error] for Stripe's answers, otherwise the error (a network error, a
// cancelled context) under a "stripe: <tool>: " prefix. The result never
// contains the key: when the text had to be redacted, the original error
// is not wrapped (its text would still be reachable through Unwrap).
func (c *Connector) apiError(tool string, err error) error {
	var se *stripeapi.Error
	if errors.As(err, &se) {
		return &Error{
			Tool:        tool,
			HTTPStatus:  se.HTTPStatusCode,
			Type:        redact(string(se.Type), c.key),
			Code:        redact(string(se.Code), c.key),
			DeclineCode: redact(string(se.DeclineCode), c.key),
			Param:       redact(se.Param, c.key),
			Message:     redact(se.Msg, c.key),
			RequestID:   redact(se.RequestID, c.key),
		}
	}
	what := tool
	if what == "" {
		what = "check"
	}
	msg := err.Error()
	if clean := redact(msg, c.key); clean != msg {
		return fmt.Errorf("stripe: %s: %s", what, clean)
	}
	return fmt.Errorf("stripe: %s: %w", what, err)
}

// argError reports arguments that do not fit the tool's inputSchema.
func argError(tool, format string, args ...any) error {
	return fmt.Errorf("stripe: %s: %w: %s", tool, ErrInvalidArguments, fmt.Sprintf(format, args...))
}
