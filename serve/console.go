package serve

import (
	"context"
	"net/http"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/serve/console"
	"github.com/openplaybook/openplaybook/store"
)

// consoleRoutes registers the web console at / (package serve/console).
// Paths the API and MCP handlers register are more specific and stay
// theirs.
func (s *Server) consoleRoutes() {
	s.console = console.New(consoleBackend{s: s, redact: s.redact})
	s.mux.Handle("/", s.console)
	if s.oidc != nil {
		s.mux.HandleFunc("GET /auth/login", s.authLogin)
		s.mux.HandleFunc("GET /auth/callback", s.authCallback)
	}
}

// consoleBackend is the server as the console sees it: the service
// methods the API uses, and operator authentication.
type consoleBackend struct {
	s      *Server
	redact func(string) string
}

var _ console.Backend = consoleBackend{}

func (b consoleBackend) Operator(h http.Handler) http.Handler { return b.s.Operator(h) }

func (b consoleBackend) Authenticated(r *http.Request) bool {
	ok, _, _, _ := b.s.operatorAuth(r)
	return ok
}

func (b consoleBackend) CheckOperatorToken(tok string) bool   { return b.s.CheckOperatorToken(tok) }
func (b consoleBackend) Login() (*http.Cookie, string, error) { return b.s.Login() }
func (b consoleBackend) Logout(r *http.Request) *http.Cookie  { return b.s.Logout(r) }
func (b consoleBackend) Redact(s string) string               { return b.redact(s) }
func (b consoleBackend) SSO() (sso, token bool) {
	if b.s.oidc == nil {
		return false, true
	}
	return true, b.s.oidc.cfg.OperatorToken
}
func (b consoleBackend) Closing() <-chan struct{} { return b.s.runner.ctx.Done() }

func (b consoleBackend) RunsPage(ctx context.Context, f store.RunFilter, cursor string, limit int) ([]runtime.RunStatus, string, error) {
	return b.s.RunsPage(ctx, f, cursor, limit)
}
func (b consoleBackend) Run(ctx context.Context, run string) (runtime.RunStatus, error) {
	return b.s.Run(ctx, run)
}
func (b consoleBackend) RunRecord(ctx context.Context, run string) (store.Run, error) {
	return b.s.st.GetRun(ctx, run)
}
func (b consoleBackend) Executing(run string) bool { return b.s.runner.Executing(run) }

func (b consoleBackend) Pending(ctx context.Context, run string) ([]console.Pending, error) {
	ps, err := b.s.Pending(ctx, run)
	if err != nil {
		return nil, err
	}
	out := make([]console.Pending, len(ps))
	for i, p := range ps {
		out[i] = console.Pending{Run: p.Run, Pending: p.Pending}
	}
	return out, nil
}

func (b consoleBackend) Approvals(ctx context.Context, run string) ([]store.Approval, error) {
	return b.s.st.PendingApprovals(ctx, run)
}

func (b consoleBackend) Decide(ctx context.Context, run, id string, v runtime.Verdict) (runtime.Decided, error) {
	return b.s.Decide(ctx, run, id, v)
}

func (b consoleBackend) View(ctx context.Context, run, id, tool, by string) (runtime.Viewed, error) {
	return b.s.View(ctx, run, id, tool, by)
}

func (b consoleBackend) MayDecide(ctx context.Context, run, id string) error {
	return b.s.MayDecide(ctx, run, id)
}

func (b consoleBackend) Audit(ctx context.Context, run string, verify bool) (console.Audit, error) {
	a, err := b.s.Audit(ctx, run, verify)
	if err != nil {
		return console.Audit{}, err
	}
	out := console.Audit{Records: a.Records, Verified: a.Verified}
	for _, p := range a.Problems {
		out.Problems = append(out.Problems, console.Problem{Seq: p.Seq, Message: p.Message})
	}
	return out, nil
}

func (b consoleBackend) CreateRun(ctx context.Context, name string, doc []byte, input jsontext.Value) (string, []diag.Diagnostic, error) {
	return b.s.CreateRun(ctx, name, doc, input)
}

func (b consoleBackend) CancelRun(ctx context.Context, run, by, reason string) error {
	return b.s.CancelRun(ctx, run, by, reason)
}

func (b consoleBackend) ResumeRun(ctx context.Context, run string) ([]diag.Diagnostic, error) {
	return b.s.ResumeRun(ctx, run)
}

// Subscribe relays the broker's events of run until the subscription
// ends.
func (b consoleBackend) Subscribe(run string) (<-chan console.Event, func()) {
	in, cancel := b.s.events.Subscribe(run)
	out := make(chan console.Event, 16)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case ev := <-in:
				select {
				case out <- console.Event{Type: ev.Type, Run: ev.Run, Text: ev.Text}:
				case <-done:
					return
				}
			}
		}
	}()
	var once sync.Once
	return out, func() {
		once.Do(func() {
			cancel()
			close(done)
		})
	}
}
