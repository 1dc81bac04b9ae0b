// Package harness reads the harness file: the YAML or JSON file that tells
// the openplaybook runtime what it has to run playbooks with. It binds the
// logical names a playbook declares in its requires block (MCP servers,
// provider connections, named secrets) and the agent names its steps use
// to concrete things: commands and URLs, credentials by secret name, agent
// drivers. docs/harness.md is the reference of the file.
//
// The file is read strictly. Unknown keys, keys that differ from a known
// key only by case, duplicate keys, wrong types and YAML features that make
// a configuration ambiguous (anchors, aliases, merge keys, tags, several
// documents, non-decimal numbers) are errors, each a [diag.Diagnostic]
// with the file, a 1-based line, a 1-based byte column and an RFC 6901 JSON
// Pointer, in the same shape as every other openplaybook check.
//
// The harness file never holds a credential. Values that need one refer to
// a named secret as ${secret:NAME}, and [Secrets] resolves the names from
// the process environment and dotenv files. Literal text that looks like a
// credential is an error (rule harness-credential) whose message names the
// place, never the value. No function of this package puts a resolved
// secret value into an error, a diagnostic, or the output of fmt or
// log/slog; [Redactor] and [Secrets.Redact] help the runtime keep them out
// of everything else.
package harness

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/policy"
)

// Defaults applied when the harness file does not say.
const (
	// DefaultTimeout is how long an MCP server may take to start and list
	// its tools.
	DefaultTimeout = 10 * time.Second

	// ToolsCheckEveryCall and ToolsCheckOnChange are the values of
	// mcpServers.<name>.toolsCheck.
	ToolsCheckEveryCall = "every-call"
	ToolsCheckOnChange  = "on-change"
	// DefaultApprovalExpiry is how long a pending gate waits for a
	// decision before it expires.
	DefaultApprovalExpiry = 24 * time.Hour
	// DefaultMaxToolCalls is the most tool calls one agent step may make.
	DefaultMaxToolCalls = 50
	// DefaultSQLite is the store's database file, relative to the harness
	// file's directory.
	DefaultSQLite = "openplaybook.db"
)

// Harness is a harness file as read by [Parse] or [Load]. Every map is
// non-nil (empty when the file has no such section), and Secrets, Store
// and Runtime are non-nil with defaults filled in.
//
// When the diagnostics returned with it hold an error, the Harness is what
// could be read: use it to report, never to run.
//
// Paths: relative paths the harness file gives (an MCP server's cwd,
// dotenv files, the store's sqlite file) resolve against the directory of
// the harness file, so a harness means the same thing whatever directory
// openplaybook runs from. The fields below hold them resolved; the
// runtime resolves paths in agent settings with [Harness.ResolvePath].
type Harness struct {
	// Path is the file name given to Load or Parse, as given.
	Path string
	// Dir is the directory relative paths resolve against: the harness
	// file's directory, made absolute by Load; as given to Parse.
	Dir string

	// MCPServers maps a logical server name (as in requires.mcpServers
	// and mcp.<name>.<tool> tool names) to its binding.
	MCPServers map[string]*MCPServer
	// Connections maps a provider ("stripe", "gmail", ...) to its
	// binding.
	Connections map[string]*Connection
	// Secrets says where named secrets come from; see [SecretsConfig].
	Secrets *SecretsConfig
	// Agents maps an agent name (a step's "agent") to its driver binding.
	// Reserved for the runtime: only the driver is checked here.
	Agents map[string]*Agent
	// Store is where the runtime keeps runs, approvals and audit records.
	Store *Store
	// Runtime holds the runtime's limits.
	Runtime *Runtime
	// Serve configures `openplaybook serve` and `openplaybook mcp`.
	Serve *Serve
	// Policy is the approval policy (harness "policy"; docs/policy.md):
	// rules that can only tighten what a document says about a call. Nil
	// when the file has none.
	Policy *policy.Policy

	refs []SecretRef
}

// Pos is where something is in the harness file: a 1-based line and byte
// column, and the RFC 6901 JSON Pointer of its value (for example
// "/mcpServers/memory"). Runtime diagnostics about a binding use it.
type Pos struct {
	Line, Column int
	Pointer      string
}

