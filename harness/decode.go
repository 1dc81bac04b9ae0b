package harness

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/internal/suggest"
	"github.com/openplaybook/openplaybook/policy"
)

// Providers are the connection providers of OpenPlaybook 1.6 (spec "The
// requires declaration", connections[].provider), the keys the
// connections section accepts.
var Providers = []string{
	"stripe", "github", "vercel", "posthog", "gmail", "resend", "linear", "slack", "notion",
	"mercury", "square", "plaid", "shopify", "ramp", "clover", "brex",
	"stripe_financial_connections", "teller", "paypal", "etsy", "amazon", "gusto",
}

// AuthKinds are the values of a connection's authKind.
var AuthKinds = []string{"oauth", "api_token", "aggregator_link"}

// Roles are the keys a connection's secrets map accepts: what each secret
// is to the provider's client.
var Roles = []string{"apiKey", "accessToken", "refreshToken", "clientId", "clientSecret", "webhookSecret"}

// exampleRole is the role a message suggests for a connection that binds
// no secrets: "apiKey" for api_token, else "accessToken". Which roles a
// provider needs is the connector's to say (package host checks them).
func exampleRole(authKind string) string {
	if authKind == "api_token" {
		return "apiKey"
	}
	return "accessToken"
}

var (
	topKeys        = []string{"$schema", "mcpServers", "connections", "secrets", "agents", "store", "runtime", "serve", "policy"}
	policyKeys     = []string{"rules"}
	ruleKeys       = []string{"name", "tools", "riskClasses", "steps", "connectors", "gates", "when", "effect", "reason", "deciders", "approvals", "selfApproval"}
	serverKeys     = []string{"command", "args", "env", "cwd", "url", "headers", "oauth", "timeout", "toolsCheck", "callTimeout"}
	connectionKeys = []string{"authKind", "secrets", "scopes", "baseURL", "tokenURL", "callTimeout", "rateLimits"}
	secretsKeys    = []string{"env", "prefix", "dotenv", "declare"}
	declKeys       = []string{"mcpServers", "connections", "agents"} // in the order of destinationKinds
	dotenvKeys     = []string{"path", "optional"}
	storeKeys      = []string{"sqlite", "postgres", "seed", "vault"}
	postgresKeys   = []string{"url"}
	runtimeKeys    = []string{"approvalExpiry", "maxToolCalls"}
	serveKeys      = []string{"operatorTokenSecret", "approvalWait", "allowedOrigins", "publicURL", "trustedProxies", "oidc", "webhooks"}
	oidcKeys       = []string{"issuer", "clientID", "clientSecretSecret", "audience", "scopes", "claims", "operators", "deciders", "selfApproval", "operatorToken", "agents"}
	agentOAuthKeys = []string{"claim"}
	claimKeys      = []string{"subject", "name", "email", "groups"}
	principalKeys  = []string{"subjects", "groups"}
)

var (
	serverName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// sensitiveSetting matches agent setting names that say they hold a
	// credential; the planned form is apiKeySecret: NAME.
	sensitiveSetting = regexp.MustCompile(`(?i)^(api_?key|token|access_?token|auth_?token|password|secret|client_?secret)$`)
	headerName       = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	// durationSyntax is the duration syntax the harness accepts: Go's
	// time.ParseDuration without signs, "0" or exponents. The schema has
	// the same pattern.
	durationSyntax = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)
	// unitless is a duration written without its unit: a plain decimal
	// number.
	unitless = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
)

// decoder checks the sections of a harness tree and fills the Harness.
type decoder struct {
	*reader
	h       *Harness
	flagged map[string]bool // pointers already reported as credentials
	dest    string          // the destination whose values are being read ("mcp:acme"), for SecretRef.For

	declare   *node                  // the secrets.declare map, nil without one
	decls     map[string]*secretDecl // its well-formed entries
	inFile    map[string]bool        // every destination the file names ("mcp:acme", "agent:lou"), valid or not
	declOrder []string               // decls' names, in file order
}

// secretDecl is one entry of secrets.declare.
type secretDecl struct {
	name string
	key  member
	dest map[string]*node // destination -> its element of "for"
}

func (d *decoder) errN(n *node, rule, format string, args ...any) {
	d.errAt(n.line, n.col, n.ptr, rule, format, args...)
}

func (d *decoder) warnN(n *node, rule, format string, args ...any) {
	d.add(diag.Warning, n.line, n.col, n.ptr, rule, format, args...)
}

// errKey reports a problem with a key itself, at the key.
func (d *decoder) errKey(m member, rule, format string, args ...any) {
	d.errAt(m.line, m.col, m.val.ptr, rule, format, args...)
}

func pos(n *node) Pos { return Pos{Line: n.line, Column: n.col, Pointer: n.ptr} }

// want reports n unless it is of kind k. label names the value in the
// message ("\"args\"", "MCP server \"memory\"").
func (d *decoder) want(n *node, k kind, label string) bool {
	if n.kind == k {
		return true
	}
	hint := ""
	if k == kString && (n.kind == kNumber || n.kind == kBool) {
		hint = "; quote it to make it a string"
	}
	d.errN(n, RuleType, "%s must be %s, not %s%s", label, k, n.kind, hint)
	return false
}

// fields checks the keys of the map n against allowed, reporting each
// unknown key with a "did you mean", and returns the known members by key.
func (d *decoder) fields(n *node, where string, allowed []string) map[string]*node {
	out := make(map[string]*node, len(n.members))
	for _, m := range n.members {
		if slices.Contains(allowed, m.key) {
			out[m.key] = m.val
			continue
		}
		d.unknownKey(m, where, allowed)
	}
	return out
}

func (d *decoder) unknownKey(m member, where string, allowed []string) {
	for _, a := range allowed {
		if strings.EqualFold(a, m.key) {
			d.errKey(m, RuleUnknownKey, "unknown key %q in %s; keys are case-sensitive: did you mean %q?", m.key, where, a)
			return
		}
	}
	if c, ok := suggest.Closest(m.key, allowed); ok {
		d.errKey(m, RuleUnknownKey, "unknown key %q in %s (did you mean %q?)", m.key, where, c)
		return
	}
	d.errKey(m, RuleUnknownKey, "unknown key %q in %s; the keys here are %s", m.key, where, quoteList(allowed))
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, ", ")
}

