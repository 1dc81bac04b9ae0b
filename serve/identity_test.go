package serve_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/openplaybook/openplaybook/internal/hydratest"
)

// identityRig is a server whose operators log in at a real Ory Hydra.
type identityRig struct {
	*rig
	hy      *hydratest.Hydra
	console hydratest.Client // the console's client
	cli     hydratest.Client // a public client people get API tokens with
}

// The people of the tests: alice and bob are in finance (the deciders),
// carol is an operator who may not decide, mallory is no operator.
var (
	alice   = hydratest.User{Subject: "alice", Name: "Alice Adams", Email: "alice@example.com", Groups: []string{"ops", "finance"}}
	bob     = hydratest.User{Subject: "bob", Name: "Bob Brown", Email: "bob@example.com", Groups: []string{"ops", "finance"}}
	carol   = hydratest.User{Subject: "carol", Name: "Carol Cole", Email: "carol@example.com", Groups: []string{"ops"}}
	mallory = hydratest.User{Subject: "mallory", Name: "Mallory", Email: "m@example.com", Groups: []string{"guests"}}
)

const apiAudience = "openplaybook-api"

func newIdentityRig(t *testing.T, extra string) *identityRig {
	t.Helper()
	hy := hydratest.Start(t)
	t.Setenv("OIDC_CLIENT_SECRET", "console-secret-for-tests-0123456789")
	r := newRig(t, `  oidc:
    issuer: `+hy.Issuer+`
    clientID: console
    clientSecretSecret: OIDC_CLIENT_SECRET
    audience: [`+apiAudience+`]
    operators: {groups: [ops]}
    deciders: {groups: [finance]}
`+extra)
	ir := &identityRig{rig: r, hy: hy,
		console: hydratest.Client{ID: "console", Secret: "console-secret-for-tests-0123456789", Scope: "openid profile email",
			RedirectURIs: []string{r.ts.URL + "/auth/callback"}, AuthMethod: "client_secret_basic"},
		cli: hydratest.Client{ID: "cli", AuthMethod: "none", Scope: "openid profile email", RedirectURIs: []string{"http://127.0.0.1:9/cb"},
			Audience: []string{apiAudience, "another-api"}},
	}
	hy.CreateClient(ir.console)
	hy.CreateClient(ir.cli)
	return ir
}

// token returns a Hydra-issued JWT access token of u for audience.
func (ir *identityRig) token(u hydratest.User, audience string) string {
	ir.hy.SetUser(u)
	tok, _ := ir.hy.CodeFlow(ir.cli, audience)
	if tok.AccessToken == "" {
		ir.t.Fatal("no access token")
	}
	return tok.AccessToken
}

// ssoBrowser is a cookie jar and client that does not follow redirects.
type ssoBrowser struct {
	jar *cookiejar.Jar
	cl  *http.Client
}

func newSSOBrowser() *ssoBrowser {
	jar, _ := cookiejar.New(nil)
	return &ssoBrowser{jar: jar, cl: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *ssoBrowser) get(t *testing.T, u string) (*http.Response, string) {
	t.Helper()
	res, err := b.cl.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(body)
}

// startLogin opens /auth/login?next=next in b and follows the issuer's
// login and consent as u, up to the callback, which it returns unvisited.
func (ir *identityRig) startLogin(b *ssoBrowser, u hydratest.User, next string) *url.URL {
	ir.t.Helper()
	res, body := b.get(ir.t, ir.ts.URL+"/auth/login?next="+url.QueryEscape(next))
	if res.StatusCode != http.StatusSeeOther {
		ir.t.Fatalf("/auth/login answered %d: %s", res.StatusCode, body)
	}
	loc := res.Header.Get("Location")
	if !strings.HasPrefix(loc, ir.hy.Issuer+"/oauth2/auth?") {
		ir.t.Fatalf("/auth/login sent the browser to %s", loc)
	}
	au, _ := url.Parse(loc)
	if q := au.Query(); q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" {
		ir.t.Fatalf("the authorization request lacks PKCE, nonce or state: %s", loc)
	}
	ir.hy.SetUser(u)
	cb, err := ir.hy.Follow(loc, ir.ts.URL+"/auth/callback", b.jar)
	if err != nil {
		ir.t.Fatal(err)
	}
	return cb
}

