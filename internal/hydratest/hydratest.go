// Package hydratest runs Ory Hydra v2.3.0 (built by scripts/hydra.sh) on
// loopback ports for a test, with an in-memory database, as the OAuth 2.1
// and OpenID Connect server: it issues JWT access tokens and ID tokens
// signed with keys it publishes in its JWKS. The login and consent
// endpoints Hydra sends browsers to are answered headlessly by a handler
// of the test's own: it logs in whoever [Hydra.SetUser] names and grants
// what the client asked for, with the user's claims.
//
// Without the binary a test is skipped, and fails under CI (CI=true),
// where .ci/run builds it.
package hydratest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Version is the Hydra release the tests run.
const Version = "v2.3.0"

// User is a person the headless login app can log in.
type User struct {
	Subject string
	Name    string
	Email   string
	Groups  []string
}

// Hydra is a running Hydra.
type Hydra struct {
	// Issuer is the public URL ("http://127.0.0.1:PORT"), Admin the admin
	// API's.
	Issuer, Admin string

	t    *testing.T
	app  *httptest.Server
	mu   sync.Mutex
	user User
	// Logins counts the logins the app accepted.
	logins int
}

// Binary returns the path of the Hydra binary: $OPENPLAYBOOK_HYDRA, else
// $(go env GOPATH)/bin/hydra-v2.3.0 (scripts/hydra.sh). It skips the test
// when there is none, and fails it under CI.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("OPENPLAYBOOK_HYDRA"); p != "" {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		out, err := exec.Command("go", "env", "GOPATH").Output()
		if err == nil {
			gopath = strings.TrimSpace(string(out))
		}
	}
	p := filepath.Join(gopath, "bin", "hydra-"+Version)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Ory Hydra %s is not built (%s): scripts/hydra.sh builds it", Version, p)
		}
		t.Skipf("Ory Hydra %s is not built (%s): run scripts/hydra.sh", Version, p)
	}
	return p
}

