package httpconn

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/connector/ratelimit"
	"github.com/openplaybook/openplaybook/internal/tracectx"
	"github.com/openplaybook/openplaybook/registry"
)

// built is one request, ready to send (again, on a retry).
type built struct {
	method, url string
	header      http.Header
	body        []byte
}

// build makes the request of t from the arguments. Its errors are the
// caller's (nothing was sent).
func (c *Connection) build(t *tool, in any, key string) (*built, error) {
	path, err := expandPath(t.path, in)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	for _, e := range t.query {
		v, ok, err := e.t.eval(in)
		if err != nil {
			return nil, fmt.Errorf("query parameter %s: %v", e.name, err)
		}
		if !ok || v == nil {
			continue
		}
		if list, isList := v.([]any); isList {
			for _, x := range list {
				s, ok := scalarString(x)
				if !ok {
					return nil, fmt.Errorf("query parameter %s: an array of scalars is needed, found %s in it", e.name, kindOf(x))
				}
				q.Add(e.name, s)
			}
			continue
		}
		s, ok := scalarString(v)
		if !ok {
			return nil, fmt.Errorf("query parameter %s: a scalar or an array is needed, found %s", e.name, kindOf(v))
		}
		q.Set(e.name, s)
	}
	for param, role := range c.auth.Query {
		q.Set(param, c.secrets[role])
	}
	b := &built{method: t.method, url: c.root + path, header: http.Header{}}
	if len(q) > 0 {
		b.url += "?" + q.Encode()
	}
	for k, v := range c.p.spec.Headers {
		b.header.Set(k, v)
	}
	for _, e := range t.headers {
		v, ok, err := e.t.eval(in)
		if err != nil {
			return nil, fmt.Errorf("header %s: %v", e.name, err)
		}
		if !ok || v == nil {
			continue
		}
		s, ok := scalarString(v)
		if !ok || !headerSafe(s) {
			return nil, fmt.Errorf("header %s: a one-line scalar is needed", e.name)
		}
		b.header.Set(e.name, s)
	}
	var body any
	switch {
	case t.graphql != "":
		o := newObject()
		o.set("query", t.graphql)
		if t.variables != nil {
			v, ok, err := evalTop(t.variables, in)
			if err != nil {
				return nil, fmt.Errorf("GraphQL variables: %v", err)
			}
			if ok {
				o.set("variables", v)
			}
		}
		body = o
	case t.body != nil:
		v, ok, err := evalTop(t.body, in)
		if err != nil {
			return nil, fmt.Errorf("body: %v", err)
		}
		if ok {
			body = v
		}
	}
	if len(c.auth.Body) > 0 || (key != "" && t.retryWrite && t.idemBody != "") {
		o, isObj := body.(*object)
		if body == nil {
			o, isObj = newObject(), true
		}
		if !isObj {
			return nil, errors.New("body: credentials and idempotency keys go in an object body")
		}
		for _, member := range sortedKeys(c.auth.Body) {
			o.set(member, c.secrets[c.auth.Body[member]])
		}
		if key != "" && t.retryWrite && t.idemBody != "" {
			o.set(t.idemBody, key)
		}
		body = o
	}
	if key != "" && t.retryWrite && t.idemHeader != "" {
		b.header.Set(t.idemHeader, key)
	}
	if body != nil {
		if t.form {
			form := url.Values{}
			if err := flattenForm(form, "", body); err != nil {
				return nil, fmt.Errorf("body: %v", err)
			}
			b.body = []byte(form.Encode())
			b.header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			enc, err := encode(body)
			if err != nil {
				return nil, fmt.Errorf("body: %v", err)
			}
			b.body = enc
			b.header.Set("Content-Type", "application/json")
		}
	}
	if b.header.Get("Accept") == "" {
		b.header.Set("Accept", "application/json")
	}
	b.header.Set("User-Agent", "openplaybook")
	return b, nil
}

// headerSafe reports whether s can be a header value: no control
// character but tab (Go's transport refuses one only once the request is
// under way, which would make a refused write look possibly sent).
func headerSafe(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f })
}

