package serve_test

import (
	"bytes"
	"context"
	"html"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/store"
)

// consoleSecret is the harness's Stripe key in the console tests: no page
// may show it, wherever it was put.
const consoleSecret = "sk_test_consoleSecret7f3a9c0e51b2d846"

// browser is an HTTP client with a cookie jar that does not follow
// redirects, as a browser of the console.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func (r *rig) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: r.t, base: r.ts.URL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{resp.StatusCode, resp.Header, string(body)}
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	return b.do(req)
}

func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

// form is a form with the session's CSRF token and the given fields.
func (b *browser) form(kv ...string) url.Values {
	v := url.Values{"csrf": {b.csrf}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

// signedInCSRF finds the CSRF token the login answer hands to the
// console's script.
var signedInCSRF = regexp.MustCompile(`id="openplaybook-login" data-csrf="([^"]+)"`)

var signedInNextRe = regexp.MustCompile(`data-next="([^"]*)"`)

// signedInNext is where the login answer sends the browser on.
func signedInNext(body string) string {
	m := signedInNextRe.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// login logs in with the operator token and keeps the CSRF token the
// login answer hands over (pages never hold it).
func (b *browser) login() {
	b.t.Helper()
	p := b.post("/login", url.Values{"token": {operatorToken}, "next": {"/"}})
	m := signedInCSRF.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil {
		b.t.Fatalf("login: %d\n%s", p.status, p.body)
	}
	b.csrf = m[1]
	if p = b.get("/"); p.status != http.StatusOK {
		b.t.Fatalf("the runs page after login: %d\n%s", p.status, p.body)
	}
}

// newConsoleRig is a rig whose harness also has the Stripe connection,
// at stripeURL, with consoleSecret as its key.
func newConsoleRig(t *testing.T, stripeURL string) *rig {
	t.Setenv("STRIPE_API_KEY", consoleSecret)
	return newRig(t, "connections:\n  stripe:\n    authKind: api_token\n    secrets: {apiKey: STRIPE_API_KEY}\n    baseURL: "+stripeURL+"\n")
}

// TestConsoleApprovals runs the tests of call approvals in the console
// over one stripe-mock, each behind its own recorder.
func TestConsoleApprovals(t *testing.T) {
	stripe := stripemock.Start(t)
	t.Run("ArgumentsEscaped", func(t *testing.T) { testConsoleShowsArgumentsEscaped(t, stripemock.Proxy(t, stripe)) })
	t.Run("CSRF", func(t *testing.T) { testConsoleCSRF(t, stripemock.Proxy(t, stripe)) })
}

// checkHeaders checks the security headers of a console response.
func checkHeaders(t *testing.T, what string, p page) {
	t.Helper()
	csp := p.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: Content-Security-Policy %q lacks %q", what, csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("%s: Content-Security-Policy %q allows inline code", what, csp)
	}
	if p.header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("%s: X-Frame-Options %q", what, p.header.Get("X-Frame-Options"))
	}
	if p.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("%s: X-Content-Type-Options %q", what, p.header.Get("X-Content-Type-Options"))
	}
}

