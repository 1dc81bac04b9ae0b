package serve

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"
)

// ReplicaHeader names, on every answer of a replica, the replica that
// served the request (after any forwarding).
const ReplicaHeader = "X-Openplaybook-Replica"

// forwardedHeader marks a request one replica forwarded to another; the
// receiver serves it itself (no second hop).
const forwardedHeader = "X-Openplaybook-Forwarded-By"

// forwardedRun returns the run of a request that is served by the run's
// owner: /mcp/runs/{run} (an agent's MCP session lives in the owner's
// memory), /api/v1/runs/{run}/events (the owner publishes the run's
// progress lines) and /api/v1/runs/{run}/cancel (the owner stops its
// execution); "" for any other.
func forwardedRun(path string) string {
	if rest, ok := strings.CutPrefix(path, "/mcp/runs/"); ok && rest != "" && !strings.Contains(rest, "/") {
		return rest
	}
	if rest, ok := strings.CutPrefix(path, "/api/v1/runs/"); ok {
		for _, suffix := range []string{"/events", "/cancel"} {
			if run, ok := strings.CutSuffix(rest, suffix); ok && run != "" && !strings.Contains(run, "/") {
				return run
			}
		}
	}
	return ""
}

// forward reverse-proxies r to the owner of its run when that is another
// replica that is alive and has an address, flushing every write (event
// streams and MCP's streamed answers go through as they come); false
// when this replica serves the request itself (no replicas, a request
// already forwarded, a run it owns, one with no live owner, which the
// receiver claims as it resumes it).
func (s *Server) forward(w http.ResponseWriter, r *http.Request) bool {
	rs := s.replicas
	if rs == nil || r.Header.Get(forwardedHeader) != "" {
		return false
	}
	run := forwardedRun(r.URL.Path)
	if run == "" {
		return false
	}
	m := rs.member()
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	owner, addr, alive, err := rs.c.RunOwner(ctx, run)
	cancel()
	if err == nil && owner != "" && alive && strings.HasPrefix(r.URL.Path, "/mcp/runs/") {
		if opened := staleSession(r, owner); opened != "" {
			// Answered here, at once, without a hop: the session is not
			// at the owner (MCP, "Session Management": 404 for a session
			// the server does not know; the client initializes again).
			w.Header().Set(ReplicaHeader, m.ID())
			http.Error(w, "the MCP session was opened at replica "+opened+", which does not execute run "+run+" now: initialize a new session", http.StatusNotFound)
			return true
		}
	}
	if err != nil || owner == "" || owner == m.ID() || !alive || addr == "" {
		return false
	}
	target, err := url.Parse(addr)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return false
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(forwardedHeader, m.ID())
			// This replica checked the Host and Origin against its own
			// (Server.checkOrigin); the owner sees a request of a peer.
			pr.Out.Header.Del("Origin")
		},
		Transport:     s.peerTransport(),
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			// Where the owner lives, and why it could not be reached, go
			// to the log: the answer may go to a client that sent no
			// credential (this runs before authentication).
			s.logf("forwarding a request for run %s to replica %s at %s: %v", run, owner, addr, err)
			writeError(w, http.StatusBadGateway, "the replica that executes run "+run+" could not be reached; try again (another replica adopts the run if that one has stopped)")
		},
	}
	p.ServeHTTP(w, r)
	return true
}

// peerTransport is the transport of forwarded requests: a peer that does
// not accept the connection within 5 s, or (stopped, say) does not begin
// its answer within the longest an MCP tools/call may wait for a person
// (serve.approvalWait) and 30 s more, ends the request with a 502
// instead of holding the client; an event stream begins its answer at
// once and is not bounded after that.
func (s *Server) peerTransport() http.RoundTripper {
	s.peerOnce.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		t.ResponseHeaderTimeout = s.opt.Harness.H.Serve.ApprovalWait + 30*time.Second
		s.peer = t
	})
	return s.peer
}