// login logs u in in a new browser and returns the session cookie and the
// CSRF token the signed-in page hands the console's script.
func (ir *identityRig) login(u hydratest.User) (*http.Cookie, string) {
	ir.t.Helper()
	b := newSSOBrowser()
	cb := ir.startLogin(b, u, "/runs")
	res, body := b.get(ir.t, cb.String())
	if res.StatusCode != 200 || !strings.Contains(body, `id="openplaybook-login"`) {
		ir.t.Fatalf("the callback answered %d: %s", res.StatusCode, body)
	}
	csrf := between(body, `data-csrf="`, `"`)
	for _, c := range res.Cookies() {
		if c.Name == "openplaybook_session" && c.Value != "" {
			return c, csrf
		}
	}
	ir.t.Fatalf("the callback set no session cookie")
	return nil, ""
}

func between(s, a, b string) string {
	_, rest, ok := strings.Cut(s, a)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, b)
	return v
}

// startGateRun starts testdata/gate.json as who (an API client) and
// waits for its gate.
func (ir *identityRig) startGateRun(c *apiClient) string {
	ir.t.Helper()
	res := c.do("POST", "/api/v1/runs", createBody(readTestdata(ir.t, "gate.json"), `{"customerId": "cus_ada"}`))
	want(ir.t, "create", res, 201)
	run := decode[runStarted](ir.t, res).Run
	ir.waitStatus(run, "waiting", "gate")
	return run
}

type auditRec struct {
	Kind string
	Data map[string]any
}

func (ir *identityRig) audit(c *apiClient, run string) []auditRec {
	ir.t.Helper()
	res := c.do("GET", "/api/v1/runs/"+run+"/audit?verify=true", nil)
	want(ir.t, "audit", res, 200, `"verified":true`)
	return decode[struct{ Records []auditRec }](ir.t, res).Records
}

func kinds(recs []auditRec, kind string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r.Kind == kind {
			out = append(out, r.Data)
		}
	}
	return out
}

// TestOIDCDecisionsNameVerifiedPeople: with serve.oidc, a run started with
// alice's Hydra JWT records her as its starter; she may not approve its
// gate (self-approval), nor may carol (not a decider), the operator
// token, or a "by" bob types; bob, logged in to the console through
// Hydra, approves it, and the audit log names him with his claims,
// whatever the form said.
func TestOIDCDecisionsNameVerifiedPeople(t *testing.T) {
	ir := newIdentityRig(t, "")
	aliceAPI := ir.api(ir.token(alice, apiAudience))
	run := ir.startGateRun(aliceAPI)
	gate := "/api/v1/runs/" + run + "/decisions/review"
	decision := map[string]any{"approve": true, "reason": "fine", "by": "bob"}

	want(t, "alice approves her own run", aliceAPI.do("POST", gate, decision), 403, "self-approval")
	want(t, "carol is not a decider", ir.api(ir.token(carol, apiAudience)).do("POST", gate, decision), 403, "not one of serve.oidc.deciders")
	want(t, "the operator token decides", ir.api(operatorToken).do("POST", gate, decision), 403, "operator token does not")
	want(t, "mallory is not an operator", ir.api(ir.token(mallory, apiAudience)).do("GET", "/api/v1/runs", nil), 401)
	if p, _ := ir.srv.Pending(context.Background(), run); len(p) != 1 || p[0].Kind != "gate" {
		t.Fatalf("after refused decisions the run waits for %+v", p)
	}

	// Bob logs in to the console through Hydra and approves, typing
	// someone else's name.
	cookie, csrf := ir.login(bob)
	if csrf == "" {
		t.Fatal("the signed-in page handed no CSRF token")
	}
	cs := &apiClient{t: t, base: ir.ts.URL, cookie: cookie, csrf: csrf, spec: loadSpec(t)}
	// The console's decision form asks no name: the server records bob.
	req, _ := http.NewRequest("GET", ir.ts.URL+"/runs/"+run, nil)
	req.AddCookie(cookie)
	page, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != 200 || !strings.Contains(string(html), `action="/runs/`+run+`/decide"`) || strings.Contains(string(html), `name="by"`) {
		t.Fatalf("the run page with bob's session (%d) has no decision form, or one asking a name:\n%s", page.StatusCode, html)
	}
	want(t, "bob approves", cs.do("POST", gate, map[string]any{"approve": true, "reason": "checked", "by": "alice"}), 200, `"kind":"gate"`)
	ir.waitStatus(run, "waiting", "agent")

	recs := ir.audit(aliceAPI, run)
	requested := kinds(recs, "run.requested")
	if len(requested) != 1 || requested[0]["by"] != "alice" || requested[0]["byEmail"] != "alice@example.com" || requested[0]["via"] != "oidc" {
		t.Fatalf("run.requested records %v", requested)
	}
	ok := kinds(recs, "gate.approved")
	if len(ok) != 1 || ok[0]["by"] != "bob" || ok[0]["byName"] != "Bob Brown" || ok[0]["byEmail"] != "bob@example.com" {
		t.Fatalf("gate.approved records %v", ok)
	}
	if n := len(kinds(recs, "gate.rejected")); n != 0 {
		t.Fatalf("%d gate.rejected records", n)
	}
	if ir.hy.Logins() < 4 {
		t.Fatalf("hydra logged %d people in", ir.hy.Logins())
	}
}