// Start starts Hydra for t; it stops when t ends.
func Start(t *testing.T) *Hydra {
	t.Helper()
	bin := Binary(t)
	h := &Hydra{t: t}
	h.app = httptest.NewServer(http.HandlerFunc(h.serveApp))
	t.Cleanup(h.app.Close)
	pub, adm := freePort(t), freePort(t)
	h.Issuer = fmt.Sprintf("http://127.0.0.1:%d", pub)
	h.Admin = fmt.Sprintf("http://127.0.0.1:%d", adm)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`dsn: memory
log: {level: warn, leak_sensitive_values: false}
serve:
  public: {host: 127.0.0.1, port: %d}
  admin: {host: 127.0.0.1, port: %d}
urls:
  self: {issuer: %s, public: %s}
  login: %s/login
  consent: %s/consent
  error: %s/error
secrets:
  system: [%s]
strategies:
  access_token: jwt
oauth2:
  allowed_top_level_claims: [name, email, groups]
  pkce: {enforced_for_public_clients: true}
sqa: {opt_out: true}
`, pub, adm, h.Issuer, h.Issuer, h.app.URL, h.app.URL, h.app.URL, randomHex(32))
	cfgPath := filepath.Join(dir, "hydra.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "all", "--dev", "--sqa-opt-out", "-c", cfgPath)
	cmd.Env = append(os.Environ(), "SQA_OPT_OUT=true", "DSN=memory")
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting hydra: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("hydra's log:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	// Ready when both listeners answer: the admin API's health and the
	// public discovery document.
	ready := func(u string) bool {
		res, err := http.Get(u)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode == 200
	}
	for {
		if ready(h.Admin+"/health/ready") && ready(h.Issuer+"/.well-known/openid-configuration") {
			break
		}
		select {
		case <-done:
			t.Fatalf("hydra exited:\n%s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("hydra is not ready after 60s:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The access tokens' key set is made now, with a 2048-bit key made
	// here, not by the first token request (where Hydra makes a 4096-bit
	// one, slow enough on a loaded machine to outlast a request).
	h.AddSigningKey(NewKey(t), "hydratest-"+randomHex(4))
	return h
}

// SetUser makes u the person the login app logs in next.
func (h *Hydra) SetUser(u User) {
	h.mu.Lock()
	h.user = u
	h.mu.Unlock()
}

// Logins returns how many logins the app accepted.
func (h *Hydra) Logins() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.logins
}

// Client is an OAuth client registered at Hydra (its admin API's JSON).
type Client struct {
	ID            string   `json:"client_id"`
	Secret        string   `json:"client_secret,omitempty"`
	RedirectURIs  []string `json:"redirect_uris,omitempty"`
	GrantTypes    []string `json:"grant_types,omitempty"`
	ResponseTypes []string `json:"response_types,omitempty"`
	Scope         string   `json:"scope,omitempty"`
	Audience      []string `json:"audience,omitempty"`
	AuthMethod    string   `json:"token_endpoint_auth_method,omitempty"`
}

// CreateClient registers c.
func (h *Hydra) CreateClient(c Client) {
	h.t.Helper()
	if len(c.GrantTypes) == 0 {
		c.GrantTypes = []string{"authorization_code", "refresh_token"}
	}
	if len(c.ResponseTypes) == 0 {
		c.ResponseTypes = []string{"code"}
	}
	h.admin("POST", "/admin/clients", c, nil, http.StatusCreated)
}

// AddSigningKey adds key (RSA, with kid) to the key set Hydra signs JWT
// access tokens with, so its public half is in Hydra's JWKS: a test can
// then sign tokens the issuer's keys verify (expired, of another
// issuer...) to check each claim is checked on its own.
func (h *Hydra) AddSigningKey(key *rsa.PrivateKey, kid string) {
	h.t.Helper()
	jwk := jose.JSONWebKey{Key: key, KeyID: kid, Algorithm: "RS256", Use: "sig"}
	h.admin("PUT", "/admin/keys/hydra.jwt.access-token/"+kid, jwk, nil, http.StatusOK)
}

// SignJWT signs claims with key (kid in the header) as alg RS256.
func SignJWT(t testing.TB, key crypto.Signer, kid string, claims map[string]any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(claims)
	obj, err := sig.Sign(body)
	if err != nil {
		t.Fatal(err)
	}
	s, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// NewKey returns a new 2048-bit RSA key.
func NewKey(t testing.TB) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Tokens are what Hydra's token endpoint answered.
type Tokens struct {
	AccessToken  string `json:"access_token"`
	IDToken      string `json:"id_token"`
	RefreshToken string `json:"refresh_token"`
}

// CodeFlow logs the current user in with client c (a public client whose
// first redirect URI is never reached: the code is read off the
// redirect) and exchanges the code with PKCE; audience is asked for the
// access token. It returns the tokens and the code (already used).
func (h *Hydra) CodeFlow(c Client, audience string) (Tokens, string) {
	h.t.Helper()
	verifier := randomHex(32)
	challenge := s256(verifier)
	q := url.Values{"client_id": {c.ID}, "response_type": {"code"}, "scope": {c.Scope}, "redirect_uri": {c.RedirectURIs[0]},
		"state": {randomHex(16)}, "nonce": {randomHex(16)}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	if audience != "" {
		q.Set("audience", audience)
	}
	code, err := h.Follow(h.Issuer+"/oauth2/auth?"+q.Encode(), c.RedirectURIs[0], nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if code.Query().Get("code") == "" {
		h.t.Fatalf("the code flow ended without a code: %s", code)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code.Query().Get("code")}, "redirect_uri": {c.RedirectURIs[0]},
		"client_id": {c.ID}, "code_verifier": {verifier}}
	tok, status := h.Token(form)
	if status != 200 {
		h.t.Fatalf("exchanging the code: %d", status)
	}
	return tok, code.Query().Get("code")
}

// Follow follows the redirects from u, one request at a time, with the
// cookies of jar (a new jar when nil), until one is to a URL beginning
// with stop, which it returns without requesting it.
func (h *Hydra) Follow(u, stop string, jar http.CookieJar) (*url.URL, error) {
	if jar == nil {
		jar, _ = cookiejar.New(nil)
	}
	cl := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for range 20 {
		res, err := cl.Get(u)
		if err != nil {
			return nil, err
		}
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		res.Body.Close()
		if res.StatusCode/100 != 3 {
			return nil, fmt.Errorf("%s answered %d, not a redirect: %s", u, res.StatusCode, b)
		}
		loc, err := res.Request.URL.Parse(res.Header.Get("Location"))
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(loc.String(), stop) {
			return loc, nil
		}
		u = loc.String()
	}
	return nil, fmt.Errorf("more than 20 redirects from %s", u)
}

// Token posts form to the token endpoint and returns the answer and its
// status.
func (h *Hydra) Token(form url.Values) (Tokens, int) {
	h.t.Helper()
	res, err := http.PostForm(h.Issuer+"/oauth2/token", form)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	var tok Tokens
	b, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(b, &tok)
	return tok, res.StatusCode
}

// serveApp is the headless login and consent app.
func (h *Hydra) serveApp(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/login":
		ch := r.URL.Query().Get("login_challenge")
		h.mu.Lock()
		u := h.user
		h.mu.Unlock()
		if u.Subject == "" {
			http.Error(w, "hydratest: no user set (SetUser)", http.StatusForbidden)
			return
		}
		var out struct {
			RedirectTo string `json:"redirect_to"`
		}
		if !h.adminTry("PUT", "/admin/oauth2/auth/requests/login/accept?login_challenge="+url.QueryEscape(ch),
			map[string]any{"subject": u.Subject, "remember": false}, &out, w) {
			return
		}
		h.mu.Lock()
		h.logins++
		h.mu.Unlock()
		http.Redirect(w, r, out.RedirectTo, http.StatusFound)
	case "/consent":
		ch := r.URL.Query().Get("consent_challenge")
		var req struct {
			Subject   string   `json:"subject"`
			Scope     []string `json:"requested_scope"`
			Audience  []string `json:"requested_access_token_audience"`
			RequestID string   `json:"challenge"`
		}
		if !h.adminTry("GET", "/admin/oauth2/auth/requests/consent?consent_challenge="+url.QueryEscape(ch), nil, &req, w) {
			return
		}
		h.mu.Lock()
		u := h.user
		h.mu.Unlock()
		claims := map[string]any{}
		if u.Subject == req.Subject {
			claims = map[string]any{"name": u.Name, "email": u.Email, "groups": u.Groups}
		}
		var out struct {
			RedirectTo string `json:"redirect_to"`
		}
		if !h.adminTry("PUT", "/admin/oauth2/auth/requests/consent/accept?consent_challenge="+url.QueryEscape(ch), map[string]any{
			"grant_scope": req.Scope, "grant_access_token_audience": req.Audience, "remember": false,
			"session": map[string]any{"id_token": claims, "access_token": claims},
		}, &out, w) {
			return
		}
		http.Redirect(w, r, out.RedirectTo, http.StatusFound)
	default:
		http.Error(w, "hydratest: "+r.URL.String(), http.StatusNotFound)
	}
}

func (h *Hydra) adminTry(method, path string, in, out any, w http.ResponseWriter) bool {
	status, body, err := h.adminCall(method, path, in, out)
	if err != nil || status/100 != 2 {
		http.Error(w, fmt.Sprintf("hydratest: %s %s: %d %v %s", method, path, status, err, body), http.StatusBadGateway)
		return false
	}
	return true
}

func (h *Hydra) admin(method, path string, in, out any, want int) {
	h.t.Helper()
	status, body, err := h.adminCall(method, path, in, out)
	if err != nil || status != want {
		h.t.Fatalf("hydra admin %s %s: %d (want %d) %v %s", method, path, status, want, err, body)
	}
}

func (h *Hydra) adminCall(method, path string, in, out any) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.Admin+path, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil && res.StatusCode/100 == 2 {
		if err := json.Unmarshal(b, out); err != nil {
			return res.StatusCode, b, err
		}
	}
	return res.StatusCode, b, nil
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 1<<20 {
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
