// Package openaiapi holds what the two drivers of OpenAI's APIs
// (driver/openai for Chat Completions, driver/openairesponses for
// Responses) share on the wire, over the official SDK
// (github.com/openai/openai-go/v3): the SDK options a Config gives, the
// reading of error bodies in the shapes OpenAI-compatible servers use, the
// cleaning of SDK errors, and the model probe (GET {baseURL}/models).
package openaiapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/internal/llm"
	"github.com/openplaybook/openplaybook/internal/suggest"
)

// Endpoint is where a driver sends its requests, as its errors name it.
type Endpoint struct {
	// Provider is the driver's name; Model the model it runs.
	Provider, Model string
	// Base is the base URL without user info or query; URL the request
	// URL of a step's requests (Base and the API's path).
	Base, URL string
	// Key is the API key, to be scrubbed from every error ("" for none).
	Key string
	// Timeout is the per-request timeout, for the error of a request that
	// ran out of it.
	Timeout time.Duration
	// Binding is where the agent is bound ("harness.yaml:12"), named in
	// the error of a request the SDK gave up on.
	Binding string
}

// Options returns the SDK options of provider's Config: the HTTP client
// (nil: http.DefaultClient), made to follow no redirect (a 3xx answer is
// a *[llm.RedirectError]), the base URL, the key as a bearer token (none
// when empty), the per-request timeout (negative: none; zero is taken as
// set by the caller) and the retries (0: the SDK's 2; negative: none),
// with [ErrorBody] as middleware. The SDK reads nothing from the
// environment when given a base URL and no key is set through it.
func Options(provider string, client *http.Client, baseURL, key string, timeout time.Duration, maxRetries int) []option.RequestOption {
	opts := []option.RequestOption{
		// No redirect is followed: it would take the key and the
		// conversation elsewhere ([llm.Redirected]).
		option.WithHTTPClient(llm.NoRedirects(client)),
		option.WithBaseURL(baseURL),
		// Each HTTP attempt, retries included, is counted for the
		// request's context ([llm.CountAttempts]); an answer that is a
		// redirect fails it.
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			llm.Attempted(req)
			res, err := next(req)
			return llm.Redirected(provider, req, res, err)
		}),
		option.WithMiddleware(ErrorBody),
	}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	if timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(timeout))
	}
	switch {
	case maxRetries < 0:
		opts = append(opts, option.WithMaxRetries(0))
	case maxRetries > 0:
		opts = append(opts, option.WithMaxRetries(maxRetries))
	}
	return opts
}

// Clean turns an SDK error into one that names the server and status and
// never holds the API key: a *[driver.ProviderError] for an API error
// status, the timeout error ([llm.TimeoutError]) for a request that ran
// out of the per-request timeout, ctx's error when ctx is done, else the
// request error ([llm.RequestError]).
func (e Endpoint) Clean(ctx context.Context, err error) error {
	// When ctx is done, its error is the answer ([llm.RequestError]).
	var apiErr *sdk.Error
	if ctx.Err() == nil && errors.As(err, &apiErr) {
		typ := apiErr.Code
		if typ == "" {
			typ = apiErr.Type
		}
		return llm.ProviderError(e.Provider, e.Model, e.Base, apiErr.StatusCode, typ, apiErr.Message, e.Key)
	}
	if terr := llm.TimeoutError(ctx, e.Provider, e.URL, e.Timeout, err); terr != nil {
		return terr
	}
	return llm.RequestError(ctx, e.Provider, e.Base, e.Key, err)
}

// CleanN is [Endpoint.Clean] for a request the SDK sent attempts times
// (retries included): the error also says how many attempts were made and
// where the agent is bound ([driver.ProviderError] URL, Attempts and
// Binding; a note on other errors).
func (e Endpoint) CleanN(ctx context.Context, err error, attempts int) error {
	cerr := e.Clean(ctx, err)
	var pe *driver.ProviderError
	if errors.As(cerr, &pe) {
		pe.URL, pe.Attempts, pe.Binding = e.URL, attempts, e.Binding
		return pe
	}
	if ctx.Err() != nil {
		return cerr
	}
	if terr := llm.TimeoutError(ctx, e.Provider, e.URL, e.Timeout, err); terr != nil {
		return llm.Noted(terr, attempts, e.Binding)
	}
	// The request error names the request's URL, not only the base.
	return llm.Noted(llm.RequestError(ctx, e.Provider, e.URL, e.Key, err), attempts, e.Binding)
}

// Probe lists the models of the API models serves (GET {baseURL}/models,
// OpenAI's "List models": {"object": "list", "data": [{"id": ...}]}, the
// endpoint OpenAI-compatible servers such as Ollama, vLLM and llama.cpp
// also serve) without retries, and checks e.Model is among them. It
// returns nil, a *[driver.UnknownModelError], a *[driver.ProviderError]
// (401 or 403: the key is refused) or the request's error (unreachable, a
// timeout), never holding the key; see [driver.Prober].
func (e Endpoint) Probe(ctx context.Context, models sdk.ModelService) error {
	page, err := models.List(ctx, option.WithMaxRetries(0))
	if err != nil {
		probe := e
		probe.URL = strings.TrimSuffix(e.Base, "/") + "/models"
		return probe.Clean(ctx, err)
	}
	ids := make([]string, 0, len(page.Data))
	for _, m := range page.Data {
		if m.ID == e.Model {
			return nil
		}
		ids = append(ids, m.ID)
	}
	near, _ := suggest.Closest(e.Model, ids)
	return &driver.UnknownModelError{Provider: e.Provider, Model: e.Model, BaseURL: e.Base, Listed: len(ids), Suggest: near}
}

// ErrorBody is SDK middleware that rewrites the body of an error response
// that is not in OpenAI's shape ({"error": {"message": ...}}) into that
// shape, so the SDK reads its message: OpenAI-compatible servers also
// answer {"error": "text"}, {"message": "text", ...} (vLLM) or plain
// text.
func ErrorBody(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 400 {
		return res, err
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	res.Body.Close()
	if err != nil {
		body = nil
	}
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.Error) == 0 || v.Error[0] != '{' {
		msg := strings.TrimSpace(string(body))
		var s string
		switch {
		case len(v.Error) > 0 && json.Unmarshal(v.Error, &s) == nil && s != "":
			msg = s
		case v.Message != "":
			msg = v.Message
		}
		body, _ = json.Marshal(map[string]map[string]string{"error": {"message": strings.ToValidUTF8(msg, "\uFFFD")}})
		res.Header.Set("Content-Type", "application/json")
		res.ContentLength = int64(len(body))
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res, nil
}

// ArgShape says what an "arguments" member that is not a JSON string is,
// as raw holds it ("" for a missing member), for a reply's refusal.
func ArgShape(raw string) string {
	raw = strings.TrimSpace(raw)
	switch {
	case raw == "":
		return "the member is missing"
	case raw == "null":
		return "it is null"
	case raw[0] == '{':
		return "it is an object"
	case raw[0] == '[':
		return "it is an array"
	}
	return "it is " + raw
}