// str returns the string value of n, reporting any other kind.
func (d *decoder) str(n *node, label string) (string, bool) {
	if !d.want(n, kString, label) {
		return "", false
	}
	return n.text, true
}

// nonEmpty is str that also refuses "".
func (d *decoder) nonEmpty(n *node, label string) (string, bool) {
	s, ok := d.str(n, label)
	if ok && s == "" {
		d.errN(n, RuleValue, "%s must not be empty", label)
		return "", false
	}
	return s, ok
}

// noRefs reports a "${" in a value where secret references are not
// expanded.
func (d *decoder) noRefs(n *node, label string) bool {
	if strings.Contains(n.text, "${") {
		d.errN(n, RuleSecretRef, "%s is used as written: ${secret:NAME} is expanded only in an MCP server's args, env, url, headers and oauth client and in agent settings", label)
		return false
	}
	return true
}

// refs checks the secret references of a value where they are expanded
// and records them.
func (d *decoder) refs(n *node) bool {
	if !strings.Contains(n.text, "${") {
		return true
	}
	refs, rerr := scanRefs(n.text)
	for _, r := range refs {
		d.h.refs = append(d.h.refs, SecretRef{Name: r.name, Via: "reference", For: d.dest, Pos: pos(n)})
	}
	if rerr != nil {
		d.errN(n, RuleSecretRef, "%s", rerr.msg)
		return false
	}
	return true
}

// duration reads a positive duration such as "10s", "1m30s" or "24h". A
// number without a unit (15, or "15") is refused with the seconds written
// out: write "15s".
func (d *decoder) duration(n *node, label string) (time.Duration, bool) {
	if n.kind == kNumber && positive(n.text) {
		d.errN(n, RuleType, "%s is a number without a unit: write %q for %s seconds (a number and a unit: ms, s, m or h)", label, n.text+"s", n.text)
		return 0, false
	}
	s, ok := d.str(n, label)
	if !ok {
		return 0, false
	}
	if positive(s) {
		d.errN(n, RuleValue, "%s has no unit: write %q for %s seconds (a number and a unit: ms, s, m or h)", label, s+"s", s)
		return 0, false
	}
	if !durationSyntax.MatchString(s) {
		d.errN(n, RuleValue, "%s is not a duration: write a number and a unit (ms, s, m or h), such as \"10s\", \"1m30s\" or \"24h\"", label)
		return 0, false
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		d.errN(n, RuleValue, "%s must be a duration greater than zero, such as \"10s\"", label)
		return 0, false
	}
	return v, true
}

// programFile reports whether command names an existing program file as
// the runtime would look for it: a name with a path separator relative to
// cwd (or absolute), a bare name in PATH.
func programFile(command, cwd string) bool {
	if !strings.ContainsAny(command, `/`+string(filepath.Separator)) {
		_, err := exec.LookPath(command)
		return err == nil
	}
	if !filepath.IsAbs(command) {
		command = filepath.Join(cwd, command)
	}
	fi, err := os.Stat(command)
	return err == nil && fi.Mode().IsRegular()
}

// splitCommand splits a command written with its arguments into the
// program and the arguments: the longest prefix that names a program file
// (a path with a blank in it), else the first word.
func splitCommand(command, cwd string) (string, []string) {
	words := strings.Fields(command)
	for n := len(words) - 1; n > 1; n-- {
		// The prefix as written, blanks included, up to the n-th word.
		end := 0
		for _, w := range words[:n] {
			end = strings.Index(command[end:], w) + end + len(w)
		}
		if programFile(strings.TrimSpace(command[:end]), cwd) {
			return strings.TrimSpace(command[:end]), words[n:]
		}
	}
	return words[0], words[1:]
}

// positive reports whether s is a plain decimal number greater than zero:
// a duration written without its unit.
func positive(s string) bool {
	if !unitless.MatchString(s) {
		return false
	}
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && f > 0
}

// root decodes the top-level map.
func (d *decoder) root(n *node) {
	d.flagged = map[string]bool{}
	d.inFile = map[string]bool{}
	d.credentials(n, "", nil)
	if !d.want(n, kMap, "the harness file") {
		return
	}
	f := d.fields(n, "the harness file", topKeys)
	if v := f["$schema"]; v != nil {
		d.str(v, `"$schema"`)
	}
	if v := f["mcpServers"]; v != nil {
		d.mcpServers(v)
	}
	if v := f["connections"]; v != nil {
		d.connections(v)
	}
	if v := f["secrets"]; v != nil {
		d.secrets(v)
	}
	if v := f["agents"]; v != nil {
		d.agents(v)
	}
	if v := f["store"]; v != nil {
		d.store(v)
	}
	if v := f["runtime"]; v != nil {
		d.runtime(v)
	}
	if v := f["serve"]; v != nil {
		d.serve(v)
	}
	if v := f["policy"]; v != nil {
		d.policy(v)
	}
	slices.SortStableFunc(d.h.refs, func(a, b SecretRef) int {
		return cmp.Or(cmp.Compare(a.Pos.Line, b.Pos.Line), cmp.Compare(a.Pos.Column, b.Pos.Column))
	})
	d.bind()
}

// credentials reports every string and key of the file that looks like a
// credential by its shape, and records where, so that the section checks
// do not report the same value again (or quote it). label names the value.
func (d *decoder) credentials(n *node, label string, parent *node) {
	switch n.kind {
	case kString:
		if kind := credentialIn(blankRefs(n.text)); kind != "" {
			subject := "a value"
			if label != "" {
				subject = "the value of " + label
			}
			d.errN(n, RuleCredential, "%s looks like %s; %s", subject, kind, credentialFix(n.ptr, n.text))
			d.flagged[n.ptr] = true
		}
	case kMap:
		for _, m := range n.members {
			if kind := credentialIn(m.key); kind != "" {
				d.errKey(m, RuleCredential, "a key looks like %s; %s", kind, keyFix)
				d.flagged[m.val.ptr] = true
				d.credentials(m.val, "", n)
				continue
			}
			d.credentials(m.val, strconv.Quote(m.key), n)
		}
	case kList:
		for _, e := range n.elems {
			sub := "an element"
			if label != "" {
				sub = "an element of " + label
			}
			if e.kind == kString {
				if kind := credentialIn(blankRefs(e.text)); kind != "" {
					d.errN(e, RuleCredential, "%s looks like %s; %s", sub, kind, credentialFix(e.ptr, e.text))
					d.flagged[e.ptr] = true
				}
				continue
			}
			d.credentials(e, label, n)
		}
	}
}

