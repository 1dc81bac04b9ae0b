package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/runtime"
)

// Identity is who an operator's request is from.
//
// With serve.oidc set, it is a person the issuer verified: Subject is the
// subject claim (serve.oidc.claims.subject, default "sub"), Name, Email
// and Groups the claims that harness section names. Via says how the
// request proved it: "oidc" (a console login or a bearer JWT the issuer
// signed) or "operator-token" (the bootstrap credential; Subject is then
// "operator-token" and it has no groups).
type Identity struct {
	Subject string   `json:"subject"`
	Name    string   `json:"name,omitempty"`
	Email   string   `json:"email,omitempty"`
	Groups  []string `json:"groups,omitempty"`
	Via     string   `json:"via"`
}

// operatorTokenSubject is the subject of a request made with the
// operator token when serve.oidc is set.
const operatorTokenSubject = "operator-token"

type identityKey struct{}

// WithIdentity returns ctx carrying who.
func WithIdentity(ctx context.Context, who Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, who)
}

// IdentityFrom returns the identity [Server.Operator] put in ctx.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	who, ok := ctx.Value(identityKey{}).(Identity)
	return who, ok
}

// ErrNotDecider is the error of a decision by someone serve.oidc does not
// let decide: outside serve.oidc.deciders, the operator token, a request
// with no verified identity, or the person who started the run
// (self-approval).
// It is [runtime.ErrNotDecider]: the runtime checks the harness policy's
// deciders, distinct approvers and self-approval.
var ErrNotDecider = runtime.ErrNotDecider

// oidcAuth is the server's OpenID Connect relying party: the console's
// login (authorization code with PKCE) and the API's bearer JWTs.
type oidcAuth struct {
	cfg          *harness.OIDC
	clientSecret string
	redirectURL  string

	mu       sync.Mutex
	provider *oidc.Provider // discovered on first use
	pending  map[string]*oidcLogin
}

// oidcLogin is a login under way: what its callback must match.
type oidcLogin struct {
	binding  string // hash of the login cookie's value
	nonce    string
	verifier string // PKCE code verifier
	next     string
	expires  time.Time
}

// loginCookie binds a login to the browser that started it (login CSRF:
// a callback with someone else's code and state is refused).
const loginCookie = "openplaybook_login"

// loginTTL bounds how long a person has to log in at the issuer.
const loginTTL = 10 * time.Minute

// maxPendingLogins bounds the logins under way; past it the oldest go.
const maxPendingLogins = 1024

func newOIDC(cfg *harness.OIDC, clientSecret, baseURL string) *oidcAuth {
	return &oidcAuth{cfg: cfg, clientSecret: clientSecret, redirectURL: baseURL + "/auth/callback", pending: map[string]*oidcLogin{}}
}

// discover returns the issuer's provider, fetching its discovery document
// the first time (again after a failure: the issuer may have been down).
func (o *oidcAuth) discover(ctx context.Context) (*oidc.Provider, error) {
	o.mu.Lock()
	p := o.provider
	o.mu.Unlock()
	if p != nil {
		return p, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(ctx, o.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("the OpenID Connect issuer %s (serve.oidc.issuer) could not be discovered: %v", o.cfg.Issuer, err)
	}
	o.mu.Lock()
	o.provider = p
	o.mu.Unlock()
	return p, nil
}

func (o *oidcAuth) oauth2Config(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: o.cfg.ClientID, ClientSecret: o.clientSecret, Endpoint: p.Endpoint(),
		RedirectURL: o.redirectURL, Scopes: o.cfg.Scopes}
}

// verifyBearer verifies an API bearer token: a JWT the issuer signed
// (its keys from the issuer's JWKS; RS256, ES256 and the other
// asymmetric algorithms go-oidc supports, never "none" or HMAC), not
// expired, whose "aud" holds one of serve.oidc.audience, of a person
// serve.oidc.operators admits. Any failure refuses.
func (o *oidcAuth) verifyBearer(ctx context.Context, raw string) (Identity, error) {
	p, err := o.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	v := p.Verifier(&oidc.Config{SkipClientIDCheck: true})
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		return Identity{}, err
	}
	if !slices.ContainsFunc(tok.Audience, func(a string) bool { return slices.Contains(o.cfg.Audience, a) }) {
		return Identity{}, fmt.Errorf("the token's audience %q holds none of serve.oidc.audience (%s)", tok.Audience, strings.Join(o.cfg.Audience, ", "))
	}
	return o.identity(tok)
}

