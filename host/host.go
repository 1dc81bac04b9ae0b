// Package host is what a harness connects for a runtime: the registry of
// every tool it can call (built-ins, connectors, the MCP servers it
// binds), each entry with the [registry.Tool] that executes it; the
// secrets; the live MCP sessions and connector connections; the store; and
// the agents' drivers.
//
// It is the one place that knows every provider: the runtime sees only
// the registry, so a new built-in or connector is added here (in
// [Providers]) and in its own package, never in package runtime.
package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/connector"
	"github.com/openplaybook/openplaybook/connector/providers"
	"github.com/openplaybook/openplaybook/connector/stripe"
	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/drivers"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/mcphost"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/engine"
	"github.com/openplaybook/openplaybook/vault"
)

// Rule ids of the diagnostics a Host itself reports (docs/check.md).
const (
	RuleRegistryClash = "preflight-registry"
	RuleStore         = "preflight-store"
)

// Providers returns the connectors this runtime has, in a fixed order.
// The list is explicit (no registration at init): a new connector is one
// more line here.
func Providers() []connector.Provider { return slices.Clone(allProviders()) }

// allProviders: Stripe (stripe-go), then the declarative connectors of
// package connector/providers by name. Their files are compiled in and
// tested, so an error is a build defect.
var allProviders = sync.OnceValue(func() []connector.Provider {
	out := []connector.Provider{stripe.NewProvider()}
	decl, err := providers.All()
	if err != nil {
		panic(fmt.Sprintf("host: the compiled-in connector catalog: %v", err))
	}
	for _, p := range decl {
		out = append(out, p)
	}
	return out
})

// Provider returns the connector of the named provider, or nil.
func Provider(name string) connector.Provider {
	for _, p := range allProviders() {
		if p.Name() == name {
			return p
		}
	}
	return nil
}

// RequiredRoles returns the secret roles a connection of provider with
// authKind must bind, and false when the runtime has no such provider or
// the provider does not take that authKind.
func RequiredRoles(provider, authKind string) ([]string, bool) {
	p := Provider(provider)
	if p == nil {
		return nil, false
	}
	k, ok := p.Info().Kind(authKind)
	return k.Secrets, ok
}

// Options configure [Connect]. A nil *Options means the zero Options.
type Options struct {
	// Store, when set, is the store the built-ins run over: their
	// registry entries get tools. Without it (check, pin) the built-ins
	// are definitions only.
	Store store.Store
	// AllServers connects every MCP server the harness binds, not only
	// those the documents require: the check of a harness alone.
	AllServers bool
}

// Host is a harness connected. Build it with [Connect] or [Offline];
// Close it when done. Its fields are read-only after it is built.
type Host struct {
	Harness *harness.Harness
	Secrets *harness.Secrets
	// Registry holds the built-ins, every connector's tools and the tools
	// every reachable MCP server lists, with the tools that run them.
	Registry *registry.Registry
	// Servers are the live MCP sessions by logical name; ServerErrs says
	// why a bound server could not be used; ServerTools are the tools
	// each live server listed, problems included (see [mcphost.Tool]).
	Servers     map[string]*mcphost.Server
	ServerErrs  map[string]error
	ServerTools map[string][]mcphost.Tool
	// Connections are the connector connections by provider;
	// ConnectionErrs says why a bound connection could not be set up.
	Connections    map[string]connector.Connection
	ConnectionErrs map[string]error
	// Diagnostics are problems of the harness itself found while
	// connecting (dotenv files, a registry name clash, the store seed),
	// positioned in the harness file.
	Diagnostics []diag.Diagnostic
	// Vault is the store's credential vault with the harness's keys
	// (store.vault), or nil: without it, issued tokens stay in memory.
	Vault *vault.Vault
	// External is the driver of agents bound to driver "mcp" (an
	// *external.Exchange's Driver, set by a server before runs start);
	// nil: such steps wait for their agent.
	External driver.Driver

	checkMu sync.Mutex
	checked map[string]error // provider -> result of its one preflight request
	probed  map[string]error // agent -> result of its driver's one probe

	tempDirs []string    // working directories made for servers, removed by Close
	vaultErr error       // why store.vault cannot be used
	ownStore store.Store // the store opened for the vault, closed by Close
}

