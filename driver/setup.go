package driver

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Setup is what the runtime supplies, besides an agent's settings from
// the harness file, to build a driver: the FromSettings constructors of
// packages driver/transcript, driver/openai and driver/anthropic take it.
// A nil *Setup means the zero Setup.
type Setup struct {
	// Secret returns the value of a named secret, for a setting that names
	// one (apiKeySecret); with a harness, its resolver's Secrets.Resolve. Nil:
	// such a setting is an error. Its errors must not hold a value.
	Secret func(name string) (string, error)
	// Expand replaces the ${secret:NAME} references in a string setting
	// by the secrets' values (and "$${" by "${"); with a harness,
	// its resolver's Secrets.Expand. Nil: a setting that holds "${" is an
	// error, so a reference is never sent as literal text.
	Expand func(s string) (string, error)
	// Path resolves a relative path in a setting (transcript) against the
	// harness file's directory; with a harness, Harness.ResolvePath.
	// Nil: paths are used as written.
	Path func(p string) string
	// PlaybookID is the manifest id of the playbook to run; it replaces
	// "{playbook}" in a transcript path. Empty: a path holding
	// "{playbook}" is an error.
	PlaybookID string
	// HTTPClient is the client the model drivers send requests with. Nil:
	// their own client (see their Config.HTTPClient).
	HTTPClient *http.Client
	// Binding says where the agent's binding is in the harness file
	// ("harness.yaml:12"), for the model drivers' errors about requests
	// (an API error, a request given up after its retries, a timeout).
	// Empty: errors do not say.
	Binding string
	// External is the driver of agents bound to driver "mcp": external
	// MCP clients acting as a step's agent, served by this process (an
	// *external.Exchange's Driver). Nil: nothing in this process serves
	// them, and such a step returns [ErrAwaitAgent].
	External Driver
}

// ErrTurnLimit: a model driver sent as many requests as its maxTurns
// allows and the model still had not given its final answer.
var ErrTurnLimit = errors.New("the model did not finish the step within its turn limit")

// ProviderError is a model API's answer that is an error (HTTP status 4xx
// or 5xx), as a model driver returns it. It never holds the API key.
type ProviderError struct {
	// Provider is the driver's name ("openai", "anthropic").
	Provider string
	// Model is the model asked for; BaseURL is where (without any query).
	Model, BaseURL string
	// URL is the request's URL (BaseURL and the endpoint's path, such as
	// "https://api.anthropic.com/v1/messages"); empty when not known.
	URL string
	// Attempts is how many times the request was sent (its retries
	// included; 0 when not known). More than one: the SDK retried and
	// gave up.
	Attempts int
	// Binding is where the agent's binding is in the harness file
	// ("harness.yaml:12", see [Setup].Binding); empty when not known.
	Binding string
	// StatusCode is the HTTP status code.
	StatusCode int
	// Type is the provider's error type or code, when it sends one
	// ("invalid_api_key", "authentication_error").
	Type string
	// Message is the provider's message, with the API key (and anything
	// shaped like one) replaced by "[redacted]".
	Message string
}

func (e *ProviderError) Error() string {
	msg := e.Provider + ": "
	if e.Model != "" {
		at := e.URL
		if at == "" {
			at = e.BaseURL
		}
		msg += fmt.Sprintf("model %q at %s: ", e.Model, at)
	}
	msg += fmt.Sprintf("the API answered %d", e.StatusCode)
	if t := http.StatusText(e.StatusCode); t != "" {
		msg += " " + t
	}
	if e.Type != "" {
		msg += " (" + e.Type + ")"
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg + AttemptsNote(e.Attempts, e.Binding)
}

// AttemptsNote is what a model driver's request error ends with: how
// often the request was sent, when more than once, and where the agent's
// binding is, when known: " (gave up after 3 attempts; agent binding
// harness.yaml:12)". It is empty when there is neither.
func AttemptsNote(attempts int, binding string) string {
	var parts []string
	if attempts > 1 {
		parts = append(parts, fmt.Sprintf("gave up after %d attempts", attempts))
	}
	if binding != "" {
		parts = append(parts, "agent binding "+binding)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}
