// Package serve is `openplaybook serve`: one process that executes runs
// and serves, from the harness's store,
//
//   - the web console at / (package serve/console),
//   - the HTTP API at /api/v1/ (docs/api.md; OpenAPI 3.1 description at
//     /api/v1/openapi.json),
//   - MCP at /mcp/runs/{run} (streamable HTTP), where an external agent
//     (an MCP client) is the agent of the run's steps bound to driver
//     "mcp" (package driver/external).
//
// Every tool call of an external agent goes through the runtime's one
// decision path ([runtime.Caller]), exactly as a model driver's does.
// Operators authenticate with the bearer token named by
// serve.operatorTokenSecret (the console exchanges it once for a session
// cookie); agents with a per-run token the operator issues. See
// docs/serve.md.
package serve

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/openplaybook/openplaybook/obs"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/driver/external"
	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/notify"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/serve/console"
	"github.com/openplaybook/openplaybook/store"
)

// Options configures [New].
type Options struct {
	// Harness is the harness the server runs with. Required.
	Harness *launch.Harness
	// Store is the harness's open store. Required.
	Store store.Store
	// BaseURL is where clients reach the server ("http://127.0.0.1:7420"):
	// the MCP URLs the server hands out begin with it, and it is the
	// server's own origin for the Origin check. Required.
	BaseURL string
	// Version is reported to MCP clients.
	Version string
	// Log receives one line per problem the server meets; nil discards.
	Log io.Writer
	// SessionTTL is how long a console login lasts. Zero means 12h.
	SessionTTL time.Duration
	// AgentTokenTTL bounds an agent token's life; a token also ends with
	// its run. Zero means 7 days.
	AgentTokenTTL time.Duration
	// AgentsOnly serves agents only (`openplaybook mcp`, over stdio): no
	// operator token is needed, and the API and console refuse everyone.
	AgentsOnly bool
	// Notify, when set, is sent the server's notifications (a call's
	// approval asked, a gate waiting, a run failed or completed; see
	// package notify), read from the runs' audit logs, and run until
	// Close. Nil: the webhooks of serve.webhooks, if any, through the
	// store's outbox.
	Notify *notify.Notifier
	// PublicURL is where people reach the console, for the links in
	// notifications; "" means BaseURL.
	PublicURL string
}

// Server is the HTTP handler of `openplaybook serve`. Close it to stop
// executing runs; they stay resumable.
type Server struct {
	// obs is what Operated was given: its middleware is in front of the
	// server, so the headers it sets for the gateway can be believed.
	obs      *obs.Obs
	opt      Options
	st       store.Store
	x        *external.Exchange
	events   *Broker
	runner   *Runner
	operator string // the operator token
	origin   string // the server's own origin
	tls      bool
	redact   func(string) string

	mu sync.Mutex
	// logins keeps the console's logins when the store does (both engines
	// do: every replica over the store knows them); sessions otherwise.
	logins   store.ConsoleLogins
	sessions map[string]*consoleSession // by SHA-256 of the cookie value

	mux     *http.ServeMux
	gateway *gateway
	oidc    *oidcAuth        // nil without serve.oidc
	console *console.Console // the console mounted at /
	notify  *notifier        // nil without Options.Notify

	peerOnce sync.Once
	peer     http.RoundTripper // forwarded requests' transport (peerTransport)

	replicas *replicas // nil unless StartReplicas joined a shared store

	adoptMu    sync.Mutex
	adoptWaits map[string]*adoptionWait // runs whose adoption requests wait for (awaitAdoption)
}

// consoleSession is a logged-in console.
type consoleSession struct {
	csrfHash string // SHA-256 (hex) of the session's CSRF token
	expires  time.Time
	who      Identity
}

// ErrNoOperatorToken is returned by [New] when the operator token secret
// cannot be resolved.
var ErrNoOperatorToken = errors.New("the operator token secret is not set")

// ErrShortOperatorToken is returned by [New] when the operator token is
// shorter than 16 bytes.
var ErrShortOperatorToken = errors.New("the operator token is too short")

