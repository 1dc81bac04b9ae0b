package serve

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/openplaybook/openplaybook/store"
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
	if err == nil && owner != "" && !alive && owner != m.ID() && strings.HasPrefix(r.URL.Path, "/mcp/runs/") && s.agentOf(r, run) {
		owner, addr, alive, err = s.awaitAdoption(r.Context(), run, owner, addr)
	}
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

// agentOf reports whether r carries a bearer token of run's agents: only
// such a request is held for the run's adoption ([Server.awaitAdoption]),
// since forward runs before authentication; any other is served here at
// once (the gateway answers it 401).
func (s *Server) agentOf(r *http.Request, run string) bool {
	_, err := s.agentBearer(r.Context(), run, bearerOf(r))
	return err == nil
}

// bearerOf is the token of r's Authorization header ("Bearer ..."), or
// the header as it is when it names no scheme.
func bearerOf(r *http.Request) string {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return tok
}

// awaitAdoption is, for an agent's request of a run that is running under
// a dead owner, the run's owner once a replica has adopted it: the
// survivors adopt such a run within an adoption round
// ([ReplicaOptions.AdoptEvery]), and until then no replica executes it,
// so a call answered here at once would find no step to run it in. It
// waits, for at most three rounds (or until ctx ends), for the run's
// owner to change; then it returns the run's owner as it is (the dead one,
// when none adopted it: the request is served here, as before). A run
// that is not running (it waits: the request resumes it here) is not
// waited for. The requests of one run that wait at once share one
// reading of its owner ([Server.pollAdoption]), so that the agent's
// requests held open do not multiply the reads.
func (s *Server) awaitAdoption(ctx context.Context, run, owner, addr string) (string, string, bool, error) {
	s.adoptMu.Lock()
	w := s.adoptWaits[run]
	if w == nil {
		w = &adoptionWait{done: make(chan struct{})}
		if s.adoptWaits == nil {
			s.adoptWaits = map[string]*adoptionWait{}
		}
		s.adoptWaits[run] = w
		go func() {
			w.owner, w.addr, w.alive, w.err = s.pollAdoption(run, owner, addr)
			s.adoptMu.Lock()
			delete(s.adoptWaits, run)
			s.adoptMu.Unlock()
			close(w.done)
		}()
	}
	s.adoptMu.Unlock()
	select {
	case <-w.done:
		return w.owner, w.addr, w.alive, w.err
	case <-ctx.Done():
		return owner, addr, false, nil
	}
}

// adoptionWait is one wait for a run's adoption and, once done is
// closed, its result.
type adoptionWait struct {
	done        chan struct{}
	owner, addr string
	alive       bool
	err         error
}

// pollAdoption reads the run's owner on each of the run's events and
// every 100 ms, for at most three adoption rounds (or until the server
// closes), until it is another or alive; then it returns it, or owner
// and addr (not alive) when it did not change.
func (s *Server) pollAdoption(run, owner, addr string) (string, string, bool, error) {
	rs := s.replicas
	ctx, cancel := context.WithTimeout(s.runner.ctx, 3*rs.opt.AdoptEvery)
	defer cancel()
	if r, err := s.st.GetRun(ctx, run); err != nil || r.Status != store.RunRunning {
		return owner, addr, false, err
	}
	ch, unsubscribe := s.events.Subscribe(run)
	defer unsubscribe()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return owner, addr, false, nil
		case <-ch:
		case <-tick.C:
		}
		o, a, alive, err := rs.c.RunOwner(ctx, run)
		if err != nil {
			if ctx.Err() != nil {
				return owner, addr, false, nil
			}
			return o, a, alive, err
		}
		if o != owner || alive {
			return o, a, alive, nil
		}
	}
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