// sensitive reports a literal in a slot whose name says it is a credential
// (unless the shape check already did).
func (d *decoder) sensitive(n *node, what string) {
	if d.flagged[n.ptr] || !literalInSensitiveSlot(n.text) {
		return
	}
	d.flagged[n.ptr] = true
	d.errN(n, RuleCredential, "%s holds literal text, and its name says it is a credential; %s", what, credentialFix(n.ptr, n.text))
}

func (d *decoder) mcpServers(n *node) {
	if !d.want(n, kMap, `"mcpServers"`) {
		return
	}
	for _, m := range n.members {
		ok := serverName.MatchString(m.key)
		if !ok {
			d.errKey(m, RuleName, "MCP server name %q is not a logical name (^[a-z][a-z0-9_-]*$: a lower-case letter, then lower-case letters, digits, _ and -); it is the local handle of mcp.<name>.<tool> tool names, never a URL, host or path", m.key)
		}
		s := d.mcpServer(m)
		if ok && s != nil {
			d.h.MCPServers[m.key] = s
		}
	}
}

func (d *decoder) mcpServer(m member) *MCPServer {
	n := m.val
	where := fmt.Sprintf("MCP server %q", m.key)
	if !d.want(n, kMap, where) {
		return nil
	}
	s := &MCPServer{Name: m.key, Timeout: DefaultTimeout, Pos: pos(n)}
	d.dest = "mcp:" + m.key
	d.inFile[d.dest] = true
	defer func() { d.dest = "" }()
	f := d.fields(n, where, serverKeys)
	cmdN, urlN := f["command"], f["url"]
	switch {
	case cmdN != nil && urlN != nil:
		d.errN(urlN, RuleTransport, "%s has both \"command\" (a stdio server) and \"url\" (a streamable HTTP server); give exactly one", where)
	case cmdN == nil && urlN == nil:
		d.errN(n, RuleRequired, "%s needs \"command\" (a stdio server) or \"url\" (a streamable HTTP server)", where)
	}
	stdio := cmdN != nil
	for _, k := range []string{"args", "env", "cwd"} {
		if v := f[k]; v != nil && !stdio && urlN != nil {
			d.errN(v, RuleTransport, "%q is for stdio servers (with \"command\"); %s is an HTTP server (\"url\")", k, where)
		}
	}
	if v := f["headers"]; v != nil && stdio && urlN == nil {
		d.errN(v, RuleTransport, "\"headers\" is for HTTP servers (with \"url\"); %s is a stdio server (\"command\")", where)
	}
	if v := f["oauth"]; v != nil {
		if stdio && urlN == nil {
			d.errN(v, RuleTransport, "\"oauth\" is for HTTP servers (with \"url\"); %s is a stdio server (\"command\")", where)
		} else {
			s.OAuth = d.serverOAuth(v)
		}
	}

	if cmdN != nil {
		if c, ok := d.nonEmpty(cmdN, `"command"`); ok && d.noRefs(cmdN, `"command"`) {
			s.Command = c
		}
		s.Env = map[string]string{}
		s.Cwd = d.h.Dir
	}
	if v := f["args"]; v != nil && d.want(v, kList, `"args"`) {
		s.Args = []string{}
		for _, e := range v.elems {
			if a, ok := d.str(e, "each element of \"args\""); ok {
				d.refs(e)
				s.Args = append(s.Args, a)
			}
		}
	}
	if v := f["env"]; v != nil && d.want(v, kMap, `"env"`) {
		if s.Env == nil {
			s.Env = map[string]string{}
		}
		for _, em := range v.members {
			if !envName.MatchString(em.key) {
				d.errKey(em, RuleName, "%q is not an environment variable name (^[A-Za-z_][A-Za-z0-9_]*$)", em.key)
				continue
			}
			val, ok := d.str(em.val, fmt.Sprintf("environment variable %q", em.key))
			if !ok {
				continue
			}
			d.refs(em.val)
			if sensitiveEnvName.MatchString(em.key) {
				d.sensitive(em.val, fmt.Sprintf("environment variable %q", em.key))
			}
			s.Env[em.key] = val
		}
	}
	if v := f["cwd"]; v != nil {
		if c, ok := d.nonEmpty(v, `"cwd"`); ok && d.noRefs(v, `"cwd"`) {
			s.Cwd = d.h.ResolvePath(c)
		}
	}
	if strings.ContainsAny(s.Command, " \t") && !programFile(s.Command, s.Cwd) {
		// A program and its arguments in one string, with or without a
		// path ("node server.js", "/usr/bin/node /srv/server.js"): the
		// runtime would look for a program of that whole name. A path
		// with a blank that names a file ("/opt/My Tools/server") is fine.
		prog, rest := splitCommand(s.Command, s.Cwd)
		args := make([]string, len(rest))
		for i, w := range rest {
			args[i] = strconv.Quote(w)
		}
		d.warnN(cmdN, RuleValue, "\"command\" holds a blank and names no program file: it is run directly, never by a shell; put the program in \"command\" and each argument in \"args\": command: %q, args: [%s]", prog, strings.Join(args, ", "))
	}
	if urlN != nil {
		if u, ok := d.nonEmpty(urlN, `"url"`); ok && d.refs(urlN) {
			if d.httpURL(urlN, u, `"url"`) {
				s.URL = u
			}
		}
		s.Headers = map[string]string{}
	}
	if v := f["headers"]; v != nil && d.want(v, kMap, `"headers"`) {
		if s.Headers == nil {
			s.Headers = map[string]string{}
		}
		seen := map[string]member{}
		for _, hm := range v.members {
			if !headerName.MatchString(hm.key) {
				d.errKey(hm, RuleName, "%q is not an HTTP header name", hm.key)
				continue
			}
			low := strings.ToLower(hm.key)
			if prev, dup := seen[low]; dup {
				d.errKey(hm, RuleDuplicateKey, "header %q is also given as %q (line %d); header names are case-insensitive, so give it once", hm.key, prev.key, prev.line)
				continue
			}
			seen[low] = hm
			val, ok := d.str(hm.val, fmt.Sprintf("header %q", hm.key))
			if !ok {
				continue
			}
			d.refs(hm.val)
			if strings.ContainsAny(val, "\r\n\x00") {
				d.errN(hm.val, RuleValue, "header %q holds a line break or NUL, which HTTP does not allow", hm.key)
				continue
			}
			if sensitiveHeaders[low] {
				d.sensitive(hm.val, fmt.Sprintf("header %q", hm.key))
			}
			s.Headers[hm.key] = val
		}
	}
	if v := f["timeout"]; v != nil {
		if t, ok := d.duration(v, `"timeout"`); ok {
			s.Timeout = t
		}
	}
	if v := f["callTimeout"]; v != nil {
		if t, ok := d.duration(v, `"callTimeout"`); ok {
			s.CallTimeout = t
		}
	}
	s.ToolsCheck = ToolsCheckEveryCall
	if v := f["toolsCheck"]; v != nil {
		if a, ok := d.str(v, `"toolsCheck"`); ok {
			if slices.Contains(ToolsChecks, a) {
				s.ToolsCheck = a
			} else {
				d.errN(v, RuleValue, "\"toolsCheck\" is %q; it is one of %s%s", clip(a), quoteList(ToolsChecks), suggest.Phrase(a, ToolsChecks))
			}
		}
	}
	return s
}