// expandPath fills the path's {name} placeholders from the arguments'
// top-level members, percent-encoded ("{name*}" keeps "/").
func expandPath(p string, in any) (string, error) {
	var sb strings.Builder
	for {
		i := strings.IndexByte(p, '{')
		if i < 0 {
			sb.WriteString(p)
			return sb.String(), nil
		}
		j := strings.IndexByte(p[i:], '}') + i
		sb.WriteString(p[:i])
		name := p[i+1 : j]
		keep := strings.HasSuffix(name, "*")
		name = strings.TrimSuffix(name, "*")
		v, _ := pointer(in, []string{name})
		s, ok := scalarString(v)
		if !ok || s == "" {
			return "", fmt.Errorf("argument %q is needed in the request path (a non-empty string or number)", name)
		}
		// A "." or ".." between slashes or backslashes is refused even
		// where the slash is escaped: a server (or a proxy before it)
		// that decodes %2F, or reads a backslash as "/", before it resolves
		// dot segments would take the request to another endpoint.
		if dotSegment(s) {
			return "", fmt.Errorf("argument %q has a \".\" or \"..\" segment", name)
		}
		if keep {
			parts := strings.Split(s, "/")
			for k, part := range parts {
				if part == "" {
					return "", fmt.Errorf("argument %q has an empty segment", name)
				}
				parts[k] = url.PathEscape(part)
			}
			sb.WriteString(strings.Join(parts, "/"))
		} else {
			sb.WriteString(url.PathEscape(s))
		}
		p = p[j+1:]
	}
}

// dotSegment reports whether s, split at "/" and backslash, has a "." or
// ".." part.
func dotSegment(s string) bool {
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == "." || part == ".." {
			return true
		}
	}
	return s == "." || s == ".."
}

