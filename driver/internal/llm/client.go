package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/openplaybook/openplaybook/driver"
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
// TLS) is transient ([driver.Transient]); ctx's error and a
// *[RedirectError] are not.
func RequestError(ctx context.Context, provider, base, key string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", provider, ctx.Err())
	}
	var re *RedirectError
	if errors.As(err, &re) {
		return &RedactedError{Msg: Redact(re.Error(), key), Err: err}
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

// Noted returns err with [driver.AttemptsNote] of attempts and binding
// appended to its text; it unwraps to err. It returns err itself when
// the note is empty or err is nil.
func Noted(err error, attempts int, binding string) error {
	note := driver.AttemptsNote(attempts, binding)
	if err == nil || note == "" {
		return err
	}
	return &RedactedError{Msg: err.Error() + note, Err: err}
}

type attemptsKey struct{}

// Attempts counts the HTTP attempts of one request, its retries
// included. The zero value is ready; it is safe for concurrent use.
type Attempts struct{ n atomic.Int64 }

// N returns how many attempts were sent.
func (a *Attempts) N() int { return int(a.n.Load()) }

// CountAttempts returns ctx carrying a fresh counter of the attempts of a
// request sent with it; each attempt counts itself with [Attempted] (a
// middleware of the SDK's client calls it).
func CountAttempts(ctx context.Context) (context.Context, *Attempts) {
	a := &Attempts{}
	return context.WithValue(ctx, attemptsKey{}, a), a
}

// Attempted counts the attempt req is, on the counter its context
// carries ([CountAttempts]), if any.
func Attempted(req *http.Request) {
	if a, ok := req.Context().Value(attemptsKey{}).(*Attempts); ok {
		a.n.Add(1)
	}
}

// Step is the whole-step deadline of one run of a step (a model driver's
// setting "stepTimeout"). Get one with [StartStep].
type Step struct {
	provider, stepID, binding string
	timeout                   time.Duration
	deadline                  time.Time
	now                       func() time.Time
}

// errStepDeadline is the cause of a step context's end at its deadline.
var errStepDeadline = errors.New("step deadline")

// StartStep starts the deadline of a step: timeout from now (none when
// timeout <= 0), read on the clock now (time.Now when nil) by
// [Step.Check]. The returned context ends when timeout has passed: the
// driver sends its model requests with it, and passes tool calls the
// context it was given (a call that runs when the deadline passes runs
// to its end, since cutting a side effect leaves its outcome unknown).
// Call cancel when the step is done.
func StartStep(ctx context.Context, provider, stepID string, timeout time.Duration, binding string, now func() time.Time) (*Step, context.Context, context.CancelFunc) {
	if now == nil {
		now = time.Now
	}
	s := &Step{provider: provider, stepID: stepID, binding: binding, timeout: timeout, now: now}
	if timeout <= 0 {
		c, cancel := context.WithCancel(ctx)
		return s, c, cancel
	}
	s.deadline = now().Add(timeout)
	c, cancel := context.WithTimeoutCause(ctx, timeout, errStepDeadline)
	return s, c, cancel
}

// Check returns the step's timeout error when its deadline has passed,
// else nil. A driver calls it before each model request and each tool
// call: nothing starts after the deadline.
func (s *Step) Check() error {
	if s.timeout <= 0 || s.now().Before(s.deadline) {
		return nil
	}
	return s.err()
}

// Ended returns the step's timeout error when ctx, the context of
// [StartStep], ended at the deadline; else nil.
func (s *Step) Ended(ctx context.Context) error {
	if s.timeout > 0 && errors.Is(context.Cause(ctx), errStepDeadline) {
		return s.err()
	}
	return nil
}

func (s *Step) err() error {
	return fmt.Errorf("%s: step %q: %w of %s (setting \"stepTimeout\"%s)", s.provider, s.stepID, driver.ErrStepTimeout, s.timeout, bindingNote(s.binding))
}

func bindingNote(binding string) string {
	if binding == "" {
		return ""
	}
	return "; agent binding " + binding
}

// NoRedirects returns a copy of c (http.DefaultClient when nil) that
// follows no redirect: a 3xx answer comes back as it is, for
// [Redirected] to refuse. c itself is not changed. A redirect would send
// the API key and the whole conversation to wherever the Location header
// points: another port, another host.
func NoRedirects(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	n := *c
	n.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &n
}

// RedirectError is the error of a request whose answer was a redirect
// (any 3xx status): no driver follows one. It is not transient: asking
// again gets the same answer.
type RedirectError struct {
	// Provider is the driver's name; URL the request's URL without its
	// query.
	Provider, URL string
	// StatusCode is the answer's status (301, 302, 303, 307, 308, ...).
	StatusCode int
	// Location is the scheme and host the answer pointed to ("" when it
	// named none, or not as a URL); never its path or query.
	Location string
}

func (e *RedirectError) Error() string {
	to := ""
	if e.Location != "" {
		to = " to " + e.Location
	}
	return fmt.Sprintf("%s: %s answered %d %s%s; redirects are not followed (the API key and the conversation go only to the base URL): set baseURL to the API's own address",
		e.Provider, e.URL, e.StatusCode, http.StatusText(e.StatusCode), to)
}

// Redirected is the check of one attempt's answer, for an SDK middleware
// on a client from [NoRedirects]: given what the next handler returned
// for req, it returns res and err unchanged unless res has a 3xx status;
// then the body is closed, the header x-should-retry dropped (so the SDK
// does not retry: asking again gets the same answer) and the error is a
// *[RedirectError]. No attempt, retries included, goes anywhere but the
// base URL.
func Redirected(provider string, req *http.Request, res *http.Response, err error) (*http.Response, error) {
	if err != nil || res == nil || res.StatusCode < 300 || res.StatusCode > 399 {
		return res, err
	}
	res.Body.Close()
	res.Body = http.NoBody
	res.Header.Del("X-Should-Retry")
	u := *req.URL
	u.RawQuery, u.Fragment, u.User = "", "", nil
	e := &RedirectError{Provider: provider, URL: u.String(), StatusCode: res.StatusCode}
	if loc, lerr := url.Parse(res.Header.Get("Location")); lerr == nil && loc.Host != "" {
		e.Location = (&url.URL{Scheme: loc.Scheme, Host: loc.Host}).String()
	}
	return res, e
}