// httpURL checks that u (secret references allowed) is an absolute http
// or https URL without user info, and that no query parameter carries a
// literal credential. Messages never quote the URL.
func (d *decoder) httpURL(n *node, u, label string) bool {
	blank := u
	if refs, _ := scanRefs(u); len(refs) > 0 {
		b := []byte(u)
		var out []byte
		prev := 0
		for _, r := range refs {
			out = append(out, b[prev:r.start]...)
			out = append(out, "SECRET"...)
			prev = r.end
		}
		blank = string(append(out, b[prev:]...))
	}
	p, err := url.Parse(blank)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		d.errN(n, RuleValue, "%s must be an absolute http:// or https:// URL", label)
		return false
	}
	if p.User != nil {
		if !d.flagged[n.ptr] {
			d.flagged[n.ptr] = true
			fix := credentialFix(n.ptr, n.text)
			if p, name := placeOf(n.ptr); p == placeRef {
				fix = headerFix(name, "Basic")
			}
			d.errN(n, RuleCredential, "%s has user info (user@ or user:password@); %s", label, fix)
		}
		return false
	}
	if name, ok := sensitiveQueryParam(blankRefs(u)); ok && !d.flagged[n.ptr] {
		d.flagged[n.ptr] = true
		fix := credentialFix(n.ptr, n.text)
		if p, sn := placeOf(n.ptr); p == placeRef {
			fix = fmt.Sprintf("the harness file never holds credentials: put the value in the environment or a dotenv file as %s and write %s=${secret:%s} in the URL", sn, name, sn)
		}
		d.errN(n, RuleCredential, "query parameter %q of %s holds literal text, and its name says it is a credential; %s", name, label, fix)
		return false
	}
	return true
}

func (d *decoder) connections(n *node) {
	if !d.want(n, kMap, `"connections"`) {
		return
	}
	for _, m := range n.members {
		if !slices.Contains(Providers, m.key) {
			d.unknownProvider(m)
			continue
		}
		if c := d.connection(m); c != nil {
			d.h.Connections[m.key] = c
		}
	}
}

func (d *decoder) unknownProvider(m member) {
	hint := ""
	for _, p := range Providers {
		if strings.EqualFold(p, m.key) {
			hint = fmt.Sprintf("; provider names are case-sensitive: did you mean %q?", p)
			break
		}
	}
	if hint == "" {
		hint = suggest.Phrase(m.key, Providers)
	}
	if hint == "" {
		hint = "; the providers are " + strings.Join(Providers, " ")
	}
	d.errKey(m, RuleUnknownKey, "unknown provider %q in \"connections\"%s", m.key, hint)
}