// New returns a server. It resolves the operator token (the secret that
// serve.operatorTokenSecret names; it must be at least 16 bytes).
func New(opt Options) (*Server, error) {
	if opt.BaseURL == "" && opt.AgentsOnly {
		opt.BaseURL = "http://127.0.0.1"
	}
	if opt.Harness == nil || opt.Store == nil || opt.BaseURL == "" {
		return nil, errors.New("serve: New needs a Harness, a Store and a BaseURL")
	}
	if opt.SessionTTL <= 0 {
		opt.SessionTTL = 12 * time.Hour
	}
	if opt.AgentTokenTTL <= 0 {
		opt.AgentTokenTTL = 7 * 24 * time.Hour
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	u, err := url.Parse(opt.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("serve: BaseURL %q is not an http or https URL", opt.BaseURL)
	}
	h := opt.Harness.H
	// One resolver for the server, which has looked up every secret the
	// harness names (and, as runs open, those their documents require):
	// its Redact removes all of them from what the server records or
	// shows (an error, a reason a person typed, a page).
	sec := h.SecretResolver()
	for _, name := range h.SecretNames() {
		_, _, _ = sec.Lookup(name)
	}
	name := h.Serve.OperatorTokenSecret
	var tok string
	var auth *oidcAuth
	if o := h.Serve.OIDC; o != nil && !opt.AgentsOnly {
		var secret string
		if o.ClientSecretSecret != "" {
			v, err := sec.Resolve(o.ClientSecretSecret)
			if err != nil {
				return nil, fmt.Errorf("serve: the OIDC client secret: %v (set %s, the secret serve.oidc.clientSecretSecret names; docs/identity.md)", err, o.ClientSecretSecret)
			}
			secret = v
		}
		auth = newOIDC(o, secret, strings.TrimSuffix(opt.BaseURL, "/"))
	}
	if opt.AgentsOnly || (auth != nil && !auth.cfg.OperatorToken) {
		tok = randomToken("unused_") // no one is given it
	} else {
		var err error
		tok, err = sec.Resolve(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %v (set %s, or name another secret in serve.operatorTokenSecret; docs/serve.md)", ErrNoOperatorToken, err, name)
		}
		if len(tok) < 16 {
			return nil, fmt.Errorf("%w: secret %s is set but only %d bytes; an operator token must be at least 16 (openssl rand -hex 32 makes one)", ErrShortOperatorToken, name, len(tok))
		}
	}
	s := &Server{
		opt: opt, st: opt.Store, x: external.New(), events: NewBroker(), operator: tok,
		origin: u.Scheme + "://" + u.Host, tls: u.Scheme == "https", redact: sec.Redact,
		sessions: map[string]*consoleSession{}, oidc: auth,
		logins: loginsOf(opt.Store),
	}
	s.runner = NewRunner(opt.Harness, opt.Store, s.x, s.events)
	s.runner.sec = sec
	s.gateway = newGateway(s)
	s.mux = http.NewServeMux()
	s.routes()
	n := opt.Notify
	if n == nil && len(h.Serve.Webhooks) > 0 && !opt.AgentsOnly {
		if n, err = webhookNotifier(h.Serve.Webhooks, sec, opt.Store, s.logf); err != nil {
			return nil, err
		}
	}
	if n != nil && !opt.AgentsOnly {
		public := opt.PublicURL
		if public == "" {
			public = opt.BaseURL
		}
		s.startNotify(n, public)
	}
	return s, nil
}

// Runner returns the server's runner.
func (s *Server) Runner() *Runner { return s.runner }

// Exchange returns where the server's external agents meet their steps.
func (s *Server) Exchange() *external.Exchange { return s.x }

// Events returns the server's event broker.
func (s *Server) Events() *Broker { return s.events }

// Store returns the server's store.
func (s *Server) Store() store.Store { return s.st }

// Close stops executing runs here (they stay resumable) and ends agent
// sessions.
func (s *Server) Close() {
	s.gateway.close()
	if s.replicas != nil {
		close(s.replicas.stop)
		<-s.replicas.done
		s.replicas.stopListen()
		s.replicas.listening.Wait()
	}
	s.runner.Close()
	if s.replicas != nil {
		if m := s.replicas.member(); m != nil {
			m.Leave()
		}
	}
	if s.notify != nil {
		s.notify.stop()
	}
}

// ServeHTTP checks the request's Host and Origin, then routes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if msg := s.checkOrigin(r); msg != "" {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			writeError(w, http.StatusForbidden, msg) // the API answers JSON
			return
		}
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	if s.forward(w, r) {
		return
	}
	if s.replicas != nil {
		w.Header().Set(ReplicaHeader, s.replicas.member().ID())
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" with a form POST, which the Origin check refuses.
	w.Header().Set("Referrer-Policy", "same-origin")
	s.mux.ServeHTTP(w, r)
}