func TestConsoleLogin(t *testing.T) {
	r := newRig(t, "")
	b := r.browser()

	// No session: every page sends the browser to the login form.
	for _, path := range []string{"/", "/approvals", "/playbooks", "/runs/run_0000000000000000", "/runs/run_0000000000000000/audit"} {
		p := b.get(path)
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/login?next="+url.QueryEscape(path) {
			t.Errorf("GET %s without a session: %d %q", path, p.status, p.header.Get("Location"))
		}
		checkHeaders(t, path, p)
	}
	if p := b.get("/events"); p.status != http.StatusUnauthorized {
		t.Errorf("GET /events without a session: %d", p.status)
	}
	// A bearer token that is wrong is no session either.
	req, _ := http.NewRequest(http.MethodGet, r.ts.URL+"/approvals", nil)
	req.Header.Set("Authorization", "Bearer not-the-operator-token-at-all")
	if p := b.do(req); p.status != http.StatusSeeOther {
		t.Errorf("GET /approvals with a wrong bearer token: %d", p.status)
	}

	p := b.get("/login?next=/approvals")
	if p.status != http.StatusOK || !strings.Contains(p.body, `name="token"`) || !strings.Contains(p.body, `value="/approvals"`) {
		t.Fatalf("login form: %d\n%s", p.status, p.body)
	}
	checkHeaders(t, "/login", p)

	// A wrong token: the form again, saying so, and no hint of the token.
	wrong := "op-token-for-tests-0123456788"
	p = b.post("/login", url.Values{"token": {wrong}, "next": {"/"}})
	if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "not the operator token") || !strings.Contains(p.body, `name="token"`) {
		t.Fatalf("wrong token: %d\n%s", p.status, p.body)
	}
	if strings.Contains(p.body, wrong) || strings.Contains(p.body, operatorToken) || strings.Contains(p.body, operatorToken[:12]) {
		t.Fatalf("the login page shows a token:\n%s", p.body)
	}
	if len(p.header.Values("Set-Cookie")) != 0 {
		t.Fatalf("a wrong token set a cookie: %v", p.header.Values("Set-Cookie"))
	}
	if p := b.get("/"); p.status != http.StatusSeeOther {
		t.Fatalf("after a wrong token: GET / %d", p.status)
	}

	// next never leaves the console.
	for _, next := range []string{"//evil.example/", "https://evil.example/", `/\evil.example`} {
		b2 := r.browser()
		p := b2.post("/login", url.Values{"token": {operatorToken}, "next": {next}})
		if p.status != http.StatusOK || signedInNext(p.body) != "/" {
			t.Errorf("login with next %q: %d %q", next, p.status, signedInNext(p.body))
		}
	}

	p = b.post("/login", url.Values{"token": {operatorToken}, "next": {"/approvals"}})
	if p.status != http.StatusOK || signedInNext(p.body) != "/approvals" {
		t.Fatalf("login: %d %q", p.status, signedInNext(p.body))
	}
	var session *http.Cookie
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == "openplaybook_session" {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie: %+v", session)
	}
	b.login()
	for _, path := range []string{"/", "/approvals", "/playbooks"} {
		p := b.get(path)
		// The CSRF token is never in a page: whoever gets the cookie
		// (browsers send it to every port of the host) cannot read it.
		if p.status != http.StatusOK || strings.Contains(p.body, b.csrf) || !strings.Contains(p.body, `name="csrf" value=""`) {
			t.Errorf("GET %s logged in: %d (the page must not hold the CSRF token)\n%s", path, p.status, p.body)
		}
		if strings.Contains(p.body, operatorToken) || strings.Contains(p.body, session.Value) {
			t.Errorf("GET %s shows the operator token or the session cookie", path)
		}
		checkHeaders(t, path, p)
	}
	if p := b.get("/runs/run_0000000000000000"); p.status != http.StatusNotFound {
		t.Errorf("an unknown run: %d", p.status)
	}
	if p := b.get("/no/such/page"); p.status != http.StatusNotFound {
		t.Errorf("an unknown page: %d", p.status)
	}

	// Logout needs the CSRF token; then the session is over on the server
	// too (the old cookie no longer works).
	if p := b.post("/logout", url.Values{}); p.status != http.StatusForbidden {
		t.Fatalf("logout without CSRF: %d", p.status)
	}
	if p := b.get("/"); p.status != http.StatusOK {
		t.Fatalf("the refused logout logged out: %d", p.status)
	}
	old := b.c.Jar.Cookies(mustURL(t, r.ts.URL))
	if p := b.post("/logout", b.form()); p.status != http.StatusSeeOther || p.header.Get("Location") != "/login" {
		t.Fatalf("logout: %d %q", p.status, p.header.Get("Location"))
	}
	if p := b.get("/"); p.status != http.StatusSeeOther {
		t.Fatalf("after logout: GET / %d", p.status)
	}
	req, _ = http.NewRequest(http.MethodGet, r.ts.URL+"/", nil)
	for _, c := range old {
		req.AddCookie(c)
	}
	if resp, err := http.DefaultTransport.RoundTrip(req); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the old session cookie after logout: %v %v", resp.StatusCode, err)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// waitingRefund creates a run of approval.json whose agent asks for a
// refund with args; it returns the run and the agent once the call waits
// for approval.
func waitingRefund(t *testing.T, r *rig, args map[string]any) (string, *agent) {
	t.Helper()
	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, "approval.json", readTestdata(t, "approval.json"), nil)
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	a := r.connect(tok.MCPURL, tok.Token)
	a.tools(t, "charge__refund", "charge__get", "customer__get", "openplaybook_finish_step")
	text, isErr := a.call(t, "charge__refund", args)
	if !isErr || !strings.Contains(text, "pending") {
		t.Fatalf("charge.refund: %q (isError %v), want pending", text, isErr)
	}
	return run, a
}