// MCPServer is one MCP server binding. Exactly one transport is set:
// Command (stdio: the runtime starts Command with Args, in Cwd, with Env
// added to its environment) or URL (streamable HTTP, with Headers on every
// request).
//
// Args, Env values, URL and Headers values may hold ${secret:NAME}
// references, kept here as written: the runtime expands them with
// [MCPServer.Expand] when it starts or connects to the server, never
// before.
type MCPServer struct {
	// Name is the logical name, ^[a-z][a-z0-9_-]*$.
	Name string

	// Command is the program to run: a bare name is looked up in PATH; a
	// name with a path separator is relative to Cwd. It is run directly,
	// never by a shell.
	Command string
	// Args are the program's arguments, as written (not resolved as
	// paths: the program reads them relative to Cwd).
	Args []string
	// Env holds the server's environment variables (names
	// ^[A-Za-z_][A-Za-z0-9_]*$). Never nil for a stdio server. The server
	// does not inherit the runtime's environment, where other credentials
	// live: package mcphost gives it PATH and HOME (SystemRoot on Windows)
	// and Env over them.
	Env map[string]string
	// Cwd is the directory the program runs in: the cwd the file gives,
	// resolved against the harness directory, or the harness directory.
	Cwd string

	// URL is the absolute http or https URL of a streamable HTTP server.
	URL string
	// Headers are HTTP headers sent with every request (for example
	// Authorization: "Bearer ${secret:ACME_MCP_TOKEN}"). Never nil for an
	// HTTP server.
	Headers map[string]string
	// OAuth, for an HTTP server, is the client it authorizes as with
	// OAuth 2.0 client credentials, or nil.
	OAuth *ServerOAuth

	// Timeout bounds start-up (or connection) plus the initial tool
	// listing. Default [DefaultTimeout].
	Timeout time.Duration

	// CallTimeout bounds one tools/call to the server; zero means the
	// runtime's call timeout (60 s). A side-effecting call it cuts short
	// is outcome-unknown.
	CallTimeout time.Duration

	// ToolsCheck is how a tool's definition is confirmed before each
	// call: [ToolsCheckEveryCall] (the default: the server's tools are
	// listed afresh before every call) or [ToolsCheckOnChange] (listed
	// again only after the server announced a change; a call can slip
	// through while an announcement is on its way). See docs/harness.md.
	ToolsCheck string

	// BoundSecrets are the names of the secrets bound to this server
	// (destination "mcp:<Name>"; see docs/harness.md, "Secret binding"),
	// sorted. [MCPServer.Expand] refuses a reference to any other secret.
	BoundSecrets []string

	Pos Pos
}

// Stdio reports whether the server is started as a subprocess (Command
// set) rather than reached over HTTP.
func (s *MCPServer) Stdio() bool { return s.Command != "" }

// Connection is one provider connection binding.
type Connection struct {
	// Provider is one of the providers of the format ("stripe", "gmail",
	// ...; see [Providers]).
	Provider string
	// AuthKind is "oauth", "api_token" or "aggregator_link"; it must match
	// what the playbook's requires.connections entry declares.
	AuthKind string
	// Secrets maps a role ("apiKey", "accessToken", ...; see [Roles]) to
	// the name of the secret holding it. Resolve with [Secrets.Lookup].
	Secrets map[string]string
	// Scopes are the scopes the credential was granted (never nil).
	Scopes []string
	// ScopesPos is where "scopes" is written; the zero Pos when it is not.
	ScopesPos Pos
	// CallTimeout bounds one call to the provider; zero means the
	// connector's default. A write it cuts short is outcome-unknown.
	CallTimeout time.Duration
	// BaseURL replaces the provider's API root (for example
	// http://127.0.0.1:12111 for stripe-mock, or a Prism mock serving the
	// provider's API description). Empty means the provider's own.
	BaseURL string
	// TokenURL replaces the provider's OAuth token endpoint, used to
	// refresh the access token (docs/connectors.md). Empty means the
	// provider's own.
	TokenURL string
	// RateLimits replace the connector's published rate limits for this
	// connection when not nil (an empty list: no client-side limits);
	// see [RateLimit].
	RateLimits []RateLimit
	// BoundSecrets are the names of the secrets bound to this connection
	// (destination "connection:<Provider>"), sorted.
	// [Connection.Resolve] refuses a role whose secret is not one of them.
	BoundSecrets []string

	Pos Pos
}