// TestOIDCBearerTokensRefused: the API refuses every bearer token that is
// not a valid JWT of the issuer for its audience: another audience, a
// key not in the issuer's JWKS, alg none, HMAC over the public key,
// expired, another issuer, no subject. A token signed with a key in the
// issuer's JWKS and valid claims is accepted, so each refusal is of its
// one defect.
func TestOIDCBearerTokensRefused(t *testing.T) {
	ir := newIdentityRig(t, "")
	list := func(tok string) apiResp { return ir.api(tok).do("GET", "/api/v1/runs", nil) }
	want(t, "alice's token", list(ir.token(alice, apiAudience)), 200)
	want(t, "a token for another audience", list(ir.token(alice, "another-api")), 401, "refused")
	idt := func() string {
		ir.hy.SetUser(alice)
		tok, _ := ir.hy.CodeFlow(ir.cli, "")
		return tok.IDToken
	}()
	want(t, "an ID token (audience: the cli client)", list(idt), 401)

	key := hydratest.NewKey(t)
	ir.hy.AddSigningKey(key, "test-key")
	now := time.Now()
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{"iss": ir.hy.Issuer, "sub": "alice", "aud": []string{apiAudience}, "groups": []string{"ops"},
			"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	want(t, "signed with a key in the JWKS", list(hydratest.SignJWT(t, key, "test-key", claims(nil))), 200)
	want(t, "expired", list(hydratest.SignJWT(t, key, "test-key", claims(func(c map[string]any) {
		c["iat"], c["exp"] = now.Add(-2*time.Hour).Unix(), now.Add(-time.Hour).Unix()
	}))), 401)
	want(t, "another issuer", list(hydratest.SignJWT(t, key, "test-key", claims(func(c map[string]any) { c["iss"] = "https://evil.example" }))), 401)
	want(t, "no subject", list(hydratest.SignJWT(t, key, "test-key", claims(func(c map[string]any) { delete(c, "sub") }))), 401)
	want(t, "the operator token's subject", list(hydratest.SignJWT(t, key, "test-key", claims(func(c map[string]any) { c["sub"] = "operator-token" }))), 401)
	want(t, "not an operator", list(hydratest.SignJWT(t, key, "test-key", claims(func(c map[string]any) { c["groups"] = []string{"guests"} }))), 401)
	forged := hydratest.NewKey(t)
	want(t, "a key not in the JWKS, its kid", list(hydratest.SignJWT(t, forged, "test-key", claims(nil))), 401)
	want(t, "a key not in the JWKS", list(hydratest.SignJWT(t, forged, "forged", claims(nil))), 401)
	valid := hydratest.SignJWT(t, key, "test-key", claims(nil))
	parts := strings.Split(valid, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT","kid":"test-key"}`))
	want(t, "alg none", list(none+"."+parts[1]+"."), 401)
	want(t, "alg none, the signature kept", list(none+"."+parts[1]+"."+parts[2]), 401)
	hs := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT","kid":"test-key"}`))
	want(t, "HS256", list(hs+"."+parts[1]+"."+parts[2]), 401)
	want(t, "a tampered payload", list(parts[0]+"."+base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"`+ir.hy.Issuer+`","sub":"bob","aud":["`+apiAudience+`"],"groups":["finance","ops"],"exp":9999999999}`))+"."+parts[2]), 401)
	want(t, "not a JWT", list("hello"), 401)
}

// TestOIDCLoginAttacks: the console's login refuses a replayed callback
// (a code and state used once), a callback in a browser that did not
// start the login (login CSRF), a state the server never issued, and
// sends no one to another origin whatever next says.
func TestOIDCLoginAttacks(t *testing.T) {
	ir := newIdentityRig(t, "")
	b := newSSOBrowser()
	cb := ir.startLogin(b, bob, "//evil.example/x")
	res, body := b.get(t, cb.String())
	if res.StatusCode != 200 || between(body, `data-next="`, `"`) != "/" {
		t.Fatalf("login with next=//evil.example: %d, next %q", res.StatusCode, between(body, `data-next="`, `"`))
	}
	// The same callback again, in the same browser (a replayed code).
	res, _ = b.get(t, cb.String())
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a replayed callback answered %d", res.StatusCode)
	}

	// Login CSRF: mallory starts a login as herself and sends the
	// callback URL to bob's browser, which did not start it.
	mb := newSSOBrowser()
	cb = ir.startLogin(mb, carol, "/")
	victim := newSSOBrowser()
	res, body = victim.get(t, cb.String())
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not started in this browser") {
		t.Fatalf("a callback in another browser answered %d: %s", res.StatusCode, body)
	}
	for _, c := range res.Cookies() {
		if c.Name == "openplaybook_session" && c.Value != "" {
			t.Fatal("a callback in another browser set a session")
		}
	}
	// Its state is spent: mallory's own browser cannot use it either.
	if res, _ = mb.get(t, cb.String()); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a state tried in another browser then used answered %d", res.StatusCode)
	}
	// A state the server never issued, with a code Hydra did issue.
	cb = ir.startLogin(b, bob, "/")
	q := cb.Query()
	q.Set("state", "made-up")
	cb.RawQuery = q.Encode()
	if res, _ = b.get(t, cb.String()); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a made-up state answered %d", res.StatusCode)
	}
	// The issuer's error.
	if res, _ = b.get(t, ir.ts.URL+"/auth/callback?error=access_denied"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an error callback answered %d", res.StatusCode)
	}
}

// TestOIDCOperatorTokenOff: with serve.oidc.operatorToken false, the
// operator token is refused by the API and the console's login form,
// and people's tokens still work.
func TestOIDCOperatorTokenOff(t *testing.T) {
	ir := newIdentityRig(t, "    operatorToken: false\n    selfApproval: true\n")
	want(t, "operator token", ir.api(operatorToken).do("GET", "/api/v1/runs", nil), 401)
	res, err := http.PostForm(ir.ts.URL+"/login", url.Values{"token": {operatorToken}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("console login with the operator token: %d", res.StatusCode)
	}
	// selfApproval: true lets alice approve the gate of her own run.
	a := ir.api(ir.token(alice, apiAudience))
	run := ir.startGateRun(a)
	want(t, "alice approves her own run", a.do("POST", "/api/v1/runs/"+run+"/decisions/review", map[string]any{"approve": false, "reason": "no"}), 200)
	rej := kinds(ir.audit(a, run), "gate.rejected")
	if len(rej) != 1 || rej[0]["by"] != "alice" {
		t.Fatalf("gate.rejected %v", rej)
	}
}

// TestOIDCConsoleLoginInChromium: in Chromium, an operator opens a run's
// page, is sent to the login form, chooses single sign-on, logs in at
// Hydra (whose login and consent the test's app answers) and is back on
// the run's page, whose decision form asks no name; approving the gate
// there records the verified person, not anything typed.
func TestOIDCConsoleLoginInChromium(t *testing.T) {
	ir := newIdentityRig(t, "")
	run := ir.startGateRun(ir.api(ir.token(alice, apiAudience)))
	bctx := newBrowser(t) // after the rig: its cleanup runs first
	problems := pageProblems(t, bctx)
	ir.hy.SetUser(bob)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(c, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	do("log in with single sign-on",
		chromedp.Navigate(ir.ts.URL+"/runs/"+run),
		chromedp.WaitVisible(chromedp.ID("sso")),
		chromedp.Click(chromedp.ID("sso")),
		chromedp.WaitVisible(chromedp.CSS(".pending.kind-gate form.decide")),
	)
	do("approve the gate",
		chromedp.SendKeys(chromedp.CSS(`.pending.kind-gate input[name="reason"]`), "read it"),
		chromedp.Click(chromedp.CSS(`.pending.kind-gate button[value="approve"]`)),
	)
	ir.waitStatus(run, "waiting", "agent")
	ok := kinds(ir.audit(ir.api(ir.token(carol, apiAudience)), run), "gate.approved")
	if len(ok) != 1 || ok[0]["by"] != "bob" || ok[0]["byEmail"] != "bob@example.com" || ok[0]["reason"] != "read it" {
		t.Fatalf("gate.approved %v", ok)
	}
	if p := problems(); len(p) > 0 {
		t.Fatalf("the pages had problems: %v", p)
	}
}
