package serve

import (
	"context"
	"crypto/subtle"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/store"
)

// A run's agent sessions end with the run: the gateway watches the
// runs' status events (and, for a run ended by another process, looks
// again every [endCheckEvery]) and closes the sessions of a run that has
// ended, each once it has no request being answered (go-sdk writes no
// answer once a session is closing). A request that names such a
// session afterwards, with the run's
// token, is answered 404 (MCP, "Session Management": the session has
// ended), a DELETE included; one without a session is answered 401
// saying that the run has ended.

// endCheckEvery is how often the gateway looks for runs with open
// sessions that ended without a status event here (another process
// ended them).
const endCheckEvery = 5 * time.Second

// quietWait bounds how long the stdio session of an ended run waits for
// its requests to be answered before it ends (a request the client
// cancelled may never be).
const quietWait = 30 * time.Second

// watchEnds closes the sessions of runs that end, until the gateway
// closes.
func (g *gateway) watchEnds() {
	ch, cancel := g.s.events.Subscribe("")
	defer cancel()
	t := time.NewTicker(endCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case ev := <-ch:
			if ev.Type != "status" {
				continue
			}
		case <-t.C:
		}
		g.closeEnded()
	}
}

// closeEnded closes the sessions of every run that has ended, and ends
// its stateless agents' leases. It reads every run with sessions or
// leases, not only the run of the event that woke it: a subscriber that
// fell behind may have lost that run's event.
func (g *gateway) closeEnded() {
	g.mu.Lock()
	runs := map[string][]*mcp.ServerSession{}
	for ss, o := range g.sessions {
		runs[o.run] = append(runs[o.run], ss)
	}
	leases := map[string][]leaseKey{}
	for k := range g.leases {
		leases[k.run] = append(leases[k.run], k)
		if _, ok := runs[k.run]; !ok {
			runs[k.run] = nil
		}
	}
	g.mu.Unlock()
	for run, ss := range runs {
		r, err := g.s.st.GetRun(context.Background(), run)
		if err != nil || !r.Status.Ended() {
			continue
		}
		for _, k := range leases[run] {
			g.unlease(k)
		}
		var now []*mcp.ServerSession
		g.mu.Lock()
		for tok, l := range g.attached {
			if l.run == run {
				delete(g.attached, tok)
			}
		}
		for _, s := range ss {
			if g.inflight[s.ID()] > 0 {
				g.ending[s.ID()] = true // closed by answered
			} else {
				now = append(now, s)
			}
		}
		g.mu.Unlock()
		for _, s := range now {
			go s.Close()
		}
	}
}

// answered ends a POST of session sid: its answers are written. A
// session of an ended run is closed when it has none left.
func (g *gateway) answered(sid string) {
	g.mu.Lock()
	g.inflight[sid]--
	if g.inflight[sid] > 0 {
		g.mu.Unlock()
		return
	}
	delete(g.inflight, sid)
	var end *mcp.ServerSession
	if g.ending[sid] {
		delete(g.ending, sid)
		for s := range g.sessions {
			if s.ID() == sid {
				end = s
			}
		}
	}
	g.mu.Unlock()
	if end != nil {
		go end.Close()
	}
}

// endedRun reports whether rec, the record of the token a request came
// with, is a token of run that is unusable only because run has ended,
// and the status it ended with.
func endedRun(ctx context.Context, s *Server, rec store.AgentToken, run string) (store.RunStatus, bool) {
	if rec.ID == "" || subtle.ConstantTimeCompare([]byte(rec.Run), []byte(run)) != 1 || !rec.Revoked.IsZero() || time.Now().After(rec.Expires) {
		return "", false
	}
	r, err := s.st.GetRun(ctx, run)
	if err != nil || !r.Status.Ended() {
		return "", false
	}
	return r.Status, true
}

// untilEnded returns a context that ends with ctx or, once run has
// ended, when quiet returns (it waits until the session's requests are
// answered, or its context ends), for the session of `openplaybook mcp`.
func (s *Server) untilEnded(ctx context.Context, run string, quiet func(context.Context)) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	ch, unsubscribe := s.events.Subscribe(run)
	go func() {
		defer unsubscribe()
		t := time.NewTicker(endCheckEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-ch:
				if ev.Type != "status" {
					continue
				}
			case <-t.C:
			}
			if r, err := s.st.GetRun(ctx, run); err == nil && r.Status.Ended() {
				qctx, qcancel := context.WithTimeout(ctx, quietWait)
				quiet(qctx)
				qcancel()
				cancel()
				return
			}
		}
	}()
	return ctx, cancel
}