func (d *decoder) connection(m member) *Connection {
	n := m.val
	where := fmt.Sprintf("connection %q", m.key)
	if !d.want(n, kMap, where) {
		return nil
	}
	c := &Connection{Provider: m.key, Secrets: map[string]string{}, Scopes: []string{}, Pos: pos(n)}
	d.inFile["connection:"+m.key] = true
	allowed := connectionKeys
	f := make(map[string]*node)
	for _, mm := range n.members {
		switch {
		case slices.Contains(allowed, mm.key):
			f[mm.key] = mm.val
		default:
			d.unknownKey(mm, where, allowed)
		}
	}
	if v := f["authKind"]; v == nil {
		d.errN(n, RuleRequired, "%s needs \"authKind\" (%s)", where, quoteList(AuthKinds))
	} else if a, ok := d.str(v, `"authKind"`); ok {
		if slices.Contains(AuthKinds, a) {
			c.AuthKind = a
		} else {
			d.errN(v, RuleValue, "\"authKind\" is %q; it is one of %s%s", clip(a), quoteList(AuthKinds), suggest.Phrase(a, AuthKinds))
		}
	}
	if v := f["secrets"]; v == nil {
		d.errN(n, RuleRequired, "%s needs \"secrets\": the names of the secrets holding its credentials, such as {%s: %s_%s}", where,
			exampleRole(c.AuthKind), strings.ToUpper(m.key), strings.ToUpper(snake(exampleRole(c.AuthKind))))
	} else if d.want(v, kMap, `"secrets"`) {
		for _, sm := range v.members {
			if !slices.Contains(Roles, sm.key) {
				d.unknownKey(sm, fmt.Sprintf("the secrets of %s (the roles are %s)", where, quoteList(Roles)), Roles)
				continue
			}
			if d.flagged[sm.val.ptr] {
				continue
			}
			name, ok := d.str(sm.val, fmt.Sprintf("the secret name of role %q", sm.key))
			if !ok {
				continue
			}
			if !secretName.MatchString(name) {
				d.errN(sm.val, RuleName, "the secret of role %q must be a secret's name (^[A-Za-z_][A-Za-z0-9_]*$), %s", sm.key, roleFix(name, sm.val.ptr))
				continue
			}
			c.Secrets[sm.key] = name
			d.h.refs = append(d.h.refs, SecretRef{Name: name, Via: "connection", For: "connection:" + m.key, Pos: pos(sm.val)})
		}
	}
	if v := f["scopes"]; v != nil && d.want(v, kList, `"scopes"`) {
		c.ScopesPos = pos(v)
		seen := map[string]bool{}
		for _, e := range v.elems {
			s, ok := d.nonEmpty(e, "each scope")
			if !ok {
				continue
			}
			if seen[s] {
				d.warnN(e, RuleDuplicate, "scope %q is listed twice", clip(s))
				continue
			}
			seen[s] = true
			c.Scopes = append(c.Scopes, s)
		}
	}
	if v := f["baseURL"]; v != nil {
		if u, ok := d.nonEmpty(v, `"baseURL"`); ok && d.noRefs(v, `"baseURL"`) && d.httpURL(v, u, `"baseURL"`) {
			c.BaseURL = strings.TrimRight(u, "/")
		}
	}
	if v := f["tokenURL"]; v != nil {
		if u, ok := d.nonEmpty(v, `"tokenURL"`); ok && d.noRefs(v, `"tokenURL"`) && d.httpURL(v, u, `"tokenURL"`) {
			c.TokenURL = u
		}
	}
	if v := f["callTimeout"]; v != nil {
		if t, ok := d.duration(v, `"callTimeout"`); ok {
			c.CallTimeout = t
		}
	}
	if v := f["rateLimits"]; v != nil {
		c.RateLimits = d.rateLimits(v, where)
	}
	return c
}

func hasMember(n *node, key string) bool {
	for _, m := range n.members {
		if m.key == key {
			return true
		}
	}
	return false
}

// snake splits a camelCase role into words joined by "_" (apiKey ->
// api_Key), for the caller to upper-case into an example secret name.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (d *decoder) secrets(n *node) {
	if !d.want(n, kMap, `"secrets"`) {
		return
	}
	cfg := d.h.Secrets
	f := d.fields(n, `"secrets"`, secretsKeys)
	if v := f["env"]; v != nil && d.want(v, kBool, `"env"`) {
		cfg.Env = v.text == "true"
	}
	if v := f["prefix"]; v != nil {
		if p, ok := d.str(v, `"prefix"`); ok {
			if !envName.MatchString(p) {
				d.errN(v, RuleName, "\"prefix\" must start an environment variable name (^[A-Za-z_][A-Za-z0-9_]*$), such as \"OPB_\"")
			} else {
				cfg.Prefix = p
			}
		}
	}
	if v := f["dotenv"]; v != nil && d.want(v, kList, `"dotenv"`) {
		seen := map[string]bool{}
		for _, e := range v.elems {
			var df DotenvFile
			switch e.kind {
			case kString:
				p, ok := d.nonEmpty(e, "a dotenv path")
				if !ok || !d.noRefs(e, "a dotenv path") {
					continue
				}
				df.Path = p
			case kMap:
				ef := d.fields(e, "a dotenv entry", dotenvKeys)
				pn := ef["path"]
				if pn == nil {
					d.errN(e, RuleRequired, "a dotenv entry needs \"path\"")
					continue
				}
				p, ok := d.nonEmpty(pn, `"path"`)
				if !ok || !d.noRefs(pn, `"path"`) {
					continue
				}
				df.Path = p
				if o := ef["optional"]; o != nil && d.want(o, kBool, `"optional"`) {
					df.Optional = o.text == "true"
				}
			default:
				d.errN(e, RuleType, "each dotenv entry must be a path (a string) or a map {path, optional}, not %s", e.kind)
				continue
			}
			df.Resolved = d.h.ResolvePath(df.Path)
			if seen[df.Resolved] {
				d.warnN(e, RuleDuplicate, "dotenv file %q is listed twice", df.Path)
				continue
			}
			seen[df.Resolved] = true
			cfg.Dotenv = append(cfg.Dotenv, df)
		}
	}
	if v := f["declare"]; v != nil {
		d.declarations(v)
	}
	if !cfg.Env && len(cfg.Dotenv) == 0 {
		d.warnN(n, RuleValue, "no source of secrets: \"env\" is false and there is no dotenv file, so every secret lookup fails")
	}
}

func (d *decoder) agents(n *node) {
	if !d.want(n, kMap, `"agents"`) {
		return
	}
	for _, m := range n.members {
		if m.key == "" || strings.TrimSpace(m.key) != m.key {
			d.errKey(m, RuleName, "an agent name must be non-empty and without surrounding blanks")
			continue
		}
		where := fmt.Sprintf("agent %q", m.key)
		if !d.want(m.val, kMap, where) {
			continue
		}
		a := &Agent{Name: m.key, Settings: map[string]any{}, Pos: pos(m.val)}
		d.dest = "agent:" + m.key
		d.inFile[d.dest] = true
		for _, sm := range m.val.members {
			if sm.key == "driver" {
				if drv, ok := d.nonEmpty(sm.val, `"driver"`); ok {
					a.Driver = drv
				}
				continue
			}
			a.Settings[sm.key] = sm.val.value()
			d.agentRefs(sm.val)
			if sensitiveSetting.MatchString(sm.key) && sm.val.kind == kString {
				d.sensitive(sm.val, fmt.Sprintf("setting %q of %s", sm.key, where))
			}
			if sm.key == "apiKeySecret" && sm.val.kind == kString && !d.flagged[sm.val.ptr] {
				if secretName.MatchString(sm.val.text) {
					d.h.refs = append(d.h.refs, SecretRef{Name: sm.val.text, Via: "agent", For: d.dest, Pos: pos(sm.val)})
				} else {
					d.errN(sm.val, RuleName, "\"apiKeySecret\" must be a secret's name (^[A-Za-z_][A-Za-z0-9_]*$, such as OPENAI_API_KEY), never the key itself")
				}
			}
		}
		if !hasMember(m.val, "driver") {
			d.errN(m.val, RuleRequired, "%s needs \"driver\" (such as \"transcript\")", where)
		}
		d.dest = ""
		d.h.Agents[m.key] = a
	}
}

