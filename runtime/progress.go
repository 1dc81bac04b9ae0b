package runtime

import "fmt"

// progress writes one line a person can follow, secrets redacted.
func (s *Session) progress(format string, args ...any) {
	fmt.Fprintln(s.opt.Progress, s.opt.Redact(fmt.Sprintf(format, args...)))
}

// plural renders "1 tool call", "2 tool calls".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
