package settings

import (
	"fmt"
	"net/http"
	"time"

	"github.com/openplaybook/openplaybook/driver"
)

// Common holds the settings every model driver (driver/openai,
// driver/anthropic) reads alike, as the harness file has them.
type Common struct {
	// Model is "model"; BaseURL is "baseURL" ("" when absent); KeySecret
	// is "apiKeySecret", a secret's name ("" when absent).
	Model, BaseURL, KeySecret string
	// MaxTurns is "maxTurns" (0 when absent). MaxRetries is "maxRetries":
	// 0 when absent, -1 for a "maxRetries" of 0 (never retry).
	MaxTurns, MaxRetries int
	// Timeout is "timeout", the per-request timeout (0 when absent).
	Timeout time.Duration
	// StepTimeout is "stepTimeout", the whole-step deadline (0 when
	// absent: none).
	StepTimeout time.Duration
	// MaxResultBytes is "maxResultBytes", the most bytes of a tool
	// result's text the model is shown (0 when absent: the default).
	MaxResultBytes int
}

// Common reads "model" (required; what describes it for the error),
// "baseURL" and "apiKeySecret", then calls own (when not nil) to read the
// driver's own settings, then reads "maxTurns" (at least 1) and
// "maxRetries" (at least 0), "timeout" and "stepTimeout" (durations) and
// "maxResultBytes" (at least 1). Problems are reported in that order.
func (r *Reader) Common(what string, own func()) Common {
	var c Common
	c.Model = r.String("model", true, what)
	c.BaseURL = r.String("baseURL", false, "the API's base URL")
	c.KeySecret = r.SecretName("apiKeySecret")
	if own != nil {
		own()
	}
	c.MaxTurns, _ = r.Int("maxTurns", 1)
	if n, ok := r.Int("maxRetries", 0); ok {
		c.MaxRetries = n
		if n == 0 {
			c.MaxRetries = -1
		}
	}
	c.Timeout = r.Duration("timeout")
	c.StepTimeout = r.Duration("stepTimeout")
	c.MaxResultBytes, _ = r.Int("maxResultBytes", 1)
	return c
}

// Resolved holds what a model driver's Config takes from [Common] and
// the [driver.Setup]: values with their secret references expanded and
// the API key.
type Resolved struct {
	Model, BaseURL, APIKey string
	HTTPClient             *http.Client
	// Binding is setup.Binding: where the binding is, for errors.
	Binding string
}

// Resolve expands the ${secret:NAME} references of "model" and "baseURL"
// ([Expand]) and resolves the secret "apiKeySecret" names ([Secret]).
// Without "apiKeySecret" it is an error unless "baseURL" is set; keyWhat
// describes the setting for that error. A nil setup means the zero
// [driver.Setup]. Errors name the setting, never a secret's value.
func (c Common) Resolve(driverName, keyWhat string, setup *driver.Setup) (Resolved, error) {
	if setup == nil {
		setup = &driver.Setup{}
	}
	res := Resolved{HTTPClient: setup.HTTPClient, Binding: setup.Binding}
	var err error
	if res.Model, err = Expand(driverName, "model", c.Model, setup); err != nil {
		return Resolved{}, err
	}
	if res.BaseURL, err = Expand(driverName, "baseURL", c.BaseURL, setup); err != nil {
		return Resolved{}, err
	}
	if c.KeySecret == "" && c.BaseURL == "" {
		return Resolved{}, Missing(driverName, "apiKeySecret", keyWhat)
	}
	if c.KeySecret != "" {
		if res.APIKey, err = Secret(driverName, "apiKeySecret", c.KeySecret, setup); err != nil {
			return Resolved{}, err
		}
	}
	return res, nil
}

// NewError returns err, the error of the driver's New for a Config built
// from res, unchanged, unless "baseURL" held secret references: then an
// error that does not show the expanded base URL.
func (c Common) NewError(driverName string, res Resolved, err error) error {
	if err != nil && res.BaseURL != c.BaseURL {
		// The base URL holds a secret's value: never show it.
		return fmt.Errorf("%s driver: setting \"baseURL\" (its secret references expanded) is not a usable http(s) URL", driverName)
	}
	return err
}