// StartReplicas makes the server one of several replicas when its store
// is shared (PostgreSQL): it registers, claims the runs it executes,
// fences their writes, and adopts the runs of replicas that died (see
// docs/serve.md, "Running several replicas"). On a store that is not
// shared (SQLite) it does nothing and returns nil. Call it once, before
// [Server.ResumeWaiting].
func (s *Server) StartReplicas(ctx context.Context, o ReplicaOptions) error {
	return s.startReplicas(ctx, o)
}

// ResumeWaiting resumes, at start-up, the runs that wait for nothing but
// a resume, and the runs left running by a process that is gone (a
// server or CLI killed mid-run: no process holds their run lock); runs
// waiting for their agent resume when one connects. A resumed run's
// side-effecting calls that were in flight become outcome-unknown and
// wait for a person ([runtime.Session.Resume]); a step bound to driver
// "mcp" then waits for its agent again. A run another process executes
// (its lock is held) is left to it.
func (s *Server) ResumeWaiting(ctx context.Context) {
	runs, err := s.st.ListRuns(ctx, store.RunWaiting, store.RunRunning)
	if err != nil {
		return
	}
	for _, r := range runs {
		switch r.Status {
		case store.RunRunning:
			if !s.orphaned(r.ID) {
				continue
			}
		default:
			pend, err := runtime.Pendings(ctx, s.st, r.ID)
			if err != nil || len(pend) != 1 || pend[0].Kind != "resume" {
				continue
			}
		}
		if _, err := s.runner.Resume(ctx, r.ID); err != nil && !errors.Is(err, ErrExecuting) {
			s.events.Publish(r.ID, Event{Type: "progress", Text: "resume: " + s.runner.redact(err.Error())})
		}
	}
}

// orphaned reports whether no process executes the run: its run lock is
// free (the kernel released it when its process ended).
func (s *Server) orphaned(run string) bool {
	if s.runner.Executing(run) {
		return false
	}
	unlock, err := s.st.LockRun(run)
	if err != nil {
		return false
	}
	unlock()
	return true
}

// checkOrigin is the DNS rebinding protection: a request whose Host is
// not the server's (for a loopback server, a loopback name) or whose
// Origin is neither the server's own nor one of serve.allowedOrigins is
// refused.
func (s *Server) checkOrigin(r *http.Request) string {
	own, _ := url.Parse(s.origin)
	if isLoopbackHost(own.Hostname()) && !isLoopbackHost(hostOnly(r.Host)) {
		return fmt.Sprintf("forbidden: Host %q is not a loopback name; this server listens on loopback (DNS rebinding protection)", r.Host)
	}
	o := r.Header.Get("Origin")
	if o == "" || o == s.origin || slices.Contains(s.opt.Harness.H.Serve.AllowedOrigins, o) {
		return ""
	}
	// The same server reached under another loopback name.
	if ou, err := url.Parse(o); err == nil && isLoopbackHost(own.Hostname()) && isLoopbackHost(ou.Hostname()) && ou.Port() == own.Port() && ou.Scheme == own.Scheme {
		return ""
	}
	return fmt.Sprintf("forbidden: Origin %q is not this server's (%s) nor one of serve.allowedOrigins", o, s.origin)
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Operator authentication.

// SessionCookie is the name of the console's session cookie over plain
// HTTP; [SecureSessionCookie] is its name under TLS.
const SessionCookie = "openplaybook_session"

// SecureSessionCookie is the session cookie's name when the server's
// base URL is https: the "__Host-" prefix makes a browser accept it only
// with Secure, Path=/ and no Domain, so no other origin of the host can
// set one that it sends to the console (RFC 6265bis, section 4.1.3.2).
const SecureSessionCookie = "__Host-" + SessionCookie

// sessionCookie is the session cookie's name on this server.
func (s *Server) sessionCookie() string {
	if s.tls {
		return SecureSessionCookie
	}
	return SessionCookie
}

// operator says whether r is an operator's: a bearer operator token, or
// a console session cookie. viaCookie is set for the cookie, whose
// state-changing requests must carry the session's CSRF token.
//
// Every cookie of the session cookie's name is read, and one that is a
// live session is enough: cookies are not isolated by port (RFC 6265,
// section 8.5), so a page on another port of the host can set one of the
// same name with a narrower Path, which the browser then sends first; a
// server that read only the first would lock the operator out, even
// after logging in again.
//
// With serve.oidc set, a bearer token that is not the operator token is
// verified as a JWT of the issuer ([oidcAuth.verifyBearer]); any failure
// refuses. who is the request's identity (the operator token's is
// {Subject: "operator-token", Via: "operator-token"}).
func (s *Server) operatorAuth(r *http.Request) (ok, viaCookie bool, sess *consoleSession, who Identity) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, found := strings.CutPrefix(h, "Bearer ")
		if !found {
			return false, false, nil, Identity{}
		}
		if s.CheckOperatorToken(tok) {
			return true, false, nil, Identity{Subject: operatorTokenSubject, Via: "operator-token"}
		}
		if s.oidc != nil {
			who, err := s.oidc.verifyBearer(r.Context(), tok)
			if err != nil {
				s.logf("bearer token refused: %s", s.redact(err.Error()))
				return false, false, nil, Identity{}
			}
			return true, false, nil, who
		}
		return false, false, nil, Identity{}
	}
	for _, c := range r.CookiesNamed(s.sessionCookie()) {
		if sess := s.session(r.Context(), hashHex(c.Value)); sess != nil {
			return true, true, sess, sess.who
		}
	}
	return false, false, nil, Identity{}
}