// SecretsConfig says where named secrets come from. With no secrets
// section in the file it is {Env: true}: the process environment only.
//
// Precedence: the process environment (when Env) first, then each dotenv
// file in the order listed; the first source holding a non-empty value
// wins. See [Secrets.Lookup].
type SecretsConfig struct {
	// Env reads secrets from the process environment. Default true.
	Env bool
	// Prefix is prepended to a secret's name when it is looked up in the
	// environment (Prefix "OPB_": the secret STRIPE_API_KEY is read from
	// OPB_STRIPE_API_KEY). It does not apply to dotenv files.
	Prefix string
	// Dotenv lists dotenv files, in precedence order.
	Dotenv []DotenvFile
}

// DotenvFile is one dotenv file of [SecretsConfig].
type DotenvFile struct {
	// Path is the path as written in the harness file.
	Path string
	// Resolved is Path resolved against the harness directory.
	Resolved string
	// Optional files may be missing; a missing required file is an error
	// when secrets are first looked up. A malformed file is an error
	// either way.
	Optional bool
}

// Agent binds an agent name to a driver. The section is reserved for the
// runtime: this package checks only that driver is a non-empty string and
// keeps every other setting as read. The planned drivers:
//
//	transcript: {driver: transcript, transcript: <path>}   replays a recorded transcript
//	openai:     {driver: openai, model: ..., baseURL: ..., apiKeySecret: OPENAI_API_KEY}
//	anthropic:  {driver: anthropic, model: ..., baseURL: ..., apiKeySecret: ANTHROPIC_API_KEY}
type Agent struct {
	Name   string
	Driver string
	// Settings holds every key but driver, as plain JSON values (string,
	// json.Number, bool, nil, map[string]any, []any). Paths are as
	// written: resolve them with [Harness.ResolvePath]. Strings may hold
	// ${secret:NAME} references, which the driver expands.
	Settings map[string]any
	// BoundSecrets are the names of the secrets bound to this agent
	// (destination "agent:<Name>"), sorted: the only secrets its driver
	// may expand or resolve.
	BoundSecrets []string

	Pos Pos
}

// Store says where the runtime keeps its state: an SQLite file (the
// default) or a PostgreSQL database. Exactly one engine is set: SQLite is
// "" when Postgres is non-nil.
type Store struct {
	// SQLite is the database file, resolved against the harness
	// directory. Default [DefaultSQLite] in the harness directory; "" when
	// the harness says store.postgres.
	SQLite string
	// Postgres is the PostgreSQL database the harness names under
	// store.postgres, or nil.
	Postgres *Postgres
	// Seed is a JSON file of customers (an array of objects with id,
	// name, email and optionally company, plan, tags) that the runtime
	// loads into the store's customer records, replacing records with the
	// same id, each time it opens the store. "" means none.
	Seed string
	// Vault is store.vault, the credential vault's keys, or nil: then
	// tokens a token endpoint issues are kept in memory only.
	Vault *Vault
}

// Engine names the store's engine: "sqlite" or "postgres".
func (s *Store) Engine() string {
	if s != nil && s.Postgres != nil {
		return "postgres"
	}
	return "sqlite"
}

// Postgres is store.postgres: the PostgreSQL database the runtime keeps
// its state in.
type Postgres struct {
	// URL is the database's connection URL as written: a postgres:// or
	// postgresql:// URL (libpq's URI form, as pgx reads it), usually a
	// single ${secret:NAME} reference such as
	// "${secret:OPENPLAYBOOK_DATABASE_URL}", since the URL carries the
	// password. A literal part never holds a password (the decoder refuses
	// one: rule harness-credential). Resolve it with [Postgres.Expand];
	// the resolved URL is a credential: never print it.
	URL string
	// Pos is where the url value is in the harness file.
	Pos Pos
}

// Expand returns the URL with every ${secret:NAME} replaced by the
// secret's value (see [Secrets.Expand]): a postgres:// or postgresql://
// URL. The error names the secret that cannot be resolved, or says the
// resolved value is not such a URL; it never holds the value. The URL's
// secrets go to the runtime's own database connection only, never to a
// tool: they need no binding under secrets.declare.
func (p *Postgres) Expand(sec *Secrets) (string, error) {
	u, err := sec.Expand(p.URL)
	if err != nil {
		return "", fmt.Errorf("store.postgres.url: %w", err)
	}
	if !PostgresURL(u) {
		return "", fmt.Errorf("store.postgres.url: the value is not a postgres:// or postgresql:// URL (not shown: it may hold a password)")
	}
	return u, nil
}