// testConsoleShowsArgumentsEscaped: an argument holding markup and a bidi
// override is shown whole and escaped, and no page shows a secret value
// of the harness, though the agent put it in an argument and a step
// output and the operator in a reason.
func testConsoleShowsArgumentsEscaped(t *testing.T, rec *stripemock.Recorder) {
	r := newConsoleRig(t, rec.URL)
	long := strings.Repeat("0123456789", 50) // 500 bytes: shown whole, never cut
	chargeID := "ch_<script>alert(1)</script>\u202e" + long + consoleSecret
	run, a := waitingRefund(t, r, map[string]any{"chargeId": chargeID, "reason": "duplicate"})

	b := r.browser()
	b.login()
	pages := map[string]page{}
	for _, path := range []string{"/", "/approvals", "/runs/" + run, "/runs/" + run + "/audit?verify=1"} {
		p := b.get(path)
		if p.status != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, p.status, p.body)
		}
		pages[path] = p
	}
	ap := pages["/approvals"].body
	for _, want := range []string{
		"ch_&lt;script&gt;alert(1)&lt;/script&gt;\\u202e" + long, // escaped markup, the bidi override shown as \u202e, not cut
		"charge.refund", "Refund the duplicate charge", // the tool and the step's purpose
		"Moves money back to the customer", // its embedded definition
		`<code>reason</code>`, "duplicate",
		`name="decision" value="approve"`, `name="decision" value="deny"`,
		"Bound to (digest)", "Embedded definition digest", "connector:stripe",
	} {
		if !strings.Contains(ap, want) {
			t.Errorf("the approvals page lacks %q", want)
		}
	}
	apr, err := r.st.PendingApprovals(context.Background(), run)
	if err != nil || len(apr) != 1 {
		t.Fatalf("pending approvals: %v %v", apr, err)
	}
	if !strings.Contains(ap, apr[0].DefDigest) || !strings.Contains(ap, apr[0].ID) {
		t.Errorf("the approvals page lacks the approval %s or its bound digest %s", apr[0].ID, apr[0].DefDigest)
	}
	if !strings.Contains(pages["/runs/"+run+"/audit?verify=1"].body, "chain verifies: ") {
		t.Errorf("the audit page does not say the chain verifies:\n%s", pages["/runs/"+run+"/audit?verify=1"].body)
	}
	if !strings.Contains(pages["/runs/"+run].body, "<svg ") {
		t.Errorf("the run page has no step graph")
	}

	// The operator denies it, giving the secret value in the reason: the
	// console redacts it before it is recorded.
	p := b.post("/runs/"+run+"/decide", b.form("id", apr[0].ID, "decision", "deny", "reason", "not this one "+consoleSecret, "back", "/approvals"))
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/approvals" {
		t.Fatalf("deny: %d %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	if text, isErr := a.call(t, "charge__refund", map[string]any{"chargeId": chargeID, "reason": "duplicate"}); !isErr || !strings.Contains(text, "denied") {
		t.Fatalf("the denied call: %q (isError %v)", text, isErr)
	}
	if text, isErr := a.call(t, "openplaybook_finish_step", map[string]any{"output": map[string]any{"note": "refund denied; key " + consoleSecret}}); isErr {
		t.Fatalf("finish: %s", text)
	}
	r.waitStatus(run, "completed", "")
	if n := refunds(rec); n != 0 {
		t.Fatalf("%d refunds reached Stripe; the call was denied", n)
	}

	// Every page, now with the decision, the output and the audit log.
	for _, path := range []string{"/", "/approvals", "/playbooks", "/runs/" + run, "/runs/" + run + "/audit", "/runs/" + run + "/audit?verify=1"} {
		pages[path] = b.get(path)
	}
	doc := strings.Replace(string(readTestdata(t, "approval.json")), "Refund the duplicate charge;", "Refund the duplicate charge with key "+consoleSecret+" \u202e;", 1)
	pages["POST /playbooks"] = b.postMultipart("/playbooks", map[string]string{"csrf": b.csrf, "action": "check", "document": doc, "input": "{}"})
	if p := pages["POST /playbooks"]; p.status != http.StatusOK || !strings.Contains(p.body, "Refund the duplicate charge with key ") || !strings.Contains(p.body, `\u202e`) {
		t.Errorf("the playbooks page does not explain the document: %d\n%s", p.status, p.body)
	}
	runPage := pages["/runs/"+run].body
	if !strings.Contains(runPage, "refund denied; key ") || !strings.Contains(runPage, "approval.denied") {
		t.Errorf("the run page lacks the step's output or the approval.denied record")
	}
	for path, p := range pages {
		if strings.Contains(p.body, consoleSecret) {
			i := strings.Index(p.body, consoleSecret)
			t.Errorf("%s shows the secret value: ...%s...", path, p.body[max(0, i-200):i+len(consoleSecret)])
		}
		if strings.Contains(p.body, "\u202e") {
			t.Errorf("%s holds a raw U+202E", path)
		}
		if strings.Contains(p.body, "<script>alert") {
			t.Errorf("%s holds the markup unescaped", path)
		}
		checkHeaders(t, path, p)
	}
}

