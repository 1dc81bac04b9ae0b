package serve

import (
	"net/http"
	"strings"

	"github.com/openplaybook/openplaybook/obs"
)

// Operated returns the handler `openplaybook serve` listens with: s,
// behind o's middleware (an access line, a span and a count per
// request; forwarding headers dropped unless the peer is one of
// proxies), and, before the Host and Origin check, so that a
// kubelet's probe (Host: the pod's address) reaches them:
//
//   - GET /healthz: 200 "ok" while the process answers;
//   - GET /readyz: 200 "ready" when the store commits a transaction and
//     each MCP server of the harness is reachable ([obs.Health]), else
//     503 "not ready"; the reasons go to the log only.
//
// With Prometheus metrics on (OTEL_METRICS_EXPORTER=prometheus), GET
// /metrics serves them to operators (the operator token, as the API).
// docs/operate.md.
func (s *Server) Operated(o *obs.Obs, proxies obs.Proxies) http.Handler {
	if o != nil {
		o.SetRedact(s.redact)
	}
	s.obs = o
	h := &obs.Health{O: o, Checks: append([]obs.Check{obs.StoreWritable(s.st)}, obs.MCPServersReachable(s.opt.Harness.H)...)}
	metrics := o.MetricsHandler()
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			h.Healthz(w, r)
			return
		case "/readyz":
			h.Readyz(w, r)
			return
		case "/metrics":
			if metrics != nil {
				if msg := s.checkOrigin(r); msg != "" {
					http.Error(w, msg, http.StatusForbidden)
					return
				}
				s.Operator(metrics).ServeHTTP(w, r)
				return
			}
		}
		s.ServeHTTP(w, r)
	})
	return o.Middleware(inner, proxies, route)
}

// Redact removes from text the secret values the server knows.
func (s *Server) Redact(text string) string { return s.redact(text) }

// route is a request's kind for the metrics, without identifiers:
// "/mcp/runs", "/api/v1/runs", "/healthz", "/" (the console).
func route(r *http.Request) string {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/mcp/"):
		return "/mcp/runs"
	case strings.HasPrefix(p, "/api/v1/"):
		seg, _, _ := strings.Cut(strings.TrimPrefix(p, "/api/v1/"), "/")
		switch seg {
		case "runs", "approvals", "playbooks", "openapi.json", "events", "login", "logout":
			return "/api/v1/" + seg
		}
		return "/api/v1"
	case p == "/healthz", p == "/readyz", p == "/metrics":
		return p
	}
	return "/"
}
