// Package console is the web console of `openplaybook serve`: server-
// rendered pages (html/template, a little CSS and one small script, all
// embedded; nothing is fetched from elsewhere) for an operator to watch
// runs, read and decide what they wait for, read and verify a run's audit
// log, and check, explain and start documents.
//
// The console does nothing itself: every operation is a [Backend] call,
// which package serve implements with the same service methods the HTTP
// API uses. Every page but the login form is behind [Backend.Operator]
// (the operator token or the console session cookie); every form carries
// the session's CSRF token in a hidden "csrf" field, which Operator
// checks on every POST authenticated by the cookie.
//
// Every page escapes what it shows: html/template makes text inert where
// it lands, and text that comes from a document, an agent, a tool or the
// store is also passed through internal/textsafe, so a control,
// bidirectional or invisible character shows as \uXXXX instead of hiding
// or reordering what an operator reads; and through [Backend.Redact], so
// no secret value of the harness is shown. Pages are sent with a strict
// Content-Security-Policy (no inline script; nothing loaded from another
// origin; no framing). See docs/console.md.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// Backend is what the console needs of the server. Package serve
// implements it over *serve.Server; each method is the server's method of
// the same name unless its comment says otherwise.
type Backend interface {
	// Operator wraps h so that only operators reach it: 401 without an
	// operator token or session, 403 for a state-changing request
	// authenticated by the session cookie without the session's CSRF
	// token (header X-CSRF-Token or form field "csrf").
	Operator(h http.Handler) http.Handler
	// Authenticated reports whether r carries a valid operator token or
	// session (it does not check CSRF); the console uses it only to send
	// a browser without a session to the login form.
	Authenticated(r *http.Request) bool
	// CheckOperatorToken reports whether tok is the operator token.
	CheckOperatorToken(tok string) bool
	// Login starts a session: the cookie to set and its CSRF token.
	Login() (*http.Cookie, string, error)
	// Logout ends r's session and returns the cookie that clears it.
	Logout(r *http.Request) *http.Cookie
	// SSO says how operators log in: sso when single sign-on (OpenID
	// Connect, at /auth/login) is on, token when the operator token is
	// accepted.
	SSO() (sso, token bool)
	// Redact replaces every secret value of the harness in s.
	Redact(s string) string
	// Closing is closed when the server is closing: event streams end.
	Closing() <-chan struct{}

	// RunsPage lists at most limit runs that f keeps, newest first, after
	// cursor ("" for the newest), and the cursor of the next page (""
	// when none); a cursor it did not issue is an error.
	RunsPage(ctx context.Context, f store.RunFilter, cursor string, limit int) (runs []runtime.RunStatus, next string, err error)
	// Run returns a run with its step attempts; an error wrapping
	// [store.ErrNotFound] when there is none.
	Run(ctx context.Context, run string) (runtime.RunStatus, error)
	// RunRecord returns the run's row (its document's bytes and input).
	RunRecord(ctx context.Context, run string) (store.Run, error)
	// Executing reports whether the run executes in this process now.
	Executing(run string) bool
	// Pending lists what run waits for ("" for every run).
	Pending(ctx context.Context, run string) ([]Pending, error)
	// Approvals lists the pending approvals of run ("" for every run),
	// with the digest each is bound to.
	Approvals(ctx context.Context, run string) ([]store.Approval, error)
	// Decide decides a gate (by step id) or an approval (by id).
	Decide(ctx context.Context, run, id string, v runtime.Verdict) (runtime.Decided, error)
	// View reads the current state of the target of the call approval id
	// of run waits on, with the read tool named tool, for by (see
	// serve.Server.View); an error when it may not, and nothing was read.
	View(ctx context.Context, run, id, tool, by string) (runtime.Viewed, error)
	// MayDecide says whether the person the request's ctx carries may
	// approve now what run waits for under id, deciding nothing: nil, an
	// error wrapping [runtime.ErrNotDecider] when they may not, or
	// another error (the run ended, nothing waits under id). With run ""
	// it says whether they may decide anything at all.
	MayDecide(ctx context.Context, run, id string) error
	// Audit returns the run's audit records; with verify, the chain is
	// verified and the store reconciled with it.
	Audit(ctx context.Context, run string, verify bool) (Audit, error)
	// CreateRun checks the document and starts a run of it.
	CreateRun(ctx context.Context, name string, doc []byte, input jsontext.Value) (string, []diag.Diagnostic, error)
	// CancelRun stops and cancels a run.
	CancelRun(ctx context.Context, run, by, reason string) error
	// ResumeRun resumes a run here.
	ResumeRun(ctx context.Context, run string) ([]diag.Diagnostic, error)
	// Subscribe returns the events of run ("" for every run) and what ends
	// the subscription.
	Subscribe(run string) (<-chan Event, func())
}