// session returns the live console session whose cookie hashes to key,
// or nil: from the store when it keeps logins (a store that fails to
// answer is no session: the check fails closed), else from memory.
func (s *Server) session(ctx context.Context, key string) *consoleSession {
	now := time.Now()
	if s.logins != nil {
		l, err := s.logins.ConsoleLogin(ctx, key, now)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				s.logf("console login refused: %s", s.redact(err.Error()))
			}
			return nil
		}
		sess := &consoleSession{csrfHash: l.CSRFHash, expires: l.Expires}
		if len(l.Who) > 0 {
			if err := json.Unmarshal(l.Who, &sess.who); err != nil {
				s.logf("console login refused: its identity does not read: %v", err)
				return nil
			}
		}
		return sess
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[key]
	if sess != nil && now.After(sess.expires) {
		delete(s.sessions, key)
		return nil
	}
	return sess
}

// CheckOperatorToken reports whether tok is the operator token (never,
// when serve.oidc.operatorToken is false).
func (s *Server) CheckOperatorToken(tok string) bool {
	if s.oidc != nil && !s.oidc.cfg.OperatorToken {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(tok), []byte(s.operator)) == 1
}

// Login starts a console session of the operator token's holder: it
// returns the cookie to set and the session's CSRF token. The session is
// recorded in the store when the store keeps logins (valid on every
// replica over it); an error says it could not be.
func (s *Server) Login() (*http.Cookie, string, error) {
	who := Identity{}
	if s.oidc != nil {
		who = Identity{Subject: operatorTokenSubject, Via: "operator-token"}
	}
	return s.loginAs(who)
}

// loginAs starts a console session of who.
func (s *Server) loginAs(who Identity) (*http.Cookie, string, error) {
	val := randomToken("")
	csrf := randomToken("")
	now := time.Now()
	sess := &consoleSession{csrfHash: hashHex(csrf), expires: now.Add(s.opt.SessionTTL), who: who}
	if s.logins != nil {
		w, err := json.Marshal(who)
		if err != nil {
			return nil, "", err
		}
		l := store.ConsoleLogin{Hash: hashHex(val), CSRFHash: sess.csrfHash, Who: w, Created: now.UTC(), Expires: sess.expires.UTC()}
		if err := s.logins.CreateConsoleLogin(context.Background(), l); err != nil {
			return nil, "", err
		}
	} else {
		s.mu.Lock()
		s.sessions[hashHex(val)] = sess
		s.mu.Unlock()
	}
	return &http.Cookie{Name: s.sessionCookie(), Value: val, Path: "/", HttpOnly: true, Secure: s.tls,
		SameSite: http.SameSiteStrictMode, MaxAge: int(s.opt.SessionTTL / time.Second)}, csrf, nil
}

// Logout ends the console sessions of r (every session cookie it sent),
// if any, on every replica when the store keeps logins, and returns the
// cookie that clears it.
func (s *Server) Logout(r *http.Request) *http.Cookie {
	for _, c := range r.CookiesNamed(s.sessionCookie()) {
		key := hashHex(c.Value)
		if s.logins != nil {
			if err := s.logins.DeleteConsoleLogin(r.Context(), key); err != nil {
				s.logf("console logout: %s", s.redact(err.Error()))
			}
			continue
		}
		s.mu.Lock()
		delete(s.sessions, key)
		s.mu.Unlock()
	}
	return &http.Cookie{Name: s.sessionCookie(), Value: "", Path: "/", HttpOnly: true, Secure: s.tls, SameSite: http.SameSiteStrictMode, MaxAge: -1}
}