// Close ends every MCP session and removes the working directories made
// for servers.
func (h *Host) Close() {
	for _, s := range h.Servers {
		s.Close()
	}
	for _, d := range h.tempDirs {
		os.RemoveAll(d)
	}
	h.tempDirs = nil
	if h.ownStore != nil {
		h.ownStore.Close()
		h.ownStore = nil
	}
}

// sameDir reports whether a and b name one directory (symbolic links
// followed where they exist).
func sameDir(a, b string) bool {
	abs := func(p string) string {
		p, _ = filepath.Abs(p)
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return filepath.Clean(p)
	}
	return abs(a) == abs(b)
}

func newHost(hs *harness.Harness) *Host {
	base, errs := catalogue()
	h := &Host{
		Harness: hs, Secrets: hs.SecretResolver(), Registry: registry.Over(base),
		Servers: map[string]*mcphost.Server{}, ServerErrs: map[string]error{}, ServerTools: map[string][]mcphost.Tool{},
		Connections: map[string]connector.Connection{}, ConnectionErrs: map[string]error{},
		checked: map[string]error{},
	}
	for _, err := range errs {
		h.Diagnostics = append(h.Diagnostics, diag.Diagnostic{File: hs.Path, Severity: diag.Error, Rule: RuleRegistryClash, Message: err.Error()})
	}
	return h
}

