package llm

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// BaseURL checks raw, a driver's base URL: an http(s) URL with a host and
// without user information. It returns raw without its query and
// fragment, for errors to show. Errors are prefixed with provider and
// never hold user information.
func BaseURL(provider, raw string) (shown string, err error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s: the base URL %q is not an http(s) URL", provider, raw)
	}
	if u.User != nil {
		return "", fmt.Errorf("%s: the base URL holds user information; pass the API key as APIKey", provider)
	}
	s := *u
	s.RawQuery, s.Fragment = "", ""
	return s.String(), nil
}

// KeyShown is how a driver's Config shows its API key when printed:
// "unset" or "[redacted]", never the key.
func KeyShown(key string) string {
	if key == "" {
		return "unset"
	}
	return "[redacted]"
}

// RequestError returns the error of a request to base that failed other
// than with an API error: ctx's error when ctx is done, else err without
// key or the URL's query, prefixed with provider. It unwraps to err (or
// ctx's error). A connection error (a *url.Error: refused, reset, DNS,
// TLS) is transient ([driver.Transient]); ctx's error is not.
func RequestError(ctx context.Context, provider, base, key string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", provider, ctx.Err())
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// Not ue.Error(): its URL may hold a query the base URL was given.
		return &RedactedError{Msg: Redact(fmt.Sprintf("%s: %s %s: %v", provider, ue.Op, base, ue.Err), key), Err: err, Retry: true}
	}
	return Wrap(provider+": request to "+base, err, key)
}

// DefaultTimeout is the default of a model driver's per-request timeout.
const DefaultTimeout = 60 * time.Second

// TimeoutError returns the error of a request to url that ran out of its
// per-request timeout (not ctx's deadline), or nil when err is not that.
// It is transient ([driver.Transient]).
func TimeoutError(ctx context.Context, provider, url string, timeout time.Duration, err error) error {
	if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return &RedactedError{Msg: fmt.Sprintf("%s: the request to %s timed out after %s (setting \"timeout\")", provider, url, timeout), Err: err, Retry: true}
}
