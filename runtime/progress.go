package runtime

import (
	"fmt"

	"github.com/openplaybook/openplaybook/internal/textsafe"
	"github.com/openplaybook/openplaybook/store"
)

// progress writes one line a person can follow, secrets redacted, and
// controls, bidi and invisible characters (from an agent, a server, a
// document) escaped, so that a line shows what it says.
func (s *Session) progress(format string, args ...any) {
	fmt.Fprintln(s.opt.Progress, textsafe.Line(s.opt.Redact(fmt.Sprintf(format, args...))))
}

// plural renders "1 tool call", "2 tool calls".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// endedUnasked is what [Session.sayVoided] says of an approval voided
// because its step attempt ended without the agent asking for the call
// again.
const endedUnasked = "the step attempt it was asked in ended and the agent did not ask for the call again"

// sayVoided tells the person following the run that approvals no longer
// hold (approval.voided is recorded with them): one line per approval,
// naming it, its call, what became of the decision and why. An approval a
// person gave and the runtime then voids would otherwise pass unnoticed.
func (s *Session) sayVoided(voided []store.Approval, why string) {
	for _, a := range voided {
		decision := "not decided"
		if a.DecidedBy != "" {
			decision = "approved by " + a.DecidedBy
		}
		s.progress("  approval %s of the call to %s in step %s (%s) is void: %s; the call was not run", a.ID, quote(a.Tool), a.Step, decision, why)
	}
}