// Connect builds the host for the documents given: the built-in catalog
// (with tools when opt.Store is set), every connector's definitions (with
// tools where the harness binds a connection whose secrets resolve), and,
// concurrently, the tools of every MCP server that one of the documents
// requires and the harness binds (servers no document needs are not
// started; with opt.AllServers, every server the harness binds). Each server gets its harness timeout (default 10 s); Connect
// never waits longer than the slowest server's timeout. What cannot be
// connected is recorded in ServerErrs and ConnectionErrs, never fatal.
func Connect(ctx context.Context, hs *harness.Harness, docs []*playbook.Document, opt *Options) *Host {
	var o Options
	if opt != nil {
		o = *opt
	}
	h := newHost(hs)
	h.Diagnostics = append(h.Diagnostics, h.Secrets.Check()...)
	if hs.Store != nil && hs.Store.Seed != "" {
		if _, err := store.ReadSeed(hs.Store.Seed); err != nil {
			h.Diagnostics = append(h.Diagnostics, diag.Diagnostic{File: hs.Path, Line: 1, Column: 1, Pointer: "/store/seed", Severity: diag.Error, Rule: RuleStore,
				Message: fmt.Sprintf("the store seed cannot be used: %v", err)})
		}
	}
	h.openVault(o.Store)
	var builtins map[string]registry.Tool
	if o.Store != nil {
		// An engine without the business tables runs no built-in: each
		// resolves, and a call to it is refused as run by nothing.
		if d, err := builtin.DataOf(o.Store); err == nil {
			builtins = builtin.Tools(d)
		}
	}
	for name, t := range builtins {
		h.bind(name, t)
	}
	for _, p := range allProviders() {
		var tools map[string]registry.Tool
		if c := hs.Connections[p.Name()]; c != nil {
			h.Diagnostics = append(h.Diagnostics, unusedSettings(hs.Path, p, c)...)
			if c.AuthKind == "oauth" && c.Secrets["refreshToken"] != "" && c.Secrets["clientId"] != "" && (hs.Store == nil || hs.Store.Vault == nil) {
				h.Diagnostics = append(h.Diagnostics, diag.Diagnostic{File: hs.Path, Line: c.Pos.Line, Column: c.Pos.Column, Pointer: c.Pos.Pointer + "/secrets/refreshToken", Severity: diag.Warning, Rule: RuleConnectionVault,
					Message: fmt.Sprintf("the %s connection's refreshed tokens are kept in memory only: where the provider rotates refresh tokens, the next process presents the bound one again and the provider may revoke the grant; keep them in the credential vault (store.vault, docs/identity.md)", p.Name())})
			}
			conn, err := h.open(p, c)
			if err != nil {
				h.ConnectionErrs[p.Name()] = err
			} else {
				h.Connections[p.Name()] = conn
				tools = conn.Tools()
			}
		}
		// Only a bound provider's tools are this host's own; every
		// definition is the shared catalogue's (see [catalogue]).
		for name, t := range tools {
			h.bind(name, t)
		}
	}

	// Every secret the harness names, resolved once: each server's errors
	// and stderr tail are cleaned of all of them (a secret expanded into
	// args would otherwise show in a crash message).
	var secretValues []string
	for _, name := range hs.SecretNames() {
		if v, err := h.Secrets.Resolve(name); err == nil {
			secretValues = append(secretValues, v)
		}
	}
	var cfgs []mcphost.ServerConfig
	servers := requiredServers(docs)
	if o.AllServers {
		servers = servers[:0]
		for name := range hs.MCPServers {
			servers = append(servers, name)
		}
		sort.Strings(servers)
	}
	for _, name := range servers {
		bound := hs.MCPServers[name]
		if bound == nil {
			continue // reported per document
		}
		expanded, err := bound.Expand(h.Secrets)
		if err != nil {
			h.ServerErrs[name] = err
			continue
		}
		if o := expanded.OAuth; o != nil && o.Grant == mcphost.GrantAuthorizationCode && h.vaultErr != nil {
			h.ServerErrs[name] = fmt.Errorf("MCP server %q keeps its tokens in the credential vault, which cannot be opened: %v", name, h.vaultErr)
			continue
		}
		dir := expanded.Cwd
		if expanded.Stdio() && hs.Store != nil && hs.Store.SQLite != "" && sameDir(dir, filepath.Dir(hs.Store.SQLite)) {
			// A server never runs in the store's directory: it runs in
			// an empty directory of its own (docs/store.md, "What a tool
			// can reach").
			if dir, err = os.MkdirTemp("", "openplaybook-"+name+"-"); err != nil {
				h.ServerErrs[name] = fmt.Errorf("making a working directory for MCP server %q: %w", name, err)
				continue
			}
			h.tempDirs = append(h.tempDirs, dir)
		}
		cfgs = append(cfgs, mcphost.ServerConfig{
			Name: name, Command: expanded.Command, Args: expanded.Args, Env: expanded.Env, Dir: dir,
			URL: expanded.URL, Headers: expanded.Headers, Timeout: expanded.Timeout, Secrets: secretValues,
			ToolsCheck: mcphost.ToolsCheck(expanded.ToolsCheck), CallTimeout: expanded.CallTimeout,
			OAuth: h.oauthClient(expanded.OAuth),
		})
	}
	for name, res := range mcphost.ConnectAll(ctx, cfgs) {
		if res.Err != nil {
			h.ServerErrs[name] = res.Err
			continue
		}
		h.Servers[name] = res.Server
		h.ServerTools[name] = res.Tools
		for _, t := range res.Tools {
			if t.Problem == "" {
				h.add(t.Definition, registry.Origin{Kind: registry.MCP, Name: name}, res.Server.RegistryTool(t))
			}
		}
	}
	return h
}

// oauthClient is an MCP server's harness oauth, expanded, for mcphost.
func (h *Host) oauthClient(o *harness.ServerOAuth) *mcphost.OAuthClient {
	if o == nil {
		return nil
	}
	return OAuthClient(o, h.Vault)
}

// OAuthClient is the mcphost client of an MCP server's expanded harness
// oauth, its tokens kept in v (authorization_code).
func OAuthClient(o *harness.ServerOAuth, v *vault.Vault) *mcphost.OAuthClient {
	return &mcphost.OAuthClient{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret, Grant: o.Grant, RedirectURL: o.RedirectURL, Vault: v}
}

// Offline is the host of a harness that must not be used to contact
// anything (it has errors): the built-ins' and the connectors'
// definitions, no tool, no live connection.
func Offline(hs *harness.Harness) *Host {
	return newHost(hs)
}