// agentRefs checks and records the secret references in an agent setting.
func (d *decoder) agentRefs(n *node) {
	switch n.kind {
	case kString:
		d.refs(n)
	case kMap:
		for _, m := range n.members {
			d.agentRefs(m.val)
		}
	case kList:
		for _, e := range n.elems {
			d.agentRefs(e)
		}
	}
}

func (d *decoder) store(n *node) {
	if !d.want(n, kMap, `"store"`) {
		return
	}
	f := d.fields(n, `"store"`, storeKeys)
	if f["sqlite"] != nil && f["postgres"] != nil {
		second := f["postgres"]
		for _, m := range n.members {
			if m.key == "postgres" || m.key == "sqlite" {
				second = m.val // the later of the two, in file order
			}
		}
		d.errN(second, RuleValue, "\"store\" has both \"sqlite\" and \"postgres\"; give one engine: sqlite (a file, the default) or postgres (a database URL)")
	} else if v := f["postgres"]; v != nil {
		d.postgres(v)
	}
	if v := f["sqlite"]; v != nil && f["postgres"] == nil {
		if p, ok := d.nonEmpty(v, `"sqlite"`); ok && d.noRefs(v, `"sqlite"`) {
			d.h.Store.SQLite = d.h.ResolvePath(p)
		}
	}
	if v := f["seed"]; v != nil {
		if p, ok := d.nonEmpty(v, `"seed"`); ok && d.noRefs(v, `"seed"`) {
			d.h.Store.Seed = d.h.ResolvePath(p)
		}
	}
	if v := f["vault"]; v != nil {
		d.vault(v)
	}
}

// postgres reads store.postgres: {url: URL}. The URL may hold secret
// references (expanded for the runtime's own connection: no destination,
// no binding); its literal parts must make a postgres:// or postgresql://
// URL without a literal password.
func (d *decoder) postgres(n *node) {
	if !d.want(n, kMap, `"postgres"`) {
		return
	}
	f := d.fields(n, `"postgres"`, postgresKeys)
	v := f["url"]
	if v == nil {
		d.errN(n, RuleRequired, "\"postgres\" needs \"url\": the database's postgres:// URL, written as a secret reference such as \"${secret:OPENPLAYBOOK_DATABASE_URL}\"")
		return
	}
	u, ok := d.nonEmpty(v, `"url"`)
	if !ok || !d.refs(v) {
		return
	}
	if d.flagged[v.ptr] {
		return // reported as a credential already
	}
	blank := blankRefs(u)
	if strings.TrimSpace(blank) != "" && !strings.HasPrefix(strings.TrimLeft(u, " "), "${") {
		if !PostgresURL(blank) {
			d.errN(v, RuleValue, "\"url\" must be a postgres:// or postgresql:// URL, or a secret reference holding one (\"${secret:OPENPLAYBOOK_DATABASE_URL}\")")
			return
		}
		if p, err := url.Parse(withRefsAs(u, "SECRET")); err == nil && p.User != nil {
			if pw, set := p.User.Password(); set && pw != "SECRET" {
				d.flagged[v.ptr] = true
				d.errN(v, RuleCredential, "\"url\" holds a literal password; the harness file never holds credentials: put the whole URL in the environment or a dotenv file as OPENPLAYBOOK_DATABASE_URL and write url: \"${secret:OPENPLAYBOOK_DATABASE_URL}\"")
				return
			}
		}
		if name, bad := sensitiveQueryParam(blank); bad {
			d.flagged[v.ptr] = true
			d.errN(v, RuleCredential, "query parameter %q of \"url\" holds literal text, and its name says it is a credential; put the whole URL in the environment or a dotenv file as OPENPLAYBOOK_DATABASE_URL and write url: \"${secret:OPENPLAYBOOK_DATABASE_URL}\"", name)
			return
		}
	}
	d.h.Store.Postgres = &Postgres{URL: u, Pos: pos(v)}
	d.h.Store.SQLite = ""
}

// withRefsAs returns s with each well-formed secret reference replaced by
// repl.
func withRefsAs(s, repl string) string {
	refs, _ := scanRefs(s)
	if len(refs) == 0 {
		return s
	}
	var out []byte
	prev := 0
	for _, r := range refs {
		out = append(out, s[prev:r.start]...)
		out = append(out, repl...)
		prev = r.end
	}
	return string(append(out, s[prev:]...))
}

func (d *decoder) runtime(n *node) {
	if !d.want(n, kMap, `"runtime"`) {
		return
	}
	f := d.fields(n, `"runtime"`, runtimeKeys)
	if v := f["approvalExpiry"]; v != nil {
		if t, ok := d.duration(v, `"approvalExpiry"`); ok {
			d.h.Runtime.ApprovalExpiry = t
		}
	}
	if v := f["maxToolCalls"]; v != nil && d.want(v, kNumber, `"maxToolCalls"`) {
		// JSON Schema's integer is any number with a zero fraction (50.0);
		// so is the reader's.
		f, err := strconv.ParseFloat(v.text, 64)
		if err != nil || f != math.Trunc(f) || f < 1 || f > math.MaxInt32 {
			d.errN(v, RuleValue, "\"maxToolCalls\" must be a whole number of at least 1")
		} else {
			d.h.Runtime.MaxToolCalls = int(f)
		}
	}
}