// postMultipart posts fields as multipart/form-data (as the playbooks
// form does).
func (b *browser) postMultipart(path string, fields map[string]string) page {
	b.t.Helper()
	body, ctype := multipartBody(b.t, fields, "", nil)
	req, _ := http.NewRequest(http.MethodPost, b.base+path, body)
	req.Header.Set("Content-Type", ctype)
	return b.do(req)
}

// testConsoleCSRF: every form POST of a logged-in browser without the
// session's CSRF token, or with another, is refused with 403 and does
// nothing; so is a POST from another origin, token or not.
func testConsoleCSRF(t *testing.T, rec *stripemock.Recorder) {
	r := newConsoleRig(t, rec.URL)
	run, _ := waitingRefund(t, r, map[string]any{"chargeId": "ch_1", "reason": "duplicate"})
	apr, err := r.st.PendingApprovals(context.Background(), run)
	if err != nil || len(apr) != 1 {
		t.Fatalf("pending approvals: %v %v", apr, err)
	}
	b := r.browser()
	b.login()
	before, _ := r.st.ListRuns(context.Background())

	posts := []struct {
		path   string
		fields []string
	}{
		{"/runs/" + run + "/decide", []string{"id", apr[0].ID, "decision", "approve", "reason", "ok"}},
		{"/runs/" + run + "/cancel", []string{"reason", "stop"}},
		{"/runs/" + run + "/resume", nil},
		{"/logout", nil},
	}
	doc := string(readTestdata(t, "agent.json"))
	for _, tc := range posts {
		for _, csrf := range []string{"", "wrong-" + b.csrf, b.csrf[:len(b.csrf)-1]} {
			f := b.form(tc.fields...)
			if csrf == "" {
				f.Del("csrf")
			} else {
				f.Set("csrf", csrf)
			}
			if p := b.post(tc.path, f); p.status != http.StatusForbidden || !strings.Contains(p.body, "CSRF") {
				t.Errorf("POST %s with csrf %q: %d\n%s", tc.path, csrf, p.status, p.body)
			}
		}
	}
	for _, csrf := range []string{"", "wrong"} {
		p := b.postMultipart("/playbooks", map[string]string{"csrf": csrf, "action": "run", "document": doc, "input": `{"customerId":"cus_ada"}`})
		if p.status != http.StatusForbidden {
			t.Errorf("POST /playbooks with csrf %q: %d", csrf, p.status)
		}
	}
	// From another origin (a page elsewhere posting a form here): the
	// server's Origin check refuses it, with the right token too.
	for _, tc := range posts {
		req, _ := http.NewRequest(http.MethodPost, r.ts.URL+tc.path, strings.NewReader(b.form(tc.fields...).Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://evil.example")
		if p := b.do(req); p.status != http.StatusForbidden {
			t.Errorf("POST %s from another origin: %d", tc.path, p.status)
		}
	}
	// Without a session at all: 401, as a page.
	anon := r.browser()
	for _, tc := range posts[:3] {
		if p := anon.post(tc.path, b.form(tc.fields...)); p.status != http.StatusUnauthorized || !strings.Contains(p.body, "log in") {
			t.Errorf("POST %s without a session: %d\n%s", tc.path, p.status, p.body)
		}
	}

	// Nothing happened: the approval is pending, the run not cancelled, no
	// run created, the session alive.
	if a, _ := r.st.PendingApprovals(context.Background(), run); len(a) != 1 {
		t.Errorf("the approval is no longer pending: %+v", a)
	}
	if got, _ := r.st.GetRun(context.Background(), run); got.Status.Ended() {
		t.Errorf("the run was cancelled")
	}
	if after, _ := r.st.ListRuns(context.Background()); len(after) != len(before) {
		t.Errorf("%d runs, want %d", len(after), len(before))
	}
	if p := b.get("/"); p.status != http.StatusOK {
		t.Errorf("the session ended: %d", p.status)
	}
	if n := refunds(rec); n != 0 {
		t.Errorf("%d refunds reached Stripe", n)
	}

	// With the token, the same forms work.
	p := b.post("/runs/"+run+"/decide", b.form(posts[0].fields...))
	if p.status != http.StatusSeeOther {
		t.Fatalf("approve with the token: %d\n%s", p.status, p.body)
	}
	if a, _ := r.st.PendingApprovals(context.Background(), run); len(a) != 0 {
		t.Errorf("the approval is still pending after approving: %+v", a)
	}
	if p := b.post("/runs/"+run+"/decide", b.form(posts[0].fields...)); p.status != http.StatusConflict {
		t.Errorf("approving again: %d\n%s", p.status, p.body)
	}
	if p := b.post("/runs/"+run+"/cancel", b.form("reason", "done testing")); p.status != http.StatusSeeOther {
		t.Fatalf("cancel: %d\n%s", p.status, p.body)
	}
	if got, _ := r.st.GetRun(context.Background(), run); got.Status != store.RunFailed || !strings.Contains(got.Reason, "cancelled") {
		t.Errorf("the run is %s after cancel", got.Status)
	}
}

// TestConsolePlaybooks: the playbooks page validates a document with
// positioned diagnostics, explains it, and starts a run with an input.
func TestConsolePlaybooks(t *testing.T) {
	r := newRig(t, "")
	b := r.browser()
	b.login()
	if p := b.get("/playbooks"); p.status != http.StatusOK || !strings.Contains(p.body, `enctype="multipart/form-data"`) {
		t.Fatalf("GET /playbooks: %d", p.status)
	}
	doc := readTestdata(t, "agent.json")

	// A broken document: positioned diagnostics.
	broken := strings.Replace(string(doc), `"next": "review"`, `"next": "nowhere"`, 1)
	p := b.postMultipart("/playbooks", map[string]string{"csrf": b.csrf, "action": "check", "document": broken})
	if p.status != http.StatusOK || !strings.Contains(p.body, "nowhere") || !regexp.MustCompile(`<td>\d+:\d+</td><td>error</td>`).MatchString(p.body) {
		t.Fatalf("check of a broken document: %d\n%s", p.status, p.body)
	}
	// A good one, uploaded as a file: no problems, explained, its graph.
	body, ctype := multipartBody(t, map[string]string{"csrf": b.csrf, "action": "check"}, "agent.json", doc)
	req, _ := http.NewRequest(http.MethodPost, r.ts.URL+"/playbooks", body)
	req.Header.Set("Content-Type", ctype)
	p = b.do(req)
	if p.status != http.StatusOK || !strings.Contains(p.body, "No problems") || !strings.Contains(p.body, "<svg ") || !strings.Contains(p.body, "lookup") {
		t.Fatalf("check of an uploaded document: %d\n%s", p.status, p.body)
	}
	// Sent from a textarea, its line breaks are CR LF: the same document.
	p = b.postMultipart("/playbooks", map[string]string{"csrf": b.csrf, "action": "check", "document": strings.ReplaceAll(string(doc), "\n", "\r\n")})
	if p.status != http.StatusOK || !strings.Contains(p.body, "No problems") || strings.Contains(p.body, `\u000d`) {
		t.Fatalf("check of a document with CR LF line breaks: %d\n%s", p.status, p.body)
	}
	// A run with an input that does not match: refused, saying why.
	p = b.postMultipart("/playbooks", map[string]string{"csrf": b.csrf, "action": "run", "document": string(doc), "input": `{"customer": 1}`})
	if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "no run was started") {
		t.Fatalf("a run with a bad input: %d\n%s", p.status, p.body)
	}
	p = b.postMultipart("/playbooks", map[string]string{"csrf": b.csrf, "action": "run", "document": string(doc), "input": `{"customerId": `})
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "not valid JSON") {
		t.Fatalf("a run with an input that is not JSON: %d\n%s", p.status, p.body)
	}
	if runs, _ := r.st.ListRuns(context.Background()); len(runs) != 0 {
		t.Fatalf("%d runs were created by refused forms", len(runs))
	}
	// And one that starts.
	p = b.postMultipart("/playbooks", map[string]string{"csrf": b.csrf, "action": "run", "document": string(doc), "input": `{"customerId": "cus_ada"}`})
	loc := p.header.Get("Location")
	if p.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/runs/run_") {
		t.Fatalf("start a run: %d %q\n%s", p.status, loc, p.body)
	}
	run := strings.TrimPrefix(loc, "/runs/")
	r.waitStatus(run, "waiting", "agent")
	got, err := r.st.GetRun(context.Background(), run)
	if err != nil || string(got.Input) != `{"customerId": "cus_ada"}` && string(got.Input) != `{"customerId":"cus_ada"}` {
		t.Fatalf("the run's input: %s %v", got.Input, err)
	}
	p = b.get(loc)
	if p.status != http.StatusOK || !strings.Contains(p.body, "waits for its agent") || !strings.Contains(p.body, `id="step-0"`) {
		t.Fatalf("the run page: %d\n%s", p.status, p.body)
	}
}

