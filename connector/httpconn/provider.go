package httpconn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/connector"
	"github.com/openplaybook/openplaybook/connector/ratelimit"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
)

// Limits of every call (docs/connectors.md, "How a call is executed").
const (
	// DefaultTimeout bounds a call, retries included, when the
	// connection's callTimeout is zero.
	DefaultTimeout = 60 * time.Second
	// MaxAnswerBytes bounds the body of an answer the executor reads.
	MaxAnswerBytes = 8 << 20
	// MaxAttempts bounds the attempts of a retryable call.
	MaxAttempts = 3
)

// Hook rewrites a call's arguments (a JSON object) before the request
// templates read them. Its errors are the caller's: the call is refused
// before anything is sent.
type Hook func(args jsontext.Value) (jsontext.Value, error)

// Provider is a [connector.Provider] built from a [Spec].
type Provider struct {
	spec      Spec
	tools     []*tool
	byName    map[string]*tool
	check     *tool
	checkArgs jsontext.Value
	limits    []ratelimit.Limit
	// buckets holds each connection's token buckets (see [ratelimit.Set]).
	buckets ratelimit.Set
}

type tool struct {
	def        playbook.Definition
	method     string
	path       string
	query      []namedT
	headers    []namedT
	body       template
	form       bool
	graphql    string
	variables  template
	result     template
	hook       Hook
	userErrors []string
	retryWrite bool // a write the provider makes idempotent
	idemHeader string
	idemBody   string
	idem       *Idempotency // the provider's, for a write it makes idempotent
	example    jsontext.Value
}

type namedT struct {
	name string
	t    template
}

// New builds the provider of spec. hooks are the Go hooks its tools may
// name. Errors name the tool and the member of the spec at fault: a spec
// is compiled in, so an error is a build defect a test reports.
func New(spec Spec, hooks map[string]Hook) (*Provider, error) {
	p := &Provider{spec: spec, byName: map[string]*tool{}}
	if spec.Provider == "" {
		return nil, errors.New("the spec has no provider")
	}
	if _, err := url.Parse(strings.NewReplacer("{", "", "}", "").Replace(spec.APIRoot)); err != nil || !strings.HasPrefix(spec.APIRoot, "http") {
		return nil, fmt.Errorf("%s: apiRoot %q is not an http or https URL", spec.Provider, spec.APIRoot)
	}
	if len(spec.Auth) == 0 {
		return nil, fmt.Errorf("%s: no auth kind", spec.Provider)
	}
	for kind, a := range spec.Auth {
		if !slices.Contains([]string{"oauth", "api_token", "aggregator_link"}, kind) {
			return nil, fmt.Errorf("%s: auth kind %q is not one of oauth, api_token, aggregator_link", spec.Provider, kind)
		}
		if len(a.Secrets) == 0 {
			return nil, fmt.Errorf("%s: auth kind %s binds no secret", spec.Provider, kind)
		}
		switch a.Grant {
		case "":
		case "client_credentials":
			if kind != "oauth" || a.TokenURL == "" || a.Bearer != "accessToken" {
				return nil, fmt.Errorf("%s: a client_credentials grant is an oauth auth kind with a tokenURL and bearer accessToken", spec.Provider)
			}
		default:
			return nil, fmt.Errorf("%s: grant %q is \"\" or \"client_credentials\"", spec.Provider, a.Grant)
		}
	}
	for i, st := range spec.Tools {
		where := fmt.Sprintf("%s: tools/%d (%s)", spec.Provider, i, st.Definition.Name)
		t, err := compileTool(spec, st, hooks, where)
		if err != nil {
			return nil, err
		}
		if p.byName[t.def.Name] != nil {
			return nil, fmt.Errorf("%s: tool name listed twice", where)
		}
		p.tools = append(p.tools, t)
		p.byName[t.def.Name] = t
	}
	if spec.Check != nil {
		p.check = p.byName[spec.Check.Tool]
		if p.check == nil || (p.check.def.SideEffecting != nil && *p.check.def.SideEffecting) {
			return nil, fmt.Errorf("%s: check names %q, which is not a read tool of the catalog", spec.Provider, spec.Check.Tool)
		}
		p.checkArgs = spec.Check.Args
		if len(p.checkArgs) == 0 {
			p.checkArgs = jsontext.Value("{}")
		}
	}
	var err error
	if p.limits, err = ratelimit.Compile(spec.RateLimits, p.known, spec.Provider+": rateLimits"); err != nil {
		return nil, err
	}
	return p, nil
}