func (d *decoder) serve(n *node) {
	if !d.want(n, kMap, `"serve"`) {
		return
	}
	f := d.fields(n, `"serve"`, serveKeys)
	if v := f["operatorTokenSecret"]; v != nil {
		if name, ok := d.str(v, `"operatorTokenSecret"`); ok {
			if !envName.MatchString(name) {
				d.errN(v, RuleName, "\"operatorTokenSecret\" must be a secret's name (^[A-Za-z_][A-Za-z0-9_]*$, such as OPENPLAYBOOK_OPERATOR_TOKEN), never the token itself")
			} else {
				d.h.Serve.OperatorTokenSecret = name
			}
		}
	}
	if v := f["approvalWait"]; v != nil {
		if t, ok := d.duration(v, `"approvalWait"`); ok {
			d.h.Serve.ApprovalWait = t
		}
	}
	if v := f["allowedOrigins"]; v != nil && d.want(v, kList, `"allowedOrigins"`) {
		for _, item := range v.elems {
			o, ok := d.str(item, `an allowed origin`)
			if !ok {
				continue
			}
			if !originSyntax.MatchString(o) {
				d.errN(item, RuleValue, "an allowed origin is a scheme, a host and an optional port, with no path: such as \"https://console.example.com\" or \"http://localhost:3000\"")
				continue
			}
			d.h.Serve.AllowedOrigins = append(d.h.Serve.AllowedOrigins, o)
		}
	}
	if v := f["publicURL"]; v != nil {
		if u, ok := d.str(v, `"publicURL"`); ok {
			if !originSyntax.MatchString(u) {
				d.errN(v, RuleValue, "\"publicURL\" is the scheme and host (and optional port) clients reach the server at, with no path: such as \"https://playbooks.example.com\"")
			} else {
				d.h.Serve.PublicURL = u
			}
		}
	}
	if v := f["trustedProxies"]; v != nil && d.want(v, kList, `"trustedProxies"`) {
		for _, item := range v.elems {
			p, ok := d.str(item, `a trusted proxy`)
			if !ok {
				continue
			}
			if _, err := netip.ParsePrefix(p); err != nil {
				if _, err := netip.ParseAddr(p); err != nil {
					d.errN(item, RuleValue, "a trusted proxy is an IP address or a CIDR prefix: such as \"10.0.0.0/8\" or \"127.0.0.1\"")
					continue
				}
			}
			d.h.Serve.TrustedProxies = append(d.h.Serve.TrustedProxies, p)
		}
	}
	if v := f["oidc"]; v != nil {
		d.oidc(v)
	}
	if v := f["webhooks"]; v != nil {
		d.webhooks(v)
	}
}

// oidc reads serve.oidc (docs/identity.md).
func (d *decoder) oidc(n *node) {
	if !d.want(n, kMap, `"oidc"`) {
		return
	}
	o := &OIDC{Scopes: []string{"openid", "profile", "email"}, SubjectClaim: "sub", NameClaim: "name",
		EmailClaim: "email", GroupsClaim: "groups", OperatorToken: true, Pos: pos(n)}
	f := d.fields(n, `"oidc"`, oidcKeys)
	ok := true
	if v := f["issuer"]; v == nil {
		d.errN(n, RuleRequired, `"oidc" needs "issuer": the OpenID Connect issuer's URL, such as "https://accounts.example.com"`)
		ok = false
	} else if s, good := d.nonEmpty(v, `"issuer"`); good && d.noRefs(v, `"issuer"`) {
		if u, err := url.Parse(s); err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" ||
			!(u.Scheme == "https" || (u.Scheme == "http" && loopbackHost(u.Hostname()))) {
			d.errN(v, RuleValue, `"issuer" must be an https URL with no query or fragment (http only on a loopback host, such as "http://127.0.0.1:4444"), as the issuer's discovery document names it`)
			ok = false
		} else {
			o.Issuer = s
		}
	} else {
		ok = false
	}
	if v := f["clientID"]; v == nil {
		d.errN(n, RuleRequired, `"oidc" needs "clientID": the console's OAuth client id at the issuer`)
		ok = false
	} else if s, good := d.nonEmpty(v, `"clientID"`); good && d.noRefs(v, `"clientID"`) {
		o.ClientID = s
	} else {
		ok = false
	}
	if v := f["clientSecretSecret"]; v != nil {
		if s, good := d.str(v, `"clientSecretSecret"`); good {
			if !envName.MatchString(s) {
				d.errN(v, RuleName, `"clientSecretSecret" must be a secret's name (^[A-Za-z_][A-Za-z0-9_]*$, such as OIDC_CLIENT_SECRET), never the secret itself`)
			} else {
				o.ClientSecretSecret = s
			}
		}
	}
	if v := f["audience"]; v != nil {
		o.Audience = d.nameList(v, `"audience"`)
	}
	if v := f["scopes"]; v != nil {
		o.Scopes = d.nameList(v, `"scopes"`)
		if !slices.Contains(o.Scopes, "openid") {
			d.errN(v, RuleValue, `"scopes" must include "openid" (without it the issuer sends no ID token)`)
		}
	}
	if v := f["claims"]; v != nil && d.want(v, kMap, `"claims"`) {
		cf := d.fields(v, `"claims"`, claimKeys)
		for key, dst := range map[string]*string{"subject": &o.SubjectClaim, "name": &o.NameClaim, "email": &o.EmailClaim, "groups": &o.GroupsClaim} {
			if c := cf[key]; c != nil {
				if s, good := d.nonEmpty(c, strconv.Quote(key)+" claim"); good {
					*dst = s
				}
			}
		}
	}
	for key, dst := range map[string]*Principals{"operators": &o.Operators, "deciders": &o.Deciders} {
		if v := f[key]; v != nil {
			d.principals(v, key, dst)
		}
	}
	if v := f["selfApproval"]; v != nil && d.want(v, kBool, `"selfApproval"`) {
		o.SelfApproval = v.text == "true"
	}
	if v := f["operatorToken"]; v != nil && d.want(v, kBool, `"operatorToken"`) {
		o.OperatorToken = v.text == "true"
	}
	if v := f["agents"]; v != nil && d.want(v, kMap, `"agents"`) {
		o.AgentClaim = "client_id"
		if c := d.fields(v, `"agents"`, agentOAuthKeys)["claim"]; c != nil {
			if s, good := d.nonEmpty(c, `"agents"' "claim"`); good {
				o.AgentClaim = s
			}
		}
	}
	if len(o.Audience) == 0 {
		o.Audience = []string{o.ClientID}
	}
	if ok {
		d.h.Serve.OIDC = o
	}
}