// TestConsoleGate: a gate is shown with its purpose and the output of the
// step before it, and approved from the console.
func TestConsoleGate(t *testing.T) {
	r := newRig(t, "")
	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	a := r.connect(tok.MCPURL, tok.Token)
	a.tools(t, "customer__get", "note__add", "openplaybook_finish_step")
	if text, isErr := a.call(t, "openplaybook_finish_step", map[string]any{"output": map[string]any{"found": "Ada <b>Lovelace</b>"}}); isErr {
		t.Fatalf("finish: %s", text)
	}
	r.waitStatus(run, "waiting", "gate")

	b := r.browser()
	b.login()
	p := b.get("/approvals")
	for _, want := range []string{"A person reads the note before the wrap-up.", "Ada &lt;b&gt;Lovelace&lt;/b&gt;", `name="id" value="review"`, ">Reject<"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the gate on the approvals page lacks %q", want)
		}
	}
	p = b.post("/runs/"+run+"/decide", b.form("id", "review", "decision", "approve", "by", "Grace"))
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/runs/"+run {
		t.Fatalf("approve the gate: %d %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	au, err := r.srv.Audit(ctx, run, false)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rec := range au.Records {
		if rec.Kind == "gate.approved" && strings.Contains(string(rec.Data), `"Grace"`) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no gate.approved record by Grace")
	}
	a.tools(t, "mcp__memory__create_entities", "mcp__memory__search_nodes", "openplaybook_finish_step")
}

