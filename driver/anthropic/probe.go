package anthropic

import (
	"context"
	"errors"
	"net/url"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/internal/llm"
)

// Probe checks that the API is reachable, accepts the key and serves the
// model: one GET {BaseURL}/v1/models/{model} (Anthropic's "Get a Model",
// which also resolves an alias such as "claude-sonnet-4-5"), not
// retried. It returns nil, a *[driver.UnknownModelError] when the API
// answers 404 not_found_error, a *[driver.ProviderError] for any other
// error status (401 authentication_error: the key is refused; 403
// permission_error), or the request's error (unreachable, out of
// Config.Timeout). No error holds the API key.
func (d *Driver) Probe(ctx context.Context) error {
	_, err := d.models.Get(ctx, d.cfg.Model, sdk.ModelGetParams{}, option.WithMaxRetries(0))
	if err == nil {
		return nil
	}
	var apiErr *sdk.Error
	if ctx.Err() == nil && errors.As(err, &apiErr) && apiErr.StatusCode == 404 && apiErr.Type() == "not_found_error" {
		return &driver.UnknownModelError{Provider: Name, Model: d.cfg.Model, BaseURL: d.base, Listed: -1}
	}
	probeURL := strings.TrimSuffix(d.base, "/") + "/v1/models/" + url.PathEscape(d.cfg.Model)
	if terr := llm.TimeoutError(ctx, Name, probeURL, d.cfg.Timeout, err); terr != nil {
		return terr
	}
	return d.clean(ctx, err, 1) // a probe is never retried
}

var _ driver.Prober = (*Driver)(nil)