// flattenForm encodes a body the way form APIs read nested members:
// a[b]=1, a[0]=x.
func flattenForm(form url.Values, prefix string, v any) error {
	switch v := v.(type) {
	case *object:
		for _, k := range v.keys {
			name := k
			if prefix != "" {
				name = prefix + "[" + k + "]"
			}
			if err := flattenForm(form, name, v.vals[k]); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range v {
			if err := flattenForm(form, fmt.Sprintf("%s[%d]", prefix, i), e); err != nil {
				return err
			}
		}
	case nil:
		form.Add(prefix, "")
	default:
		s, _ := scalarString(v)
		if prefix == "" {
			return errors.New("a form body must be an object")
		}
		form.Add(prefix, s)
	}
	return nil
}

// call runs one tool call: build, send with retries, read the answer and
// build the result. Its errors are shown to the agent (after redaction)
// and classify the outcome ([registry.Definite]).
func (c *Connection) call(ctx context.Context, t *tool, args jsontext.Value, key string) (jsontext.Value, error) {
	refuse := func(err error) error {
		return registry.Definite(fmt.Errorf("%s: %s (nothing was sent)", t.def.Name, c.redactor(err.Error())))
	}
	if len(args) == 0 {
		args = jsontext.Value("{}")
	}
	if t.hook != nil {
		var err error
		if args, err = t.hook(args); err != nil {
			return nil, refuse(err)
		}
	}
	in, err := decode(args)
	if err != nil {
		return nil, refuse(fmt.Errorf("the arguments are not valid JSON: %v", err))
	}
	if _, ok := in.(*object); !ok {
		return nil, refuse(errors.New("the arguments must be a JSON object"))
	}
	req, err := c.build(t, in, key)
	if err != nil {
		return nil, refuse(err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	writes := t.def.SideEffecting != nil && *t.def.SideEffecting
	// A write is retried only when the provider makes it idempotent and
	// the request carries the key (a call with no recorded place in a
	// run has none).
	retryable := !writes || (t.retryWrite && key != "")
	keyed := writes && t.retryWrite && key != ""
	// mayHaveApplied is set once an attempt of a write may have been
	// applied (its answer was lost, was a 5xx, or said the key's request
	// is in progress): a later error answer then leaves the outcome
	// unknown (refused).
	mayHaveApplied := false
	// refused is a definite error answer to this attempt: definite for
	// the call unless an earlier attempt may have been applied (this
	// answer may come before the provider looks the key up: a 401, a
	// 429, a validation error), then outcome-unknown.
	refused := func(err error) error {
		if mayHaveApplied {
			return fmt.Errorf("%w; an earlier attempt may have been applied, so the outcome is unknown", err)
		}
		return registry.Definite(err)
	}
	refreshed := false
	var last error
	for attempt := 1; ; attempt++ {
		ans, err := c.send(ctx, t, req)
		var ns *notSent
		if errors.As(err, &ns) {
			if errors.Is(ns.err, ratelimit.ErrLimited) {
				// The refusal names the limit and the tools, never a
				// credential: kept as an error callers can test.
				if mayHaveApplied {
					return nil, fmt.Errorf("%s: %w (this attempt was not sent, an earlier one may have been applied); the outcome is unknown", t.def.Name, ns.err)
				}
				return nil, registry.Definite(fmt.Errorf("%s: %w (nothing was sent)", t.def.Name, ns.err))
			}
			if mayHaveApplied {
				return nil, fmt.Errorf("%s: %s (this attempt was not sent, an earlier one may have been applied); the outcome is unknown", t.def.Name, c.redactor(ns.err.Error()))
			}
			return nil, registry.Definite(fmt.Errorf("%s: %s (nothing was sent)", t.def.Name, c.redactor(ns.err.Error())))
		}
		if err != nil {
			// The request may have reached the provider.
			last = fmt.Errorf("%s: %s %s: %s", t.def.Name, req.method, c.redactURL(req.url), c.redactor(netError(ctx, err, c.timeout)))
			mayHaveApplied = writes
			if retryable && attempt < MaxAttempts && ctx.Err() == nil && wait(ctx, backoff(attempt)) {
				continue
			}
			if !writes {
				return nil, registry.Definite(last)
			}
			return nil, fmt.Errorf("%w; the outcome is unknown: the request may have been applied", last)
		}
		switch {
		case ans.status == http.StatusUnauthorized && c.refresh != nil && !refreshed:
			refreshed = true
			if err := c.refresh.force(ctx, ans.sent); err != nil {
				return nil, refused(fmt.Errorf("%s: the provider refused the access token (401) and refreshing it failed: %s", t.def.Name, c.redactor(err.Error())))
			}
			attempt--
			continue
		case keyed && c.inProgress(t, ans):
			// Another request with this key is being processed: it is
			// this call's (the key is its place in the run), so it may
			// be applied. Same request, same key, after a backoff; never
			// a definite failure, or the call would be asked again under
			// a new key.
			mayHaveApplied = true
			last = fmt.Errorf("%s; a request with the same idempotency key is still in progress at the provider, so the outcome is unknown: it may be applied", c.providerError(t, req, ans))
			if attempt < MaxAttempts && c.waitRetry(ctx, ans, attempt) {
				continue
			}
			return nil, last
		case ans.status == http.StatusTooManyRequests || ans.status == http.StatusTooEarly || rateLimited(ans):
			// Not processed now (RFC 6585 section 4, RFC 8470 section
			// 5.2, a quota used up): definite unless an earlier attempt
			// may have been applied.
			last = refused(c.providerError(t, req, ans))
			if retryable && attempt < MaxAttempts && c.waitRetry(ctx, ans, attempt) {
				continue
			}
			return nil, last
		case ans.status >= 500:
			perr := c.providerError(t, req, ans)
			mayHaveApplied = writes
			if retryable && attempt < MaxAttempts && (ans.status == 500 || ans.status == 502 || ans.status == 503 || ans.status == 504) && wait(ctx, backoff(attempt)) {
				continue
			}
			if !writes {
				return nil, registry.Definite(perr)
			}
			return nil, fmt.Errorf("%w; the outcome is unknown: the provider may have applied the request", perr)
		case ans.status >= 300 && ans.status < 400:
			// Redirects are not followed (noRedirects): the request went
			// to an address the provider does not serve it at. A 303
			// answers a write the provider may have done.
			err := fmt.Errorf("%s; redirects are not followed (is the connection's baseURL right?)", c.providerError(t, req, ans))
			if loc := ans.header.Get("Location"); loc != "" {
				err = fmt.Errorf("%s; redirects to %s are not followed (is the connection's baseURL right?)", c.providerError(t, req, ans), clip(c.redactURL(loc), 200))
			}
			if writes && ans.status == http.StatusSeeOther {
				return nil, fmt.Errorf("%w; the outcome is unknown: the provider may have applied the request", err)
			}
			return nil, refused(err)
		case ans.status >= 400 || ans.status < 200 || ans.status >= 300:
			return nil, refused(c.providerError(t, req, ans))
		}
		v, err := c.answer(t, ans)
		if err != nil {
			var de *definiteAnswer
			stated := errors.As(err, &de)
			err = fmt.Errorf("%s: %s %s answered %d: %s", t.def.Name, req.method, c.redactURL(req.url), ans.status, c.redactor(err.Error()))
			if !writes || stated {
				return nil, refused(err)
			}
			return nil, fmt.Errorf("%w; the provider accepted the request, so it was probably applied", err)
		}
		return v, nil
	}
}

// inProgress reports whether ans, the answer to a write sent with an
// idempotency key, says a request with the same key is still being
// processed: a 409, or an error code the spec lists as in progress, and
// not a code it lists as a mismatch (see [Idempotency]).
func (c *Connection) inProgress(t *tool, ans *answer) bool {
	if ans.status < 400 || ans.status >= 500 {
		return false
	}
	var code string
	if v, err := decode(ans.body); err == nil {
		code = c.rawCode(v)
	}
	if t.idem != nil && code != "" {
		if slices.Contains(t.idem.Mismatch, code) {
			return false
		}
		if slices.Contains(t.idem.InProgress, code) {
			return true
		}
	}
	return ans.status == http.StatusConflict
}

// waitRetry waits before attempt+1 after an answer that says "not now":
// the backoff, or the answer's Retry-After when longer. It reports false
// (no retry) when that wait would not fit the call's time bound or ctx
// ended.
func (c *Connection) waitRetry(ctx context.Context, ans *answer, attempt int) bool {
	d, ok := retryAfter(ans.header, time.Now())
	if !ok || d < backoff(attempt) {
		d = backoff(attempt)
	}
	if dl, has := ctx.Deadline(); has && time.Until(dl) <= d {
		return false
	}
	return wait(ctx, d)
}

// notSent is a failure before the request left (getting its credential).
type notSent struct{ err error }

func (e *notSent) Error() string { return e.err.Error() }

// definiteAnswer is an error the provider stated in a 2xx answer (a
// GraphQL error without data, Slack's "ok": false): it did not apply the
// call.
type definiteAnswer struct{ msg string }

func (e *definiteAnswer) Error() string { return e.msg }

// answer reads a 2xx answer into the tool's result.
func (c *Connection) answer(t *tool, ans *answer) (jsontext.Value, error) {
	if ans.tooBig {
		return nil, fmt.Errorf("the answer is larger than %d bytes", MaxAnswerBytes)
	}
	var in any
	if len(bytes.TrimSpace(ans.body)) > 0 {
		v, err := decode(ans.body)
		if err != nil {
			return nil, fmt.Errorf("the answer is not valid JSON: %v", err)
		}
		in = v
	}
	if p := c.p.spec.Errors.OK; p != "" {
		toks, _ := splitPointer(p)
		if ok, _ := pointer(in, toks); ok == false {
			code, msg := c.errorText(in)
			return nil, &definiteAnswer{fmt.Sprintf("the provider refused the call: %s", joinCodeMessage(code, msg))}
		}
	}
	if t.graphql != "" {
		errs, _ := pointer(in, []string{"errors"})
		data, _ := pointer(in, []string{"data"})
		if _, ok := errs.([]any); errs != nil && !ok {
			return nil, errors.New("the answer's GraphQL errors are not an array")
		}
		if list, ok := errs.([]any); ok && len(list) > 0 {
			var msgs []string
			for _, e := range list {
				m, _ := pointer(e, []string{"message"})
				if s, ok := m.(string); ok {
					msgs = append(msgs, clip(c.redactor(s), 300))
				}
				if len(msgs) == 3 {
					break
				}
			}
			text := "GraphQL errors: " + strings.Join(msgs, "; ")
			if data == nil {
				return nil, &definiteAnswer{text}
			}
			return nil, errors.New(text)
		}
		in = data
	}
	if t.userErrors != nil {
		if list, _ := pointer(in, t.userErrors); list != nil {
			errs, isList := list.([]any)
			if !isList {
				return nil, errors.New("the answer's user errors are not an array")
			}
			if len(errs) > 0 {
				var msgs []string
				for _, e := range errs {
					m, _ := pointer(e, []string{"message"})
					s, _ := m.(string)
					if f, _ := pointer(e, []string{"field"}); f != nil {
						if fe, err := encode(f); err == nil {
							s = fmt.Sprintf("%s (field %s)", s, clip(c.redactor(string(fe)), 100))
						}
					}
					msgs = append(msgs, clip(c.redactor(s), 300))
					if len(msgs) == 3 {
						break
					}
				}
				return nil, &definiteAnswer{"the provider refused the call: " + strings.Join(msgs, "; ")}
			}
		}
	}
	if t.def.SideEffecting != nil && *t.def.SideEffecting {
		// A write's answer that holds nothing its result is built from
		// (an empty object, GraphQL data null) says nothing of what
		// happened: not an empty result.
		if _, ok, err := t.result.eval(in); err == nil && !ok {
			return nil, errors.New("the answer lacks what the result is built from")
		}
	}
	v, ok, err := evalTop(t.result, in)
	if err != nil {
		return nil, fmt.Errorf("the answer does not have the documented shape: %v", err)
	}
	if !ok {
		return nil, errors.New("the answer lacks what the result is built from")
	}
	return encode(c.redactResult(v))
}

// answer is a provider's HTTP answer, its body read up to the limit.
type answer struct {
	status int
	header http.Header
	body   []byte
	tooBig bool
	// sent is the refreshable access token the request carried ("" when
	// none): what a 401 refused.
	sent string
}

// httpRequest makes b an *http.Request with the credential placed.
func (c *Connection) httpRequest(ctx context.Context, b *built) (*http.Request, error) {
	req, _, err := c.authorizedRequest(ctx, b)
	return req, err
}

// authorizedRequest is httpRequest that also returns the refreshable
// access token it placed ("" when none).
func (c *Connection) authorizedRequest(ctx context.Context, b *built) (*http.Request, string, error) {
	var body io.Reader
	if b.body != nil {
		body = bytes.NewReader(b.body)
	}
	req, err := http.NewRequestWithContext(ctx, b.method, b.url, body)
	if err != nil {
		return nil, "", err
	}
	req.Header = b.header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	// The W3C trace context of the call's span, when tracing is on.
	tracectx.InjectHeader(ctx, req.Header)
	sent, err := c.authorize(ctx, req)
	if err != nil {
		return nil, "", &notSent{err}
	}
	return req, sent, nil
}

func (c *Connection) send(ctx context.Context, t *tool, b *built) (*answer, error) {
	// Every attempt (a retry too) is a request the provider counts.
	if err := c.limits.Take(ctx, c.p.spec.Provider, ratelimit.Tool{Name: t.def.Name, Writes: t.def.SideEffecting != nil && *t.def.SideEffecting}); err != nil {
		return nil, &notSent{err}
	}
	req, sent, err := c.authorizedRequest(ctx, b)
	if err != nil {
		return nil, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	a := &answer{status: resp.StatusCode, header: resp.Header, body: data, sent: sent}
	if len(data) > MaxAnswerBytes {
		a.tooBig, a.body = true, nil
	}
	return a, nil
}

// authorize places the credential on the request per the auth kind.
func (c *Connection) authorize(ctx context.Context, req *http.Request) (sent string, err error) {
	a := c.auth
	if a.Bearer != "" {
		tok := c.secrets[a.Bearer]
		if c.refresh != nil && a.Bearer == "accessToken" {
			var err error
			if tok, err = c.refresh.token(ctx, tok); err != nil {
				return "", fmt.Errorf("refreshing the OAuth access token: %v", err)
			}
			if !headerSafe(tok) {
				return "", errors.New("the token endpoint issued an access token with control characters")
			}
			sent = tok
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if a.Basic != nil {
		cred := c.secrets[a.Basic.User] + ":"
		if a.Basic.Password != "" {
			cred += c.secrets[a.Basic.Password]
		}
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred)))
	}
	for h, role := range a.Header {
		tok := c.secrets[role]
		if c.refresh != nil && role == "accessToken" {
			var err error
			if tok, err = c.refresh.token(ctx, tok); err != nil {
				return "", fmt.Errorf("refreshing the OAuth access token: %v", err)
			}
			if !headerSafe(tok) {
				return "", errors.New("the token endpoint issued an access token with control characters")
			}
			sent = tok
		}
		req.Header.Set(h, tok)
	}
	return sent, nil
}

// providerError is a provider's error answer as a message: the status,
// the provider's code and message (from the spec's error shape), never
// the raw body.
func (c *Connection) providerError(t *tool, b *built, ans *answer) error {
	var code, msg string
	if v, err := decode(ans.body); err == nil {
		code, msg = c.errorText(v)
	}
	text := fmt.Sprintf("%s: %s %s answered %d %s", t.def.Name, b.method, c.redactURL(b.url), ans.status, http.StatusText(ans.status))
	if cm := joinCodeMessage(code, msg); cm != "" {
		text += ": " + cm
	}
	return errors.New(c.redactor(text))
}

// rawCode is the provider's error code in an error body as the spec's
// error shape finds it, unredacted and unclipped ("" when none): for
// comparing with the codes a spec lists, never for showing.
func (c *Connection) rawCode(v any) string {
	for _, p := range c.p.spec.Errors.Code {
		toks, _ := splitPointer(p)
		if x, ok := pointer(v, toks); ok {
			if s, ok := scalarString(x); ok && s != "" {
				return s
			}
		}
	}
	return ""
}

func (c *Connection) errorText(v any) (code, msg string) {
	if s := c.rawCode(v); s != "" {
		// Redacted before it is clipped: a secret cut by the clip would
		// no longer match.
		code = clip(c.redactor(s), 100)
	}
	for _, p := range c.p.spec.Errors.Message {
		toks, _ := splitPointer(p)
		if x, ok := pointer(v, toks); ok {
			if s, ok := x.(string); ok && s != "" {
				msg = clip(c.redactor(s), 500)
				break
			}
		}
	}
	return code, msg
}

func joinCodeMessage(code, msg string) string {
	switch {
	case code != "" && msg != "":
		return code + ": " + msg
	case code != "":
		return code
	}
	return msg
}

func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}

// redactURL drops the query (it may carry a credential or personal
// data) from a URL shown in a message.
func (c *Connection) redactURL(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		u = u[:i]
	}
	return c.redactor(u)
}

func netError(ctx context.Context, err error, timeout time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within the call's time bound (%s)", timeout)
	}
	if errors.Is(err, context.Canceled) {
		return "the call was canceled"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// backoff is the wait before attempt+1: 0.5 s x 2^(attempt-1) with equal
// jitter (a wait drawn from [d/2, d)), so that runs which failed together
// do not retry together (AWS Architecture Blog, "Exponential Backoff And
// Jitter").
func backoff(attempt int) time.Duration {
	d := time.Duration(500<<(attempt-1)) * time.Millisecond
	return d/2 + rand.N(d/2)
}

// rateLimited reports whether ans is a rate-limit answer that is not a
// 429: a 403 with X-RateLimit-Remaining: 0, as GitHub's REST API answers
// when a token's quota is used up (docs.github.com, "Rate limits for the
// REST API"). It is then "not now", never a permission error.
func rateLimited(ans *answer) bool {
	return ans.status == http.StatusForbidden && strings.TrimSpace(ans.header.Get("X-RateLimit-Remaining")) == "0"
}

// retryAfter reads a Retry-After header (RFC 9110 section 10.2.3): delay
// seconds or an HTTP date.
//
// Without it, an X-RateLimit-Reset header (Unix seconds, as GitHub
// sends) gives the wait until then.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		reset, err := strconv.ParseInt(strings.TrimSpace(h.Get("X-RateLimit-Reset")), 10, 64)
		if err != nil || reset <= 0 {
			return 0, false
		}
		if d := time.Unix(reset, 0).Sub(now); d > 0 {
			return min(d, 24*time.Hour), true
		}
		return 0, true
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		// More than a day is as good as never (and n seconds past
		// about 292 years would overflow a Duration).
		return time.Duration(min(n, 86400)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d, true
		}
		return 0, true
	}
	return 0, false
}

