package serve

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/openplaybook/openplaybook/runtime"
)

// What an agent's token holder can add to the store is bounded: every
// text of theirs the gateway records (a tool or method name, a client
// name, a reason) is clipped, the rejected messages of a run are stored
// up to a budget and only counted past it, and the sessions a token
// opens are recorded once per step attempt, not once each.

// MaxRejectedRecords is the budget of agent.rejected records of one run
// in one server process. The last one it stores says that the budget is
// spent; later rejected messages are answered as before but only
// counted ([Server.RejectedUnstored]), not stored.
const MaxRejectedRecords = 100

// MaxReasonBytes bounds the reason of an agent.rejected record (after
// redaction; longer ones are cut at a character boundary and end with
// "…").
const MaxReasonBytes = 1024

// maxShownName bounds a name of the agent's (a tool, a method, a client)
// that a record or an answer shows; a longer one is shown as its size
// only ("(a name of 1048576 bytes)"), so that a secret in it is not shown
// in part.
const maxShownName = 128

// clipQuote is s quoted (%q) when it is at most n bytes, else only its
// size, "(a name of 1048576 bytes)".
func clipQuote(s string, n int) string {
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("(a name of %d bytes)", len(s))
}

// clipText cuts s to at most n bytes at a character boundary, ending it
// with "…" when cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// rejectBudget is what a run's rejected messages used of
// [MaxRejectedRecords] in this process.
type rejectBudget struct {
	stored   int // agent.rejected records written
	unstored int // rejected messages counted past the budget
}

// noteRejected audits a message of the agent refused before the
// decision path (agent.rejected), within the run's budget; reason is
// redacted, then clipped to [MaxReasonBytes].
func (g *gateway) noteRejected(run, tokenID, reason string) {
	g.mu.Lock()
	b := g.budgets[run]
	if b == nil {
		b = &rejectBudget{}
		g.budgets[run] = b
	}
	if b.stored >= MaxRejectedRecords {
		b.unstored++
		first := b.unstored == 1
		g.mu.Unlock()
		if first {
			fmt.Fprintf(g.s.opt.Log, "openplaybook serve: run %s: the budget of %d agent.rejected records is spent; later rejected messages are counted, not stored\n", run, MaxRejectedRecords)
		}
		return
	}
	b.stored++
	last := b.stored == MaxRejectedRecords
	g.mu.Unlock()
	reason = clipText(g.s.redact(reason), MaxReasonBytes)
	if last {
		reason += fmt.Sprintf(" (this is the run's %dth agent.rejected record, the most it stores: later rejected messages are answered but counted, not stored)", MaxRejectedRecords)
	}
	_ = runtime.Note(context.Background(), g.s.st, run, runtime.AgentRejected{Token: tokenID, Reason: reason}, g.s.redact)
}

// RejectedUnstored reports how many rejected messages of run this
// process counted but did not store, past [MaxRejectedRecords].
func (s *Server) RejectedUnstored(run string) int {
	s.gateway.mu.Lock()
	defer s.gateway.mu.Unlock()
	if b := s.gateway.budgets[run]; b != nil {
		return b.unstored
	}
	return 0
}

// attachLog is what the gateway recorded of one token's sessions: the
// period its last agent.attached record was written in and the sessions
// attached since without a record of their own. A period is identified
// by the channel Exchange.Current (package driver/external) returns with
// the run's step, which is replaced whenever a step starts or ends: one
// period is one step attempt, or the time between two.
type attachLog struct {
	run    string
	period <-chan struct{}
	folded int
}

// noteAttached audits that a session opened with tokenID attached to
// run. A token's first session in each step attempt (each time a step
// is given to the run's agents), and in each time between two, is
// recorded as agent.attached, with the executing step, the client's name
// and how many of the token's sessions attached since its previous
// record without one; a later session in the same period is counted,
// not recorded. It reports whether a record was written.
func (g *gateway) noteAttached(run, tokenID, client string) bool {
	cur, period := g.s.x.Current(run)
	g.mu.Lock()
	l := g.attached[tokenID]
	if l != nil && l.period == period {
		l.folded++
		g.mu.Unlock()
		return false
	}
	folded := 0
	if l != nil {
		folded = l.folded
	}
	g.attached[tokenID] = &attachLog{run: run, period: period}
	g.mu.Unlock()
	ev := runtime.AgentAttached{Token: tokenID, Client: showClient(g.s.redact(client)), Folded: folded}
	if cur != nil {
		ev.Step = cur.In.StepID
	}
	_ = runtime.Note(context.Background(), g.s.st, run, ev, g.s.redact)
	return true
}

// showClient is a client's "name version" as a record shows it: whole,
// or its size when over [maxShownName] bytes.
func showClient(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxShownName {
		return s
	}
	return fmt.Sprintf("a client name of %d bytes", len(s))
}
