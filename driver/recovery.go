package driver

import (
	"context"
	"errors"
	"fmt"
)

// Prober is implemented by a driver that can check, before any step runs,
// that its model API is reachable, accepts its credentials and serves its
// model: `openplaybook check` (and `run`, before it executes anything)
// calls Probe once per agent binding. The model drivers implement it with
// one cheap authenticated request (see each package's Probe); a driver
// with nothing to reach (transcript, mcp) does not.
//
// Probe returns nil when the API answered and lists (or serves) the model;
// an error wrapping [ErrUnknownModel] when it answered but does not know
// the model; a *[ProviderError] when it answered with an error status
// (401 or 403: the key is refused); any other error when it could not be
// reached (connection refused, a timeout, TLS). No error holds the API key.
type Prober interface {
	Probe(ctx context.Context) error
}

// ErrUnknownModel: the model API answered a [Prober]'s request and does
// not list (or does not serve) the model the binding names.
var ErrUnknownModel = errors.New("the API does not list the model")

// UnknownModelError is the error of a probe whose API does not know the
// model. It unwraps to [ErrUnknownModel].
type UnknownModelError struct {
	// Provider is the driver's name; Model the model asked for; BaseURL
	// where (without any query).
	Provider, Model, BaseURL string
	// Listed is how many models the API listed (-1 when it was asked for
	// the model alone, as Anthropic's GET /v1/models/{model_id} is).
	Listed int
	// Suggest names a listed model close to Model ("" when none is).
	Suggest string
}

func (e *UnknownModelError) Error() string {
	msg := fmt.Sprintf("%s: the API at %s does not know the model %q", e.Provider, e.BaseURL, e.Model)
	if e.Listed >= 0 {
		msg = fmt.Sprintf("%s: the API at %s does not list the model %q (it lists %d)", e.Provider, e.BaseURL, e.Model, e.Listed)
	}
	if e.Suggest != "" {
		msg += fmt.Sprintf("; did you mean %q?", e.Suggest)
	}
	return msg
}

// Unwrap returns [ErrUnknownModel].
func (e *UnknownModelError) Unwrap() error { return ErrUnknownModel }

// Transient reports whether err, a step's error as a driver returned it,
// is a failure that may pass when the step is tried again: a model API's
// answer 408, 409, 429 or 5xx (a *[ProviderError]), a request that ran
// out of its per-request timeout, a connection that could not be made or
// broke (any error in err's chain with a method Transient() bool that
// returns true). Everything else is not: a refused reply
// ([ErrReplyRefused]), the turn limit, a 4xx other than those, the run's
// context ending (cancelled, the step's deadline), a runtime error. The
// runtime records the answer with the step's step.failed record, and
// `openplaybook retry` starts a new attempt only of a step that failed
// transiently (docs/runtime.md, "Retrying a failed step").
func Transient(err error) bool {
	var t interface{ Transient() bool }
	return errors.As(err, &t) && t.Transient()
}

// Transient reports whether the status is one a model API answers for a
// failure that may pass (408, 409, 429, 5xx): the statuses the SDKs
// retry.
func (e *ProviderError) Transient() bool {
	s := e.StatusCode
	return s == 408 || s == 409 || s == 429 || s >= 500
}