// PostgresURL reports whether u has the shape of a PostgreSQL connection
// URL: scheme postgres or postgresql and nothing else. It does not
// connect and does not validate the parameters.
func PostgresURL(u string) bool {
	scheme, _, ok := strings.Cut(u, "://")
	if !ok {
		return false
	}
	scheme = strings.ToLower(scheme)
	return scheme == "postgres" || scheme == "postgresql"
}

// Runtime holds the runtime's limits.
type Runtime struct {
	// ApprovalExpiry is how long a gate waits for a decision. Default
	// [DefaultApprovalExpiry].
	ApprovalExpiry time.Duration
	// MaxToolCalls is the most tool calls one agent step may make.
	// Default [DefaultMaxToolCalls].
	MaxToolCalls int
}

// Defaults of [Serve].
const (
	DefaultOperatorTokenSecret = "OPENPLAYBOOK_OPERATOR_TOKEN"
	DefaultApprovalWait        = 60 * time.Second
)

// Serve configures the server (docs/serve.md).
type Serve struct {
	// OperatorTokenSecret names the secret whose value is the operator's
	// bearer token for the HTTP API and the console. Default
	// [DefaultOperatorTokenSecret].
	OperatorTokenSecret string
	// ApprovalWait is how long an external agent's tools/call waits for
	// a person's approval before it is answered "pending". Default
	// [DefaultApprovalWait].
	ApprovalWait time.Duration
	// AllowedOrigins are the browser origins ("https://host:port"), other
	// than the server's own, whose requests carry an Origin header the
	// server accepts (DNS rebinding protection). Empty: only the server's
	// own origin.
	AllowedOrigins []string
	// PublicURL is the URL clients reach the server at behind an ingress
	// ("https://playbooks.example.com", no path): the MCP URLs the server
	// hands out begin with it, and it is the server's own origin. ""
	// means the listen address. serve's --public-url wins over it.
	PublicURL string
	// TrustedProxies are the IP addresses and CIDR prefixes whose
	// X-Forwarded-* and Forwarded headers serve believes. serve's
	// --trusted-proxies wins over them.
	TrustedProxies []string
	// OIDC, when set, has operators log in with OpenID Connect and be
	// named by their verified identity (docs/identity.md). Nil: the
	// operator token alone.
	OIDC *OIDC
	// Webhooks receive the server's notifications (an approval or a
	// gate waits, a run ended; docs/console.md). Empty: none are sent.
	Webhooks []Webhook
}

// OIDC configures operators' identity: an OpenID Connect issuer the
// console logs in with (authorization code with PKCE) and whose JWT
// access tokens the API accepts as bearer tokens (docs/identity.md).
type OIDC struct {
	// Issuer is the issuer URL; its discovery document is at
	// Issuer + "/.well-known/openid-configuration". https, or http on a
	// loopback host.
	Issuer string
	// ClientID is the console's OAuth client at the issuer. Required.
	ClientID string
	// ClientSecretSecret names the secret holding the client's secret;
	// "" for a public client (PKCE alone).
	ClientSecretSecret string
	// Audience lists the "aud" values an API bearer token may carry (one
	// of them is enough). Default: [ClientID].
	Audience []string
	// Scopes are asked for at login. Default: openid, profile, email.
	Scopes []string
	// SubjectClaim, NameClaim, EmailClaim and GroupsClaim name the
	// claims that identify a person, give their name and e-mail, and
	// list their groups. Defaults: sub, name, email, groups.
	SubjectClaim, NameClaim, EmailClaim, GroupsClaim string
	// Operators, when not empty, are the only people who may log in or
	// call the API: a verified identity outside them is refused.
	Operators Principals
	// Deciders, when not empty, are the only people who may decide gates
	// and approvals. Empty: every operator.
	Deciders Principals
	// SelfApproval lets the person who started a run decide its gates
	// and approvals. Default false: they may not.
	SelfApproval bool
	// OperatorToken keeps the operator token (serve.operatorTokenSecret)
	// as a bootstrap credential: it may do everything but decide. Default
	// true; false turns it off (the secret need not be set).
	OperatorToken bool
	// AgentClaim, when not "", lets agents reach a run's MCP URL with a
	// JWT access token of Issuer whose audience is that URL (serve
	// "agents": {"claim": ...}; docs/serve.md, "Agents over OAuth"): the
	// claim it names (e.g. client_id) is the agent's name, one of the
	// run's agents. "" (no "agents"): agents use agent tokens only.
	AgentClaim string
	Pos        Pos
}

