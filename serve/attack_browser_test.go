package serve_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/openplaybook/openplaybook/serve"
	"github.com/openplaybook/openplaybook/store"
)

// TestAttackCookieToAnotherLoopbackPort: cookies are not isolated by port
// (RFC 6265 section 8.5), and a page on another port of 127.0.0.1 is the
// same site as the console, so SameSite=Strict does not keep the console's
// session cookie from it. A process listening on another loopback port
// (the network attacker on loopback) that gets the operator's browser to
// one of its pages (here: a link from a page on another site) receives
// the cookie with the page's own same-site request, and replays it from
// outside the browser (no Origin header): it reads a console page for the
// CSRF token and approves a gate. The console session must be usable only
// by the console's own pages.
func TestAttackCookieToAnotherLoopbackPort(t *testing.T) {
	r := newRig(t, "")
	ctx := context.Background()
	run, _, a := startAgentRun(t, r)
	if _, isErr := a.call(t, serve.FinishTool, map[string]any{"output": "looked up"}); isErr {
		t.Fatal("finish failed")
	}
	r.waitStatus(run, "waiting", "gate")

	stolen := make(chan string, 4)
	var evil *httptest.Server
	evil = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/start": // reached as "localhost": another site than 127.0.0.1
			u, _ := url.Parse(evil.URL)
			fmt.Fprintf(w, `<!DOCTYPE html><a id="go" href="http://127.0.0.1:%s/">a link</a>`, u.Port())
		case "/":
			fmt.Fprint(w, `<!DOCTYPE html><p id="ok">hello</p><img src="/pixel.gif">`)
		case "/pixel.gif":
			if c, err := req.Cookie("openplaybook_session"); err == nil {
				stolen <- c.Value
			}
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(evil.Close)
	bctx := newBrowser(t)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(c, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	do("log in",
		chromedp.Navigate(r.ts.URL+"/login"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), operatorToken),
		chromedp.Click(chromedp.CSS(`form.login button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("table")),
	)
	// The operator, later, on some other site, follows a link.
	start := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1) + "/start"
	do("the other site", chromedp.Navigate(start), chromedp.WaitVisible(chromedp.ID("go")), chromedp.Click(chromedp.ID("go")), chromedp.WaitVisible(chromedp.ID("ok")))
	var cookie string
	select {
	case cookie = <-stolen:
	case <-time.After(5 * time.Second):
		t.Log("the other loopback port received no session cookie")
		return
	}

	// Outside the browser: the cookie is the operator's session.
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodGet, r.ts.URL+"/runs/"+run, nil)
	req.AddCookie(&http.Cookie{Name: "openplaybook_session", Value: cookie})
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the stolen cookie did not give the run's page: %d", resp.StatusCode)
	}
	// Whatever the page holds that looks like a token is tried.
	tok := ""
	if m := csrfMeta.FindStringSubmatch(string(body)); m != nil {
		tok = m[1]
	} else if m := regexp.MustCompile(`name="csrf" value="([^"]*)"`).FindStringSubmatch(string(body)); m != nil {
		tok = m[1]
	}
	form := url.Values{"csrf": {tok}, "id": {"review"}, "decision": {"approve"}, "reason": {"stolen session"}}
	req, _ = http.NewRequest(http.MethodPost, r.ts.URL+"/runs/"+run+"/decide", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "openplaybook_session", Value: cookie})
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	gates, err := r.st.Gates(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gates {
		if g.Step == "review" && g.Status != store.GateWaiting {
			t.Errorf("BROKEN: a server on another loopback port got the console's session cookie from the operator's browser and, replaying it, approved gate %q (status %s; decide answered %d)", g.Step, g.Status, resp.StatusCode)
		}
	}
}