// Pending is one decision a run waits for, with its run.
type Pending struct {
	Run string
	runtime.Pending
}

// Audit is a run's audit log; Verified and Problems are set when it was
// verified.
type Audit struct {
	Records  []audit.Record
	Verified *bool
	Problems []Problem
}

// Problem is one thing verification found; Seq is 0 when it is about no
// one record.
type Problem struct {
	Seq     int64
	Message string
}

// Event is what the server tells watchers: Type "progress" (Text is a
// progress line) or "status" (read the run again).
type Event struct {
	Type string `json:"type"`
	Run  string `json:"run"`
	Text string `json:"text,omitempty"`
}

// ContentSecurityPolicy is sent with every console response: scripts,
// styles, images and event streams from the console itself only, no
// inline script or style, forms posting only to the console, and no
// framing (CSP Level 3, https://www.w3.org/TR/CSP3/).
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Body limits of POST requests, in bytes.
const (
	// MaxDocumentBody bounds the playbooks form: a document (at most
	// syntax.DefaultMaxSize, 16 MiB) and an input, sent multipart.
	MaxDocumentBody = 20 << 20
	// MaxFormBody bounds every other form.
	MaxFormBody = 1 << 20
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Console is the console's http.Handler. Mount it at "/".
type Console struct {
	b     Backend
	mux   *http.ServeMux
	pages map[string]*template.Template
	graph []byte // graph.css, see graphCSS
}

// New returns the console over b.
func New(b Backend) *Console {
	c := &Console{b: b, mux: http.NewServeMux()}
	c.pages = parsePages(c.funcs())
	c.graph = graphCSS()
	c.routes()
	return c
}

func (c *Console) routes() {
	static, _ := fs.Sub(staticFS, "static")
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /static/graph.css", c.graphCSS)

	c.mux.HandleFunc("GET /login", c.loginForm)
	c.mux.Handle("POST /login", c.limit(MaxFormBody, http.HandlerFunc(c.login)))
	c.mux.Handle("POST /logout", c.action(MaxFormBody, c.logout))

	c.mux.Handle("GET /{$}", c.page(c.runsPage))
	c.mux.Handle("GET /runs/{run}", c.page(c.runPage))
	c.mux.Handle("GET /runs/{run}/audit", c.page(c.auditPage))
	c.mux.Handle("POST /runs/{run}/decide", c.action(MaxFormBody, c.decide))
	c.mux.Handle("POST /runs/{run}/view", c.action(MaxFormBody, c.view))
	c.mux.Handle("POST /runs/{run}/cancel", c.action(MaxFormBody, c.cancel))
	c.mux.Handle("POST /runs/{run}/resume", c.action(MaxFormBody, c.resume))
	c.mux.Handle("GET /approvals", c.page(c.approvalsPage))
	c.mux.Handle("GET /playbooks", c.page(c.playbooksPage))
	c.mux.Handle("POST /playbooks", c.action(MaxDocumentBody, c.playbooksPost))
	c.mux.Handle("GET /events", c.page(c.events))
	c.mux.HandleFunc("/", c.notFound)
}

// ServeHTTP sets the console's security headers and routes the request.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	// Not no-referrer: under it a browser sends "Origin: null" with a
	// form POST (Fetch, "append a request Origin header"), which the
	// server's Origin check refuses. same-origin sends the console's own
	// origin to the console and nothing to anyone else.
	h.Set("Referrer-Policy", "same-origin")
	if !strings.HasPrefix(r.URL.Path, "/static/") {
		h.Set("Cache-Control", "no-store")
	}
	c.mux.ServeHTTP(w, r)
}

