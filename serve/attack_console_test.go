package serve_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestAttackLoginOpenRedirect: a hostile page links the operator to the
// console's login form with a next= of its choosing; after the operator
// logs in, the console must send the browser to a page of the console,
// never to another site. The check must hold for the URL the browser
// ends up following, after net/http's Redirect cleans the path and a
// browser reads "\" as "/".
func TestAttackLoginOpenRedirect(t *testing.T) {
	r := newRig(t, "")
	for _, next := range []string{
		"//evil.example/",
		`/\evil.example/`,
		"/x/../\\evil.example/",
		"/./\\evil.example",
		"/x/..//evil.example/",
		"/%2F%2Fevil.example",
		"https://evil.example/",
		"/\t/evil.example",
	} {
		b := r.browser()
		p := b.post("/login", url.Values{"token": {operatorToken}, "next": {next}})
		loc := signedInNext(p.body) // the login answer's script goes there
		// How a browser resolves the Location against the console's URL.
		base, _ := url.Parse(r.ts.URL + "/login")
		u, err := base.Parse(strings.ReplaceAll(loc, `\`, "/"))
		if p.status != http.StatusOK {
			t.Errorf("next %q: status %d", next, p.status)
			continue
		}
		if err != nil || u.Host != base.Host {
			t.Errorf("BROKEN: logging in with next=%q redirects to %q, which a browser follows to %v (another site: an open redirect after login)", next, loc, u)
		}
	}
}