func compileTool(spec Spec, st Tool, hooks map[string]Hook, where string) (*tool, error) {
	d := st.Definition
	if d.Source != "connector" || d.ConnectorType != spec.Provider {
		return nil, fmt.Errorf("%s: definition needs source \"connector\" and connectorType %q", where, spec.Provider)
	}
	for _, v := range []*jsontext.Value{&d.InputSchema, &d.OutputSchema, &d.HarnessInputSchema, &d.HarnessOutputSchema} {
		if *v == nil {
			continue
		}
		*v = v.Clone()
		if err := v.Compact(); err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
	}
	t := &tool{def: d, method: strings.ToUpper(st.Request.Method), path: st.Request.Path, example: st.Example}
	if t.method == "" {
		return nil, fmt.Errorf("%s: request has no method", where)
	}
	if err := checkPath(t.path); err != nil {
		return nil, fmt.Errorf("%s: request/path: %v", where, err)
	}
	var err error
	for _, k := range sortedKeys(st.Request.Query) {
		qt, err := compile(st.Request.Query[k], where+": request/query/"+k)
		if err != nil {
			return nil, err
		}
		t.query = append(t.query, namedT{k, qt})
	}
	for _, k := range sortedKeys(st.Request.Headers) {
		ht, err := compile(st.Request.Headers[k], where+": request/headers/"+k)
		if err != nil {
			return nil, err
		}
		t.headers = append(t.headers, namedT{k, ht})
	}
	if t.body, err = compile(st.Request.Body, where+": request/body"); err != nil {
		return nil, err
	}
	switch st.Request.Encoding {
	case "", "json":
	case "form":
		t.form = true
	default:
		return nil, fmt.Errorf("%s: request/encoding is %q; it is \"json\" or \"form\"", where, st.Request.Encoding)
	}
	if g := st.Request.GraphQL; g != nil {
		if g.Query == "" || t.body != nil || t.method != http.MethodPost {
			return nil, fmt.Errorf("%s: a GraphQL request is a POST with a query and no body template", where)
		}
		t.graphql = g.Query
		if t.variables, err = compile(g.Variables, where+": request/graphql/variables"); err != nil {
			return nil, err
		}
	}
	if t.result, err = compile(st.Result, where+": result"); err != nil {
		return nil, err
	}
	if t.result == nil {
		return nil, fmt.Errorf("%s: no result template", where)
	}
	if st.UserErrors != "" {
		if t.userErrors, err = splitPointer(st.UserErrors); err != nil {
			return nil, fmt.Errorf("%s: userErrors: %v", where, err)
		}
	}
	if st.Hook != "" {
		if t.hook = hooks[st.Hook]; t.hook == nil {
			return nil, fmt.Errorf("%s: hook %q is not registered", where, st.Hook)
		}
	}
	writes := d.SideEffecting != nil && *d.SideEffecting
	if writes && spec.Idempotency != nil && (st.Idempotent == nil || *st.Idempotent) {
		t.retryWrite = true
		t.idemHeader, t.idemBody = spec.Idempotency.Header, spec.Idempotency.Body
		t.idem = spec.Idempotency
	}
	return t, nil
}