// identity reads a verified token's claims into an Identity and checks
// serve.oidc.operators.
func (o *oidcAuth) identity(tok *oidc.IDToken) (Identity, error) {
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return Identity{}, err
	}
	who := Identity{Via: "oidc"}
	who.Subject, _ = claims[o.cfg.SubjectClaim].(string)
	if who.Subject == "" {
		return Identity{}, fmt.Errorf("the token has no %q claim (serve.oidc.claims.subject) naming a person", o.cfg.SubjectClaim)
	}
	if who.Subject == operatorTokenSubject {
		return Identity{}, fmt.Errorf("the token's subject %q is reserved for the operator token", who.Subject)
	}
	who.Name, _ = claims[o.cfg.NameClaim].(string)
	who.Email, _ = claims[o.cfg.EmailClaim].(string)
	switch g := claims[o.cfg.GroupsClaim].(type) {
	case []any:
		for _, x := range g {
			if s, ok := x.(string); ok {
				who.Groups = append(who.Groups, s)
			}
		}
	case string:
		who.Groups = []string{g}
	}
	if !o.cfg.Operators.Empty() && !o.cfg.Operators.Has(who.Subject, who.Groups) {
		return Identity{}, fmt.Errorf("%s is not one of serve.oidc.operators", who.Subject)
	}
	return who, nil
}

// start begins a login: it records what the callback must match and
// returns the issuer's authorization URL and the login cookie's value.
func (o *oidcAuth) start(ctx context.Context, next string) (authURL, cookie string, err error) {
	p, err := o.discover(ctx)
	if err != nil {
		return "", "", err
	}
	state, nonce, verifier, cookie := randomToken(""), randomToken(""), oauth2.GenerateVerifier(), randomToken("")
	now := time.Now()
	o.mu.Lock()
	for k, l := range o.pending {
		if now.After(l.expires) {
			delete(o.pending, k)
		}
	}
	for len(o.pending) >= maxPendingLogins {
		var oldest string
		for k, l := range o.pending {
			if oldest == "" || l.expires.Before(o.pending[oldest].expires) {
				oldest = k
			}
		}
		delete(o.pending, oldest)
	}
	o.pending[hashHex(state)] = &oidcLogin{binding: hashHex(cookie), nonce: nonce, verifier: verifier, next: next, expires: now.Add(loginTTL)}
	o.mu.Unlock()
	authURL = o.oauth2Config(p).AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce))
	return authURL, cookie, nil
}

