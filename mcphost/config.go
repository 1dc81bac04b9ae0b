package mcphost

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// DefaultTimeout bounds start-up, initialize and the first tools/list of a
// server when [ServerConfig.Timeout] is zero.
const DefaultTimeout = 10 * time.Second

// ServerConfig says how to reach one MCP server a harness binds: a stdio
// command (Command set) or a streamable HTTP endpoint (URL set), never
// both.
//
// Env and Headers values may be secrets (tokens, API keys). They are passed
// to the server and nowhere else: no error, message or log of this package
// contains them (see [Error]).
type ServerConfig struct {
	// Name is the logical server name from the harness, ^[a-z][a-z0-9_-]*$.
	// Tool names compose from it: mcp.<Name>.<tool>.
	Name string

	// Command is the program to start for a stdio server. It is looked up
	// in this process's PATH when it has no slash.
	Command string
	// Args are the command's arguments (without the program name).
	Args []string
	// Env is the server's environment beyond the minimal one, values
	// already resolved.
	//
	// The server does not inherit this process's environment: it gets PATH
	// and HOME from this process (when set; SystemRoot too on Windows),
	// then Env on top (Env wins). So a secret in this process's environment
	// (a cloud token, another server's key) never reaches a server it was
	// not bound to.
	Env map[string]string
	// Dir is the server's working directory; "" means this process's.
	Dir string

	// URL is the endpoint of a streamable HTTP server (http or https).
	URL string
	// Headers are sent with every request to URL's scheme and host (an
	// Authorization header, for example). Redirects are refused, so they
	// never reach another host.
	Headers map[string]string

	// Timeout bounds start-up, initialize and the first tools/list
	// together, and each later re-listing. Zero means [DefaultTimeout].
	Timeout time.Duration

	// CallTimeout bounds one tools/call of [Server.RegistryTool]'s tools.
	// Zero means no bound but the caller's context.
	CallTimeout time.Duration

	// ToolsCheck says how the definition of a tool is confirmed before
	// each call ([Server.RegistryTool]): [CheckEveryCall] (the zero value)
	// lists the server's tools afresh before every call; [CheckOnChange]
	// re-lists only after the server announced a change (and, for a
	// server that does not announce changes, before every call), which
	// saves a tools/list round trip per call but lets a call through in
	// the moment between a change and its announcement reaching us.
	ToolsCheck ToolsCheck

	// OAuth, for an HTTP server, is the OAuth 2.0 client it authorizes as
	// with the client-credentials grant when the server answers 401 or 403
	// (the MCP authorization spec, through go-sdk's extauth handler), or
	// nil.
	OAuth *OAuthClient

	// Secrets are more values to keep out of every error and stderr tail
	// of this package, besides Env and Headers values: for example
	// secrets the caller expanded into Args. Values shorter than 6 bytes
	// are ignored, as for Env.
	Secrets []string
}

// ToolsCheck is [ServerConfig.ToolsCheck].
type ToolsCheck string

// The ways to confirm a tool's definition before a call.
const (
	CheckEveryCall ToolsCheck = "every-call"
	CheckOnChange  ToolsCheck = "on-change"
)

func (c *ServerConfig) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// check reports a configuration that cannot be used. Its messages name
// keys, never values.
func (c *ServerConfig) check() error {
	if !serverNameRE.MatchString(c.Name) {
		return fmt.Errorf("invalid server name %s: want a logical name matching ^[a-z][a-z0-9_-]*$ (never a URL or a path)", quoteName(c.Name))
	}
	switch c.ToolsCheck {
	case "", CheckEveryCall, CheckOnChange:
	default:
		return fmt.Errorf("toolsCheck %s: want %q or %q", quoteName(string(c.ToolsCheck)), CheckEveryCall, CheckOnChange)
	}
	switch {
	case c.Command == "" && c.URL == "":
		return errors.New("neither a command nor a URL is configured")
	case c.Command != "" && c.URL != "":
		return errors.New("both a command and a URL are configured; choose one")
	}
	if c.Command != "" {
		if len(c.Headers) > 0 {
			return errors.New("headers are configured for a stdio server; they apply to URL servers only")
		}
		for _, k := range sortedKeys(c.Env) {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return fmt.Errorf("invalid environment variable name %s", quoteName(k))
			}
			if strings.ContainsRune(c.Env[k], 0) {
				return fmt.Errorf("the value of environment variable %s contains a NUL byte", k)
			}
		}
		for i, a := range c.Args {
			if strings.ContainsRune(a, 0) {
				return fmt.Errorf("argument %d contains a NUL byte", i+1)
			}
		}
		return nil
	}
	if len(c.Env) > 0 || len(c.Args) > 0 || c.Dir != "" {
		return errors.New("env, args or dir are configured for a URL server; they apply to stdio servers only")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("invalid URL %s: want an absolute http or https URL", quoteName(redactURL(c.URL)))
	}
	for _, k := range sortedKeys(c.Headers) {
		if !validHeaderName(k) {
			return fmt.Errorf("invalid header name %s", quoteName(k))
		}
		if strings.ContainsAny(c.Headers[k], "\r\n\x00") {
			return fmt.Errorf("the value of header %s contains a line break or NUL byte", k)
		}
	}
	return nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// environ is the server's environment: the minimal inherited variables,