func checkPath(p string) error {
	if p != "" && p[0] != '/' {
		return fmt.Errorf("%q must start with \"/\"", p)
	}
	depth := 0
	for _, r := range p {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
		}
		if depth < 0 || depth > 1 {
			return fmt.Errorf("%q has unbalanced braces", p)
		}
	}
	if depth != 0 {
		return fmt.Errorf("%q has unbalanced braces", p)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Spec returns the spec the provider was built from.
func (p *Provider) Spec() Spec { return p.spec }

// Name implements [connector.Provider].
func (p *Provider) Name() string { return p.spec.Provider }

// Info implements [connector.Provider]: auth kinds in the order oauth,
// api_token, aggregator_link.
func (p *Provider) Info() connector.Info {
	info := connector.Info{Title: p.spec.Title, APIRoot: p.spec.APIRoot}
	for _, k := range []string{"oauth", "api_token", "aggregator_link"} {
		if a, ok := p.spec.Auth[k]; ok {
			info.AuthKinds = append(info.AuthKinds, connector.AuthKind{Kind: k, Secrets: slices.Clone(a.Secrets), Optional: slices.Clone(a.Optional)})
		}
	}
	return info
}

// Definitions implements [connector.Provider].
func (p *Provider) Definitions() []playbook.Definition {
	out := make([]playbook.Definition, len(p.tools))
	for i, t := range p.tools {
		out[i] = t.def.Clone()
	}
	return out
}

// Example returns the example arguments of the named tool (the contract
// tests' call), or nil.
func (p *Provider) Example(name string) jsontext.Value {
	if t := p.byName[name]; t != nil {
		return t.example
	}
	return nil
}

// Open implements [connector.Provider]: it checks cfg against the auth
// kind and the API root, and sends nothing.
func (p *Provider) Open(cfg connector.Config) (connector.Connection, error) {
	return p.open(cfg, nil)
}

// OpenWith is Open with the HTTP client requests go through (tests).
func (p *Provider) OpenWith(cfg connector.Config, client *http.Client) (*Connection, error) {
	return p.open(cfg, client)
}

func (p *Provider) open(cfg connector.Config, client *http.Client) (*Connection, error) {
	a, ok := p.spec.Auth[cfg.AuthKind]
	if !ok {
		return nil, fmt.Errorf("the %s connector takes authKind %s, not %q", p.spec.Provider, kindList(p.Info()), cfg.AuthKind)
	}
	for _, role := range a.Secrets {
		if cfg.Secrets[role] == "" && !(cfg.AuthKind == "oauth" && role == "accessToken" && canRefresh(a, cfg)) {
			return nil, fmt.Errorf("the %s connection (authKind %s) binds no %s secret; it needs %s", p.spec.Provider, cfg.AuthKind, role, strings.Join(a.Secrets, ", "))
		}
	}
	for role, v := range cfg.Secrets {
		for _, r := range v {
			if r < ' ' || r == 0x7f {
				return nil, fmt.Errorf("the %s connection's %s secret contains control characters", p.spec.Provider, role)
			}
		}
	}
	root := p.spec.APIRoot
	if cfg.BaseURL != "" {
		root = cfg.BaseURL
	}
	if strings.Contains(root, "{") {
		return nil, fmt.Errorf("the %s connection needs a baseURL: the API root %s depends on the account (set connections.%s.baseURL)", p.spec.Provider, p.spec.APIRoot, p.spec.Provider)
	}
	u, err := url.Parse(root)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("the %s connection's API root must be an absolute http or https URL without user information, query or fragment", p.spec.Provider)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	limits := p.limits
	if cfg.RateLimits != nil {
		var err error
		if limits, err = ratelimit.Compile(cfg.RateLimits, p.known, "the "+p.spec.Provider+" connection's rateLimits"); err != nil {
			return nil, err
		}
	}
	c := &Connection{p: p, root: strings.TrimRight(root, "/"), auth: a, secrets: cfg.Secrets, timeout: timeout, client: noRedirects(client)}
	c.limits = p.buckets.For(limits, c.root, cfg.Secrets)
	red := newRedactor(cfg.Secrets)
	c.redactor, c.redactResult = red.redact, red.redactResult
	switch {
	case cfg.AuthKind != "oauth" || !canRefresh(a, cfg):
	case a.Grant == "client_credentials":
		c.refresh = newClientCredentials(cmp.Or(cfg.TokenURL, a.TokenURL), cfg.Secrets, cfg.Scopes, c.client)
	default:
		c.refresh = newRefresher(cmp.Or(cfg.TokenURL, a.TokenURL), cfg.Secrets, c.client)
	}
	if c.refresh != nil {
		c.refresh.issued = red.add
		if cfg.Vault != nil {
			c.refresh.vault, c.refresh.name = cfg.Vault, "connection:"+p.spec.Provider
		}
	}
	return c, nil
}

// noRedirects returns a copy of client (a new one when nil) that never
// follows a redirect and keeps no cookies. Go's client forwards custom
// headers (X-Api-Key, PLAID-SECRET), same-host Authorization and, on a
// 307 or 308, the body (a credential or a client secret in it) to
// wherever the Location points; a provider's redirect is an answer
// instead ([Connection.call]).
func noRedirects(client *http.Client) *http.Client {
	cl := &http.Client{}
	if client != nil {
		*cl = *client
	}
	cl.Jar = nil
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return cl
}

// canRefresh reports whether an OAuth connection binds what getting a
// new access token needs: a token endpoint and the client credentials,
// and a refresh token unless the grant is client_credentials.
func canRefresh(a Auth, cfg connector.Config) bool {
	return (cfg.TokenURL != "" || a.TokenURL != "") && cfg.Secrets["clientId"] != "" && cfg.Secrets["clientSecret"] != "" &&
		(a.Grant == "client_credentials" || cfg.Secrets["refreshToken"] != "")
}

func kindList(info connector.Info) string {
	var ks []string
	for _, k := range info.AuthKinds {
		ks = append(ks, k.Kind)
	}
	return strings.Join(ks, " or ")
}

// Connection is a provider bound to one credential. It is safe for
// concurrent use.
type Connection struct {
	p        *Provider
	root     string
	auth     Auth
	secrets  map[string]string
	timeout  time.Duration
	client   *http.Client
	redactor func(string) string
	// redactResult removes the secret values and issued tokens from a
	// result's strings.
	redactResult func(any) any
	refresh      *refresher
	// limits are the connection's token buckets, shared with every
	// connection of the process on the same root and credential; nil
	// when it has no rate limits.
	limits *ratelimit.Buckets
}

// known reports whether name is a tool of the catalog (exact).
func (p *Provider) known(name string) bool { return p.byName[name] != nil }

// Tools implements [connector.Connection].
func (c *Connection) Tools() map[string]registry.Tool {
	out := make(map[string]registry.Tool, len(c.p.tools))
	for _, t := range c.p.tools {
		out[t.def.Name] = boundTool{c, t}
	}
	return out
}

// Check implements [connector.Connection]: the spec's check request.
func (c *Connection) Check(ctx context.Context) error {
	if c.p.check == nil {
		return nil
	}
	_, err := c.call(ctx, c.p.check, c.p.checkArgs, "")
	return err
}

type boundTool struct {
	c *Connection
	t *tool
}

// Call implements [registry.Tool].
func (b boundTool) Call(ctx context.Context, args jsontext.Value) (registry.Result, error) {
	key := ""
	if ci, ok := registry.CallInfoOf(ctx); ok {
		key = ci.IdempotencyKey()
	}
	v, err := b.c.call(ctx, b.t, args, key)
	if err != nil {
		return registry.Result{}, err
	}
	return registry.Result{Content: v}, nil
}