// page wraps a GET handler: a browser without a session is sent to the
// login form; otherwise the request goes through Operator.
func (c *Console) page(h http.HandlerFunc) http.Handler {
	g := c.guard(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.b.Authenticated(r) {
			next := r.URL.Path
			if r.URL.RawQuery != "" {
				next += "?" + r.URL.RawQuery
			}
			if r.URL.Path == "/events" {
				http.Error(w, "log in to the console first", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/login?next="+urlQueryEscape(next), http.StatusSeeOther)
			return
		}
		g.ServeHTTP(w, r)
	})
}

// action wraps a POST handler: its body is bounded, and it goes through
// Operator (so a cookie-authenticated POST needs the CSRF token).
func (c *Console) action(max int64, h http.HandlerFunc) http.Handler {
	return c.limit(max, c.guard(h))
}

// limit bounds the request body to max bytes.
func (c *Console) limit(max int64, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > max {
			c.errorPage(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("the form is %d bytes; the console takes at most %d here", r.ContentLength, max))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, max)
		h.ServeHTTP(w, r)
	})
}

// guard passes r through Operator to h. When Operator refuses the request
// (its JSON error is for API clients), the refusal is shown as a page
// with the same status.
func (c *Console) guard(h http.Handler) http.Handler {
	inner := c.b.Operator(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g, ok := w.(*guardWriter); ok {
			g.reached = true
			h.ServeHTTP(g.ResponseWriter, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := &guardWriter{ResponseWriter: w}
		inner.ServeHTTP(g, r)
		if g.reached {
			return
		}
		status := g.status
		if status == 0 {
			status = http.StatusForbidden
		}
		msg := refusalMessage(g.body.String())
		if status == http.StatusUnauthorized {
			msg = "You are not logged in (or your session ended): log in again."
		}
		c.errorPage(w, r, status, msg)
	})
}

// guardWriter holds back what Operator writes when it refuses a request.
type guardWriter struct {
	http.ResponseWriter
	reached bool
	status  int
	body    strings.Builder
}

func (g *guardWriter) WriteHeader(code int) {
	if g.status == 0 {
		g.status = code
	}
}

func (g *guardWriter) Write(b []byte) (int, error) {
	if g.status == 0 {
		g.status = http.StatusOK
	}
	if g.body.Len() < 4096 {
		g.body.Write(b)
	}
	return len(b), nil
}

// Unwrap lets http.ResponseController reach the real writer.
func (g *guardWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// refusalMessage is the message of a {"error": "..."} body, or the body.
func refusalMessage(body string) string {
	var m struct {
		Error string `json:"error"`
	}
	if err := jsonUnmarshal([]byte(body), &m); err == nil && m.Error != "" {
		return m.Error
	}
	return strings.TrimSpace(body)
}

// errorPage shows msg with status.
func (c *Console) errorPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.ErrorPage(w, r, status, msg)
}

// ErrorPage shows msg as the console's error page with status.
func (c *Console) ErrorPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error", "Error", errorData{Status: status, StatusText: http.StatusText(status), Message: msg,
		LoggedIn: status != http.StatusUnauthorized && c.b.Authenticated(r)})
}

type errorData struct {
	Status     int
	StatusText string
	Message    string
	LoggedIn   bool
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	c.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("There is no console page %s.", r.URL.Path))
}

// fail shows err as a page: 404 for what does not exist, else status.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	if errors.Is(err, store.ErrNotFound) {
		status = http.StatusNotFound
	}
	c.errorPage(w, r, status, err.Error())
}