// wait sleeps d unless ctx ends first; it reports whether it slept.
func wait(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Request builds the HTTP request a call of the named tool with args
// would send first (hook, templates, credentials and the idempotency key
// applied) without sending it: the contract tests check it against the
// provider's API description.
func (c *Connection) Request(ctx context.Context, name string, args jsontext.Value, key string) (*http.Request, error) {
	t := c.p.byName[name]
	if t == nil {
		return nil, fmt.Errorf("the %s connector has no tool %q", c.p.spec.Provider, name)
	}
	if t.hook != nil {
		var err error
		if args, err = t.hook(args); err != nil {
			return nil, err
		}
	}
	in, err := decode(args)
	if err != nil {
		return nil, err
	}
	b, err := c.build(t, in, key)
	if err != nil {
		return nil, err
	}
	return c.httpRequest(ctx, b)
}

// ResultPointers returns the JSON Pointers the named tool's result
// template reads from the answer ("/*" stands for every element of an
// array), for the contract tests.
func (p *Provider) ResultPointers(name string) []string {
	t := p.byName[name]
	if t == nil {
		return nil
	}
	prefix := ""
	return pointers(t.result, prefix)
}

// GraphQL returns the named tool's GraphQL document, or "".
func (p *Provider) GraphQL(name string) string {
	if t := p.byName[name]; t != nil {
		return t.graphql
	}
	return ""
}