// CSRFValid reports whether tok is the CSRF token of sess.
func CSRFValid(sess *consoleSession, tok string) bool {
	return sess != nil && tok != "" && subtle.ConstantTimeCompare([]byte(hashHex(tok)), []byte(sess.csrfHash)) == 1
}

// Operator wraps h so that only operators reach it: a request without a
// valid operator token or session gets 401; a state-changing request
// (not GET or HEAD) authenticated by cookie needs the session's CSRF
// token in the X-CSRF-Token header or the csrf form field, else 403.
func (s *Server) Operator(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, viaCookie, sess, who := s.operatorAuth(r)
		if !ok {
			msg := "an operator token is needed: send Authorization: Bearer <token> (the secret serve.operatorTokenSecret names), or log in to the console"
			if s.oidc != nil {
				msg = "an operator's credential is needed: send Authorization: Bearer <JWT access token from " + s.oidc.cfg.Issuer + ">, or log in to the console"
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="openplaybook"`)
			if r.Header.Get("Authorization") != "" {
				msg = "the operator token sent is not this server's: send Authorization: Bearer <token> with the value of the secret serve.operatorTokenSecret names"
				if s.oidc != nil {
					msg = "the bearer token was refused: it is not the operator token, nor a JWT of " + s.oidc.cfg.Issuer + " that is signed by its keys, unexpired, for this server's audience and of an operator (serve.oidc)"
				}
				w.Header().Set("WWW-Authenticate", `Bearer realm="openplaybook", error="invalid_token"`)
			} else if len(r.CookiesNamed(s.sessionCookie())) > 0 {
				msg = "the console session has ended (it lasts 12 hours, or until you log out on any replica): log in again"
			}
			writeError(w, http.StatusUnauthorized, msg)
			return
		}
		if viaCookie && r.Method != http.MethodGet && r.Method != http.MethodHead {
			tok := r.Header.Get("X-CSRF-Token")
			if tok == "" {
				tok = r.PostFormValue("csrf")
			}
			if !CSRFValid(sess, tok) {
				writeError(w, http.StatusForbidden, "the request has no valid CSRF token; log in to the console again (its forms get the token at login), or send X-CSRF-Token")
				return
			}
		}
		if who.Via != "" {
			r = r.WithContext(WithIdentity(r.Context(), who))
		}
		h.ServeHTTP(w, r)
	})
}

// Agent tokens.

// IssuedToken is a new agent token, shown once.
type IssuedToken struct {
	// Token is the bearer token (shown once; the store keeps its hash).
	Token string `json:"token"`
	// ID identifies it for revocation ("tok_...").
	ID string `json:"id"`
	// MCPURL is the run's MCP endpoint.
	MCPURL string `json:"mcpURL"`
	// Expires is when it expires at the latest (RFC 3339); it also ends
	// with the run.
	Expires string `json:"expires"`
	// Agent is the agent name the token is for; absent, every step of the
	// run bound to driver mcp.
	Agent string `json:"agent,omitempty"`
}

// IssueAgentToken makes a bearer token for the external agent of a run
// that has not ended, records it (hashed) and audits it. With agent set
// (an agent name the document's steps use), the token serves only the
// steps of that agent: an agent holding it is offered nothing while
// another agent's step executes. "" serves every step bound to driver
// mcp.
func (s *Server) IssueAgentToken(ctx context.Context, runID, agent, by string) (IssuedToken, error) {
	by = s.byFrom(ctx, by)
	run, err := s.st.GetRun(ctx, runID)
	if err != nil {
		return IssuedToken{}, err
	}
	if run.Status.Ended() {
		return IssuedToken{}, fmt.Errorf("run %s has ended (%s); its agent needs no token", runID, run.Status)
	}
	if agent != "" {
		if err := runHasAgent(run, agent); err != nil {
			return IssuedToken{}, err
		}
	}
	tok := randomToken("opa_")
	expires := time.Now().Add(s.opt.AgentTokenTTL).UTC()
	rec, err := s.recordAgentToken(ctx, runID, agent, hashHex(tok), by, expires)
	if err != nil {
		return IssuedToken{}, err
	}
	return IssuedToken{Token: tok, ID: rec.ID, MCPURL: s.MCPURL(runID), Expires: expires.Format(time.RFC3339), Agent: agent}, nil
}

// recordAgentToken stores an agent token's hash with its audit record
// (agent.token-issued), in one transaction.
func (s *Server) recordAgentToken(ctx context.Context, runID, agent, hash, by string, expires time.Time) (store.AgentToken, error) {
	var rec store.AgentToken
	err := s.st.Tx(ctx, func(tx store.Tx) error {
		var err error
		rec, err = tx.CreateAgentToken(runID, agent, hash, by, expires)
		if err != nil {
			return err
		}
		return runtime.NoteTx(tx, runID, runtime.AgentTokenIssued{Token: rec.ID, Agent: agent, By: by, Expires: expires.Format(time.RFC3339)})
	})
	return rec, err
}

// RevokeAgentTokens revokes the run's agent tokens (id "" for all) and
// ends the sessions that used them.
func (s *Server) RevokeAgentTokens(ctx context.Context, runID, id, by string) (int, error) {
	by = s.byFrom(ctx, by)
	var ids []string
	err := s.st.Tx(ctx, func(tx store.Tx) error {
		toks, err := tx.RevokeAgentTokens(runID, id)
		if err != nil {
			return err
		}
		for _, t := range toks {
			ids = append(ids, t.ID)
			if err := runtime.NoteTx(tx, runID, runtime.AgentTokenRevoked{Token: t.ID, By: by}); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		s.gateway.revoked(runID, ids)
	}
	return len(ids), err
}

// MCPURL is the MCP endpoint of a run.
func (s *Server) MCPURL(runID string) string {
	return s.opt.BaseURL + "/mcp/runs/" + url.PathEscape(runID)
}

// runHasAgent checks that agent is one of the run's playbook's agents
// (an error wrapping [ErrNoSuchAgent] otherwise).
func runHasAgent(run store.Run, agent string) error {
	doc, _ := playbook.Read("run", run.Document, nil)
	var agents []string
	if doc != nil {
		for _, st := range doc.Steps {
			if a := playbook.Str(st.Agent); a != "" && !slices.Contains(agents, a) {
				agents = append(agents, a)
			}
		}
	}
	if !slices.Contains(agents, agent) {
		return fmt.Errorf("%w: run %s's playbook has no agent %q; its agents are %s", ErrNoSuchAgent, run.ID, agent, strings.Join(agents, ", "))
	}
	return nil
}

// ErrNoSuchAgent is the error of a token asked for an agent name the
// run's playbook does not use.
var ErrNoSuchAgent = errors.New("no such agent")

// ErrBadAgentToken is the error of an agent token that is unknown,
// revoked, expired, for another run, or whose run has ended.
var ErrBadAgentToken = errors.New("the agent token is unknown, revoked or expired, or not for this run")

// AgentToken checks a bearer agent token for run and returns its record.
func AgentToken(ctx context.Context, st store.Store, runID, tok string) (store.AgentToken, error) {
	if tok == "" {
		return store.AgentToken{}, ErrBadAgentToken
	}
	rec, err := st.AgentTokenByHash(ctx, hashHex(tok))
	if err != nil {
		if errors.Is(err, store.ErrNoToken) {
			return store.AgentToken{}, ErrBadAgentToken
		}
		return store.AgentToken{}, err
	}
	return rec, tokenUsable(ctx, st, rec, runID)
}

// tokenUsable says whether an agent token's record still lets its holder
// act in runID: not revoked, not expired, for that run, which has not
// ended.
func tokenUsable(ctx context.Context, st store.Store, rec store.AgentToken, runID string) error {
	if subtle.ConstantTimeCompare([]byte(rec.Run), []byte(runID)) != 1 || !rec.Revoked.IsZero() || time.Now().After(rec.Expires) {
		return ErrBadAgentToken
	}
	run, err := st.GetRun(ctx, runID)
	if err != nil || run.Status.Ended() {
		return ErrBadAgentToken
	}
	return nil
}

// stillUsable re-reads the agent token tokenID and says whether it may
// still act in runID (a session checks it again before a call it held
// runs: the token may have been revoked meanwhile).
func stillUsable(ctx context.Context, st store.Store, tokenID, runID string) error {
	if tokenID == "" {
		return ErrBadAgentToken
	}
	rec, err := st.AgentTokenByID(ctx, tokenID)
	if err != nil {
		return ErrBadAgentToken
	}
	return tokenUsable(ctx, st, rec, runID)
}

func randomToken(prefix string) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func hashHex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// loginsOf returns st's console logins, nil when it keeps none.
func loginsOf(st store.Store) store.ConsoleLogins {
	if l, ok := store.As[store.ConsoleLogins](st); ok {
		return l
	}
	return nil
}