// TestConsoleEvents: the event stream sends a run's status changes, and
// at once a status event when the run changed since the page's state.
func TestConsoleEvents(t *testing.T) {
	r := newRig(t, "")
	b := r.browser()
	b.login()
	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	p := b.get("/runs/" + run)
	m := regexp.MustCompile(`<meta name="openplaybook-events" content="([^"]+)">`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("the run page has no event stream")
	}
	events := strings.ReplaceAll(m[1], "&amp;", "&")

	read := func(path string) (*http.Response, func() string) {
		ctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.ts.URL+path, nil)
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		lines := make(chan string, 64)
		go func() {
			buf := make([]byte, 4096)
			var acc string
			for {
				n, err := resp.Body.Read(buf)
				acc += string(buf[:n])
				for {
					i := strings.Index(acc, "\n\n")
					if i < 0 {
						break
					}
					lines <- acc[:i]
					acc = acc[i+2:]
				}
				if err != nil {
					close(lines)
					return
				}
			}
		}()
		return resp, func() string {
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						return ""
					}
					if strings.HasPrefix(l, ":") {
						continue
					}
					return l
				case <-time.After(20 * time.Second):
					return "(nothing within 20s)"
				}
			}
		}
	}
	resp, next := read(events)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// The page is current: the first event is the cancel's.
	if err := r.srv.CancelRun(ctx, run, "tester", "stop"); err != nil {
		t.Fatal(err)
	}
	if ev := next(); !strings.HasPrefix(ev, "event: status\ndata: {") || !strings.Contains(ev, run) {
		t.Fatalf("first event %q", ev)
	}
	// The page's state is stale now: a new stream says so at once.
	_, next2 := read(events)
	if ev := next2(); !strings.HasPrefix(ev, "event: status\n") {
		t.Fatalf("stale page's first event %q", ev)
	}
}

// multipartBody encodes fields, and a file in field "file" when name is
// not "", as multipart/form-data.
func multipartBody(t *testing.T, fields map[string]string, name string, file []byte) (io.Reader, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		if err := mw.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if name != "" {
		fw, err := mw.CreateFormFile("file", name)
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(file)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf, mw.FormDataContentType()
}