// Principals are people named by subject and by group.
type Principals = policy.Principals

// SecretRef is one use of a named secret in the harness file.
type SecretRef struct {
	// Name is the secret's name.
	Name string
	// Via says how the file uses it: "reference" (a ${secret:NAME} in a
	// value), "connection" (a role of connections.<provider>.secrets) or
	// "agent" (an agent's apiKeySecret).
	Via string
	// For is the destination the use hands the secret to: "mcp:<server>",
	// "connection:<provider>" or "agent:<name>" (see [Destination]).
	For string
	// Pos is the place of the value holding the name.
	Pos Pos
}

// SecretRefs returns every use of a named secret in the harness, in file
// order: the ${secret:NAME} references, the connections' secret names and
// agents' apiKeySecret names. A preflight check looks each one up (see
// [Harness.CheckSecrets]) before a run starts.
func (h *Harness) SecretRefs() []SecretRef {
	out := make([]SecretRef, len(h.refs))
	copy(out, h.refs)
	return out
}

// SecretNames returns the distinct secret names of [Harness.SecretRefs],
// sorted.
func (h *Harness) SecretNames() []string {
	seen := map[string]bool{}
	var names []string
	for _, r := range h.refs {
		if !seen[r.Name] {
			seen[r.Name] = true
			names = append(names, r.Name)
		}
	}
	sort.Strings(names)
	return names
}

// ResolvePath resolves a path given in the harness file: an absolute path
// is returned cleaned, a relative one is joined to [Harness.Dir].
func (h *Harness) ResolvePath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(h.Dir, p)
}

// Load reads the harness file at path. The error is for I/O only (the
// file cannot be read); every problem with the file's content is a
// diagnostic, and the Harness is then partial (see [Harness]). Relative
// paths in the file resolve against the file's directory, made absolute.
func Load(path string) (*Harness, []diag.Diagnostic, error) {
	src, err := readLimited(path)
	if err != nil {
		return nil, nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, nil, fmt.Errorf("harness: %w", err)
	}
	h, ds := Parse(path, src, dir)
	return h, ds, nil
}

// readLimited reads at most MaxSize+1 bytes, so that a huge file (or a
// device) is rejected by the size limit without being read whole.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxSize+1))
}

// Parse reads a harness file from src. name is the file name for
// diagnostics and chooses the syntax by extension (.json is JSON; .yaml
// and .yml are YAML; otherwise a file whose first non-blank byte is '{' is
// JSON, anything else YAML). dir is the directory relative paths resolve
// against ("" is the current directory). Parse does no I/O and never
// panics; it always returns a non-nil Harness, with the problems found as
// diagnostics sorted by position.
func Parse(name string, src []byte, dir string) (*Harness, []diag.Diagnostic) {
	h := &Harness{
		Path:        name,
		Dir:         dir,
		MCPServers:  map[string]*MCPServer{},
		Connections: map[string]*Connection{},
		Secrets:     &SecretsConfig{Env: true},
		Agents:      map[string]*Agent{},
		Store:       &Store{},
		Runtime:     &Runtime{ApprovalExpiry: DefaultApprovalExpiry, MaxToolCalls: DefaultMaxToolCalls},
		Serve:       &Serve{OperatorTokenSecret: DefaultOperatorTokenSecret, ApprovalWait: DefaultApprovalWait},
	}
	h.Store.SQLite = h.ResolvePath(DefaultSQLite)
	r := &reader{file: name, src: src}
	root := r.read(syntaxOf(name, src))
	if root != nil {
		d := &decoder{reader: r, h: h}
		d.root(root)
	}
	diag.Sort(r.ds)
	return h, r.ds
}

// ToolsChecks are the values of mcpServers.<name>.toolsCheck.
var ToolsChecks = []string{ToolsCheckEveryCall, ToolsCheckOnChange}
