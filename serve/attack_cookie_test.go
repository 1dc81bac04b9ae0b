package serve_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/serve"
)

// TestAttackShadowedSessionCookie: cookies are not isolated by port, so
// a page on another port of 127.0.0.1 can set a cookie of the console's
// name with a narrower Path, which the browser (here Go's cookie jar,
// which follows RFC 6265 as browsers do) sends first on the console's
// pages under that path. The operator is not locked out: every cookie of
// the name is read, before and after logging in again, on console pages
// and on the API.
func TestAttackShadowedSessionCookie(t *testing.T) {
	r := newRig(t, "")
	run, _, _ := startAgentRun(t, r)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		for _, p := range []string{"/runs", "/api/v1", "/runs/" + run} {
			http.SetCookie(w, &http.Cookie{Name: serve.SessionCookie, Value: "planted" + strings.ReplaceAll(p, "/", "_"), Path: p})
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(evil.Close)
	b := r.browser()
	req, _ := http.NewRequest(http.MethodGet, evil.URL+"/", nil)
	b.do(req) // the operator's browser visits a page on another port
	u, _ := url.Parse(r.ts.URL + "/runs/" + run)
	if n := len(b.c.Jar.Cookies(u)); n != 2 {
		t.Fatalf("the jar sends %d cookies to the run's page, want the 2 planted under its path", n)
	}
	for attempt := range 2 { // logging in again changes nothing before the fix
		b.login()
		if p := b.get("/runs/" + run); p.status != http.StatusOK || !strings.Contains(p.body, run) {
			t.Errorf("BROKEN: login %d: the run's console page answers %d with a planted cookie beside the session's", attempt+1, p.status)
		}
		if p := b.get("/api/v1/runs"); p.status != http.StatusOK {
			t.Errorf("BROKEN: login %d: the API answers %d with a planted cookie beside the session's: %.200s", attempt+1, p.status, p.body)
		}
	}
	// Logging out ends the session: no cookie of the name lets anyone in.
	if p := b.post("/logout", b.form()); p.status >= 400 {
		t.Fatalf("logout: %d %s", p.status, p.body)
	}
	if p := b.get("/api/v1/runs"); p.status != http.StatusUnauthorized {
		t.Errorf("after logout the API answers %d", p.status)
	}
}

// TestSessionCookieUnderTLS: under TLS the session cookie's name has the
// __Host- prefix (Secure, Path=/, no Domain), and only that name is read.
func TestSessionCookieUnderTLS(t *testing.T) {
	r := newRig(t, "")
	lh, err := launch.Load(r.dir + "/harness.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	srv, err := serve.New(serve.Options{Harness: lh, Store: r.st, BaseURL: ts.URL, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ts.Config.Handler = srv
	c := ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.PostForm(ts.URL+"/login", url.Values{"token": {operatorToken}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if strings.HasSuffix(ck.Name, serve.SessionCookie) {
			session = ck
		}
	}
	if session == nil || session.Name != serve.SecureSessionCookie || !session.Secure || session.Path != "/" || session.Domain != "" {
		t.Fatalf("BROKEN: the session cookie under TLS is %+v, want %s with Secure, Path=/ and no Domain", session, serve.SecureSessionCookie)
	}
	get := func(name string) int {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/v1/runs", nil)
		req.AddCookie(&http.Cookie{Name: name, Value: session.Value})
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(serve.SecureSessionCookie); code != http.StatusOK {
		t.Errorf("the __Host- cookie: %d", code)
	}
	if code := get(serve.SessionCookie); code != http.StatusUnauthorized {
		t.Errorf("BROKEN: under TLS the unprefixed cookie name is read too: %d", code)
	}
}
