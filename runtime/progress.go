package runtime

import (
	"fmt"

	"github.com/openplaybook/openplaybook/internal/textsafe"
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