// finish completes a login: the state must be one this server issued and
// not yet used, from the browser that started it (the login cookie);
// the code is exchanged with the PKCE verifier, and the ID token must be
// signed by the issuer for this client, carry the login's nonce and be
// of a person serve.oidc.operators admits. A state is used once,
// whatever the outcome.
func (o *oidcAuth) finish(ctx context.Context, r *http.Request) (Identity, string, error) {
	q := r.URL.Query()
	state := q.Get("state")
	o.mu.Lock()
	l := o.pending[hashHex(state)]
	delete(o.pending, hashHex(state))
	o.mu.Unlock()
	if state == "" || l == nil || time.Now().After(l.expires) {
		return Identity{}, "", errors.New("this login is unknown, already used or expired: start it again")
	}
	bound := false
	for _, c := range r.CookiesNamed(loginCookie) {
		if hashHex(c.Value) == l.binding {
			bound = true
		}
	}
	if !bound {
		return Identity{}, "", errors.New("this login was not started in this browser: start it again")
	}
	if e := q.Get("error"); e != "" {
		return Identity{}, "", fmt.Errorf("the issuer refused the login: %s %s", e, q.Get("error_description"))
	}
	code := q.Get("code")
	if code == "" {
		return Identity{}, "", errors.New("the issuer's answer has no code")
	}
	p, err := o.discover(ctx)
	if err != nil {
		return Identity{}, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tok, err := o.oauth2Config(p).Exchange(ctx, code, oauth2.VerifierOption(l.verifier))
	if err != nil {
		return Identity{}, "", fmt.Errorf("the issuer did not exchange the code: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, "", errors.New("the issuer's token response has no id_token")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: o.cfg.ClientID}).Verify(ctx, raw)
	if err != nil {
		return Identity{}, "", fmt.Errorf("the ID token is not valid: %v", err)
	}
	if idt.Nonce != l.nonce {
		return Identity{}, "", errors.New("the ID token's nonce is not this login's")
	}
	who, err := o.identity(idt)
	return who, l.next, err
}

// authLogin starts a console login at the issuer.
func (s *Server) authLogin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	next := localPath(r.URL.Query().Get("next"))
	u, cookie, err := s.oidc.start(r.Context(), next)
	if err != nil {
		s.logf("oidc: %v", err)
		http.Error(w, "single sign-on is not available now: "+s.redact(err.Error()), http.StatusBadGateway)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: cookie, Path: "/auth/callback", HttpOnly: true, Secure: s.tls,
		SameSite: http.SameSiteLaxMode, MaxAge: int(loginTTL / time.Second)})
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// authCallback finishes a console login and starts a session of the
// person the issuer verified.
func (s *Server) authCallback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/auth/callback", HttpOnly: true, Secure: s.tls, SameSite: http.SameSiteLaxMode, MaxAge: -1})
	who, next, err := s.oidc.finish(r.Context(), r)
	if err != nil {
		s.logf("oidc login refused: %v", err)
		s.console.ErrorPage(w, r, http.StatusUnauthorized, "The login was refused: "+s.redact(err.Error()))
		return
	}
	cookie, csrf, err := s.loginAs(who)
	if err != nil {
		s.logf("oidc login not recorded: %v", err)
		s.console.ErrorPage(w, r, http.StatusInternalServerError, "The login could not be recorded: "+s.redact(err.Error()))
		return
	}
	http.SetCookie(w, cookie)
	s.console.SignedIn(w, r, csrf, next)
}

// localPath returns p when it is a path on this server ("/runs/x"), else
// "/": never another origin ("//evil", "/\\evil", "https://...").
func localPath(p string) string {
	if p == "" || p[0] != '/' || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\r\n\t") {
		return "/"
	}
	if u, err := url.Parse(p); err != nil || u.Scheme != "" || u.Host != "" {
		return "/"
	}
	return p
}

// byFrom is who the request in ctx is recorded as: with serve.oidc set,
// its verified subject, whatever the request said; otherwise by as given.
func (s *Server) byFrom(ctx context.Context, by string) string {
	if s.oidc == nil {
		return by
	}
	if who, ok := IdentityFrom(ctx); ok {
		return who.Subject
	}
	return by
}

// mayDecide checks that the identity in ctx may decide run's gates and
// approvals: with serve.oidc set, a person the issuer verified (not the
// operator token) and one of serve.oidc.deciders when that is set. It
// returns the verdict with By, ByName, ByEmail, Groups and Verified from
// that identity, for [runtime.Decide] to check the rest (self-approval,
// the policy's deciders and N of M).
// Without serve.oidc, v is returned as it is.
func (s *Server) mayDecide(ctx context.Context, runID string, v runtime.Verdict) (runtime.Verdict, error) {
	if s.oidc == nil {
		return v, nil
	}
	who, ok := IdentityFrom(ctx)
	if !ok || who.Via != "oidc" {
		return v, fmt.Errorf("%w: with serve.oidc set, only a person who logged in (or sends a JWT from %s) decides; the operator token does not", ErrNotDecider, s.oidc.cfg.Issuer)
	}
	cfg := s.oidc.cfg
	if !cfg.Deciders.Empty() && !cfg.Deciders.Has(who.Subject, who.Groups) {
		return v, fmt.Errorf("%w: %s is not one of serve.oidc.deciders", ErrNotDecider, who.Subject)
	}
	v.By, v.ByName, v.ByEmail = who.Subject, who.Name, who.Email
	v.Verified, v.Groups, v.SelfApproval = true, who.Groups, cfg.SelfApproval
	return v, nil
}

// requested is the run.requested record of a run the identity in ctx
// starts, or nil without serve.oidc or an identity.
func (s *Server) requested(ctx context.Context) runtime.Event {
	if s.oidc == nil {
		return nil
	}
	who, ok := IdentityFrom(ctx)
	if !ok {
		return nil
	}
	return runtime.RunRequested{By: who.Subject, ByName: who.Name, ByEmail: who.Email, Via: who.Via}
}