// principals reads {subjects, groups} naming at least one person.
func (d *decoder) principals(v *node, key string, dst *Principals) bool {
	if !d.want(v, kMap, strconv.Quote(key)) {
		return false
	}
	pf := d.fields(v, strconv.Quote(key), principalKeys)
	if s := pf["subjects"]; s != nil {
		dst.Subjects = d.nameList(s, `"subjects"`)
	}
	if g := pf["groups"]; g != nil {
		dst.Groups = d.nameList(g, `"groups"`)
	}
	if dst.Empty() {
		d.errN(v, RuleValue, "%q names no one: list \"subjects\" or \"groups\", or remove it (absent, it does not restrict)", key)
		return false
	}
	return true
}

// nameList reads a list of non-empty strings.
func (d *decoder) nameList(n *node, label string) []string {
	if !d.want(n, kList, label) {
		return nil
	}
	var out []string
	for _, item := range n.elems {
		if s, ok := d.nonEmpty(item, "an item of "+label); ok {
			out = append(out, s)
		}
	}
	return out
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// originSyntax is an RFC 6454 origin as a browser sends it in Origin.
var originSyntax = regexp.MustCompile(`^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$`)

// policy reads the approval policy (docs/policy.md): its rules, each
// compiled (a CEL condition that does not compile is an error here).
func (d *decoder) policy(n *node) {
	if !d.want(n, kMap, `"policy"`) {
		return
	}
	f := d.fields(n, `"policy"`, policyKeys)
	v := f["rules"]
	if v == nil || !d.want(v, kList, `"rules"`) {
		return
	}
	var rules []policy.Rule
	names := map[string]bool{}
	ok := true
	for i, item := range v.elems {
		where := fmt.Sprintf("policy rule %d", i+1)
		if !d.want(item, kMap, where) {
			ok = false
			continue
		}
		rf := d.fields(item, where, ruleKeys)
		var r policy.Rule
		if nv := rf["name"]; nv == nil {
			d.errN(item, RuleRequired, "%s needs \"name\": what the audit log and messages call it", where)
			ok = false
		} else if s, good := d.nonEmpty(nv, where+"'s \"name\""); good {
			if names[s] {
				d.errN(nv, RuleValue, "policy rule name %q is given twice; each rule has a name of its own", s)
				ok = false
			}
			names[s] = true
			r.Name = s
			where = fmt.Sprintf("policy rule %q", s)
		} else {
			ok = false
		}
		if tv := rf["tools"]; tv != nil {
			r.Tools = d.nameList(tv, `"tools"`)
			for j, pat := range r.Tools {
				if _, err := path.Match(pat, ""); err != nil {
					d.errN(tv.elems[j], RuleValue, "%s: tool pattern %q is not a pattern (* ? [...]): %v", where, pat, err)
					ok = false
				}
			}
		}
		if rv := rf["riskClasses"]; rv != nil {
			r.RiskClasses = d.nameList(rv, `"riskClasses"`)
		}
		if sv := rf["steps"]; sv != nil {
			r.Steps = d.nameList(sv, `"steps"`)
		}
		if cv := rf["connectors"]; cv != nil {
			r.Connectors = d.nameList(cv, `"connectors"`)
		}
		if gv := rf["gates"]; gv != nil {
			r.Gates = d.nameList(gv, `"gates"`)
			if len(r.Tools)+len(r.RiskClasses)+len(r.Steps)+len(r.Connectors) > 0 {
				d.errN(gv, RuleValue, "%s: a rule about gates says who decides them; it has no \"tools\", \"riskClasses\", \"steps\" or \"connectors\" (write a rule of its own for calls)", where)
				ok = false
			}
		}
		if dv := rf["deciders"]; dv != nil {
			if !d.principals(dv, "deciders", &r.Deciders) {
				ok = false
			}
		}
		if av := rf["approvals"]; av != nil {
			if n, whole := wholeNumber(av, 1); !whole || n > policy.MaxApprovals {
				d.errN(av, RuleValue, "%s: \"approvals\" is how many distinct people approve: a whole number from 1 to %d", where, policy.MaxApprovals)
				ok = false
			} else {
				r.Approvals = n
			}
		}
		if sv := rf["selfApproval"]; sv != nil && d.want(sv, kBool, where+"'s \"selfApproval\"") {
			r.SelfApproval = sv.text == "true"
		}
		if wv := rf["when"]; wv != nil {
			if s, good := d.nonEmpty(wv, where+"'s \"when\""); good {
				if _, err := policy.Compile(s); err != nil {
					d.errN(wv, RuleValue, "%s: its condition is not a valid CEL expression of true or false: %v", where, strings.TrimSpace(err.Error()))
					ok = false
				}
				r.When = s
			} else {
				ok = false
			}
		}
		if ev := rf["effect"]; ev == nil && len(r.Gates) > 0 {
			r.Effect = policy.RequireApproval
		} else if ev == nil {
			d.errN(item, RuleRequired, "%s needs \"effect\": %q or %q", where, policy.RequireApproval, policy.Deny)
			ok = false
		} else if s, good := d.str(ev, where+"'s \"effect\""); good {
			if s != policy.RequireApproval && s != policy.Deny {
				d.errN(ev, RuleValue, "%s: effect %q is not %q or %q (a rule only tightens: there is no allow)", where, s, policy.RequireApproval, policy.Deny)
				ok = false
			}
			r.Effect = s
			if s == policy.Deny && (!r.Deciders.Empty() || r.Approvals > 1 || r.SelfApproval) {
				d.errN(ev, RuleValue, "%s: a deny rule refuses the call; \"deciders\", \"approvals\" and \"selfApproval\" are for %q", where, policy.RequireApproval)
				ok = false
			}
			if s == policy.Deny && len(r.Gates) > 0 {
				d.errN(ev, RuleValue, "%s: a rule about gates says who decides them; its effect is %q", where, policy.RequireApproval)
				ok = false
			}
		} else {
			ok = false
		}
		if rv := rf["reason"]; rv != nil {
			r.Reason, _ = d.str(rv, where+"'s \"reason\"")
		}
		rules = append(rules, r)
	}
	if !ok || len(rules) == 0 {
		return
	}
	p, err := policy.New(rules)
	if err != nil {
		d.errN(v, RuleValue, "%v", err)
		return
	}
	d.h.Policy = p
}