// then c.Env over them.
func (c *ServerConfig) environ() []string {
	env := map[string]string{}
	inherit := []string{"PATH", "HOME"}
	if runtime.GOOS == "windows" {
		inherit = append(inherit, "SystemRoot")
	}
	for _, k := range inherit {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range c.Env {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for _, k := range sortedKeys(env) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// minSecretLen is the shortest Env or Headers value that is redacted from
// messages. Shorter values ("1", "true") would blank out ordinary text and
// are not credentials in practice.
const minSecretLen = 6

// secrets returns the configured values that must never appear in a
// message, longest first (so a secret containing another is redacted
// whole).
func (c *ServerConfig) secrets() []string {
	var s []string
	add := func(v string) {
		if len(v) >= minSecretLen && !slices.Contains(s, v) {
			s = append(s, v)
		}
	}
	for _, v := range c.Env {
		add(v)
	}
	for _, v := range c.Secrets {
		add(v)
	}
	if c.OAuth != nil {
		add(c.OAuth.ClientSecret)
	}
	for _, v := range c.Headers {
		add(v)
		// "Bearer <token>": the token alone may be echoed too.
		if _, tok, ok := strings.Cut(v, " "); ok {
			add(strings.TrimSpace(tok))
		}
	}
	if u, err := url.Parse(c.URL); err == nil && c.URL != "" {
		if p, ok := u.User.Password(); ok {
			add(p)
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				add(v)
			}
		}
		if u.RawQuery != "" {
			add(u.RawQuery)
		}
	}
	sort.Slice(s, func(i, j int) bool { return len(s[i]) > len(s[j]) })
	return s
}

// redactURL returns u without user information, query or fragment: what
// is safe to show of an endpoint.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	u.RawQuery = ""
	u.ForceQuery = false
	u.Fragment = ""
	u.RawFragment = ""
	return u.String()
}

// redactor replaces secrets in text.
type redactor struct {
	secrets []string
	url     string  // the configured URL, shown as redactURL(url)
	issued  *issued // OAuth tokens issued for the server since (nil: none)
}

func (r redactor) redact(s string) string {
	if r.url != "" {
		s = strings.ReplaceAll(s, r.url, redactURL(r.url))
	}
	for _, v := range r.secrets {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	if r.issued != nil {
		for _, v := range r.issued.values() {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// redactIssued replaces the issued OAuth tokens only: in a tool's result
// JSON, a token with a character JSON escapes ('"', '\\', control
// characters) is not written as is there, so it is left to the escaped
// form's own check (none: such tokens are not issued in practice).
func (r redactor) redactIssued(s string) string {
	if r.issued == nil {
		return s
	}
	for _, v := range r.issued.values() {
		if !strings.ContainsAny(v, "\"\\") {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// issued is the set of OAuth tokens an authorization server issued for
// one server (or the vault held), redacted like its configured secrets.
type issued struct {
	mu   sync.Mutex
	vals []string
}

func (i *issued) add(vals ...string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, v := range vals {
		if len(v) >= minSecretLen && !slices.Contains(i.vals, v) {
			i.vals = append(i.vals, v)
		}
	}
}

func (i *issued) values() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return slices.Clone(i.vals)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