// catalogue is the registry of the built-ins' and every connector's
// definitions, with no tool: built once per process and shared, read-only,
// by every host's registry ([registry.Over]); a host binds the tools it
// has ([Host.bind]). Its errors (two compiled-in tools of one name) are
// reported by every host.
var catalogue = sync.OnceValues(func() (*registry.Registry, []error) {
	reg := registry.New()
	var errs []error
	add := func(d playbook.Definition, o registry.Origin) {
		if err := reg.Add(d, o, nil); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range builtin.Definitions() {
		add(d, registry.Origin{Kind: registry.Builtin})
	}
	for _, p := range allProviders() {
		for _, d := range p.Definitions() {
			add(d, registry.Origin{Kind: registry.Connector, Name: p.Name()})
		}
	}
	return reg, errs
})

// bind gives the catalogue's entry name its tool in h's registry.
func (h *Host) bind(name string, t registry.Tool) {
	if err := h.Registry.Bind(name, t); err != nil {
		h.Diagnostics = append(h.Diagnostics, diag.Diagnostic{File: h.Harness.Path, Severity: diag.Error, Rule: RuleRegistryClash, Message: err.Error()})
	}
}

func (h *Host) add(d playbook.Definition, o registry.Origin, t registry.Tool) {
	if err := h.Registry.Add(d, o, t); err != nil {
		h.Diagnostics = append(h.Diagnostics, diag.Diagnostic{File: h.Harness.Path, Severity: diag.Error, Rule: RuleRegistryClash, Message: err.Error()})
	}
}

// open resolves a connection's credential by the role its provider and
// authKind need and opens it.
func (h *Host) open(p connector.Provider, c *harness.Connection) (connector.Connection, error) {
	info := p.Info()
	kind, ok := info.Kind(c.AuthKind)
	if !ok {
		var kinds []string
		for _, k := range info.AuthKinds {
			kinds = append(kinds, fmt.Sprintf("%s (secrets %s)", k.Kind, strings.Join(k.Secrets, ", ")))
		}
		return nil, fmt.Errorf("the %s connector does not take authKind %q; it takes %s", p.Name(), c.AuthKind, strings.Join(kinds, " or "))
	}
	// An OAuth connection with client credentials may leave the access
	// token to the connector (a refresh or client-credentials grant; the
	// connector says when that is not enough).
	refresh := c.AuthKind == "oauth" && c.Secrets["clientId"] != "" && c.Secrets["clientSecret"] != ""
	var missing []string
	for _, role := range kind.Secrets {
		if c.Secrets[role] == "" && !(refresh && role == "accessToken") {
			missing = append(missing, role)
		}
	}
	if len(missing) > 0 && c.AuthKind == "oauth" && slices.Contains(missing, "accessToken") {
		var partial, absent []string
		for _, r := range []string{"refreshToken", "clientId", "clientSecret"} {
			if c.Secrets[r] != "" {
				partial = append(partial, r)
			} else if slices.Contains(kind.Optional, r) {
				absent = append(absent, r)
			}
		}
		if len(partial) > 0 && len(absent) > 0 {
			return nil, fmt.Errorf("the %s connection (authKind oauth) binds no accessToken, and %s alone cannot get one: bind accessToken, or also %s", p.Name(), strings.Join(partial, " and "), strings.Join(absent, " and "))
		}
	}
	if len(missing) > 0 {
		need := "the secret roles " + strings.Join(kind.Secrets, ", ")
		if len(kind.Secrets) == 1 {
			need = "the secret role " + kind.Secrets[0]
		}
		if len(kind.Optional) > 0 {
			need += " (optionally " + strings.Join(kind.Optional, ", ") + ")"
		}
		return nil, fmt.Errorf("the %s connection (authKind %s) binds no %s secret; it needs %s", p.Name(), c.AuthKind, strings.Join(missing, " or "), need)
	}
	cfg := connector.Config{AuthKind: c.AuthKind, Secrets: map[string]string{}, Scopes: c.Scopes, BaseURL: c.BaseURL, TokenURL: c.TokenURL, Timeout: c.CallTimeout}
	if c.RateLimits != nil {
		cfg.RateLimits = []connector.RateLimit{}
		for _, l := range c.RateLimits {
			cfg.RateLimits = append(cfg.RateLimits, connector.RateLimit{Requests: l.Requests, Per: l.Per.String(), Burst: l.Burst, Calls: l.Calls, Tools: l.Tools})
		}
	}
	for _, role := range append(slices.Clone(kind.Secrets), kind.Optional...) {
		if c.Secrets[role] == "" {
			continue
		}
		// Resolve checks the secret is bound to this connection
		// (harness "secrets.declare") and fails closed.
		v, err := c.Resolve(h.Secrets, role)
		if err != nil {
			return nil, err
		}
		cfg.Secrets[role] = v
	}
	if c.AuthKind == "oauth" && cfg.Secrets["clientId"] != "" && cfg.Secrets["clientSecret"] != "" {
		// Its tokens are issued by a token endpoint: kept in the vault
		// when the harness has one (a vault that cannot be opened fails
		// the connection, never falls back to memory).
		if h.vaultErr != nil {
			return nil, fmt.Errorf("the %s connection's tokens are kept in the credential vault, which cannot be opened: %v", p.Name(), h.vaultErr)
		}
		cfg.Vault = h.Vault
	}
	return p.Open(cfg)
}

// RuleConnectionUnused is the rule id of a connection setting the
// connector never uses (a warning).
const RuleConnectionUnused = "preflight-connection-unused"

// RuleConnectionVault is the rule id of an OAuth connection with a refresh
// token whose refreshed tokens have no credential vault to live in (a
// warning).
const RuleConnectionVault = "preflight-connection-vault"

// unusedSettings warns about what a connection binds that its provider's
// auth kind never uses: a secret role it neither needs nor takes, and a
// tokenURL without the roles a token request needs.
func unusedSettings(file string, p connector.Provider, c *harness.Connection) []diag.Diagnostic {
	kind, ok := p.Info().Kind(c.AuthKind)
	if !ok {
		return nil // the connector's error says what it takes
	}
	var out []diag.Diagnostic
	warn := func(ptr, format string, args ...any) {
		out = append(out, diag.Diagnostic{File: file, Line: c.Pos.Line, Column: c.Pos.Column, Pointer: c.Pos.Pointer + ptr,
			Severity: diag.Warning, Rule: RuleConnectionUnused, Message: fmt.Sprintf(format, args...)})
	}
	for _, role := range sortedRoles(c.Secrets) {
		if !slices.Contains(kind.Secrets, role) && !slices.Contains(kind.Optional, role) {
			warn("/secrets/"+role, "the %s connector never uses the %s secret with authKind %s (it takes %s); remove it, or it must still resolve", p.Name(), role, c.AuthKind, strings.Join(append(slices.Clone(kind.Secrets), kind.Optional...), ", "))
		}
	}
	if c.TokenURL != "" && (c.Secrets["clientId"] == "" || c.Secrets["clientSecret"] == "") {
		warn("/tokenURL", "tokenURL is used only when the connection also binds clientId and clientSecret (and refreshToken, for a refresh)")
	}
	return out
}

func sortedRoles(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// CheckConnection runs the provider's preflight request once per host,
// however many documents are checked, and returns its result; nil when
// no connection of that provider is open.
func (h *Host) CheckConnection(ctx context.Context, provider string) error {
	conn := h.Connections[provider]
	if conn == nil {
		return nil
	}
	h.checkMu.Lock()
	defer h.checkMu.Unlock()
	if err, done := h.checked[provider]; done {
		return err
	}
	if h.checked == nil {
		h.checked = map[string]error{}
	}
	err := conn.Check(ctx)
	h.checked[provider] = err
	return err
}

// ProbeTimeout bounds one model probe ([Host.ProbeAgent]).
const ProbeTimeout = 10 * time.Second

// ProbeAgent runs the probe of the driver d built for the agent binding
// agent ([driver.Prober]: one cheap authenticated request to its model
// API) once per host, however many documents name the agent, within
// [ProbeTimeout]. first is true for the call that ran it, so the caller
// reports its result once; later calls return the same error with first
// false. A driver that is not a Prober (transcript, mcp) is not probed:
// nil, false.
func (h *Host) ProbeAgent(ctx context.Context, agent string, d driver.Driver) (first bool, err error) {
	p, ok := d.(driver.Prober)
	if !ok {
		return false, nil
	}
	h.checkMu.Lock()
	defer h.checkMu.Unlock()
	if err, done := h.probed[agent]; done {
		return false, err
	}
	pctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	err = p.Probe(pctx)
	if err != nil && ctx.Err() == nil && pctx.Err() != nil {
		err = fmt.Errorf("the model API did not answer within %s", ProbeTimeout)
	}
	if h.probed == nil {
		h.probed = map[string]error{}
	}
	h.probed[agent] = err
	return true, err
}

// Describe names what the registry is made of, for messages: "the
// built-ins, 22 connectors (openplaybook registry lists them), MCP
// servers memory, acme".
func (h *Host) Describe() string {
	parts := []string{"the built-ins", fmt.Sprintf("%d connectors (openplaybook registry lists them)", len(allProviders()))}
	var servers []string
	for n := range h.Servers {
		servers = append(servers, n)
	}
	sort.Strings(servers)
	if len(servers) > 0 {
		parts = append(parts, "MCP servers "+strings.Join(servers, ", "))
	}
	return strings.Join(parts, ", ")
}

// Drivers returns what builds, once per agent, the driver the harness
// binds to an agent name, for a run of the playbook with manifest id
// playbookID (a transcript path may name it).
func (h *Host) Drivers(playbookID string) func(agent string) (driver.Driver, error) {
	setup := &driver.Setup{Secret: h.Secrets.Resolve, Expand: h.Secrets.Expand, Path: h.Harness.ResolvePath, PlaybookID: playbookID, External: h.External}
	var mu sync.Mutex
	built := map[string]driver.Driver{}
	return func(agent string) (driver.Driver, error) {
		mu.Lock()
		defer mu.Unlock()
		if d, ok := built[agent]; ok {
			return d, nil
		}
		b := h.Harness.Agents[agent]
		if b == nil {
			return nil, fmt.Errorf("the harness binds no agent %q", agent)
		}
		// Each agent's errors name its binding's line.
		own := *setup
		own.Binding = fmt.Sprintf("%s:%d", h.Harness.Path, b.Pos.Line)
		d, err := drivers.New(b.Driver, b.Settings, &own)
		if err == nil {
			built[agent] = d
		}
		return d, err
	}
}

// OpenStore opens the harness's store (creating its directory) and loads
// its customer seed: [OpenStoreFile], then [SeedStore].
//
// The directory is made readable by the user only (0700) and the database
// file is made 0600 (SQLite gives its -wal and -shm files the same mode):
// no other user of the machine can read or write the store. A tool that
// runs as the same user can; see docs/store.md, "What a tool can reach".
func OpenStore(ctx context.Context, hs *harness.Harness) (store.Store, error) {
	st, err := engine.Open(ctx, hs, nil)
	if err != nil {
		return nil, err
	}
	if err := SeedStore(ctx, hs, st); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// OpenStoreFile opens the harness's store as [OpenStore] does (for
// SQLite, the directory and file modes included; for PostgreSQL, the
// connection and the schema migration), without loading the seed: what
// opens an existing run loads it only once the run's recorded harness is
// confirmed (package launch). See package store/engine.
func OpenStoreFile(hs *harness.Harness) (store.Store, error) {
	return engine.Open(context.Background(), hs, nil)
}

// SeedStore loads the harness's customer seed (store.seed) into st;
// nothing when the harness names none. An unreadable seed is an error
// that says so.
func SeedStore(ctx context.Context, hs *harness.Harness, st store.Store) error {
	if hs.Store.Seed == "" {
		return nil
	}
	cs, err := store.ReadSeed(hs.Store.Seed)
	if err != nil {
		return fmt.Errorf("reading the store seed: %w", err)
	}
	d, err := builtin.DataOf(st)
	if err != nil {
		return fmt.Errorf("loading the store seed: %w", err)
	}
	return d.SeedCustomers(ctx, cs)
}

// requiredServers returns the MCP server names the documents require,
// sorted and unique.
func requiredServers(docs []*playbook.Document) []string {
	seen := map[string]bool{}
	for _, d := range docs {
		if d == nil || d.Requires == nil {
			continue
		}
		for _, s := range d.Requires.MCPServers {
			if s.Name != nil {
				seen[s.Name.Value] = true
			}
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
