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
// ended. A request that names such a session afterwards, with the run's
// token, is answered 404 (MCP, "Session Management": the session has
// ended), a DELETE included; one without a session is answered 401
// saying that the run has ended.

// endCheckEvery is how often the gateway looks for runs with open
// sessions that ended without a status event here (another process
// ended them).
const endCheckEvery = 5 * time.Second

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

// closeEnded closes the sessions of every run that has ended. It reads
// every run with sessions, not only the run of the event that woke it: a
// subscriber that fell behind may have lost that run's event.
func (g *gateway) closeEnded() {
	g.mu.Lock()
	runs := map[string][]*mcp.ServerSession{}
	for ss, run := range g.sessions {
		runs[run] = append(runs[run], ss)
	}
	g.mu.Unlock()
	for run, ss := range runs {
		r, err := g.s.st.GetRun(context.Background(), run)
		if err != nil || !r.Status.Ended() {
			continue
		}
		g.mu.Lock()
		for tok, l := range g.attached {
			if l.run == run {
				delete(g.attached, tok)
			}
		}
		g.mu.Unlock()
		for _, s := range ss {
			go s.Close() // waits for its requests in flight: the last answer is sent first
		}
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

// untilEnded returns a context that ends with ctx or when run has
// ended, for the session of `openplaybook mcp`.
func (s *Server) untilEnded(ctx context.Context, run string) (context.Context, context.CancelFunc) {
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
				cancel()
				return
			}
		}
	}()
	return ctx, cancel
}
