package cli

import (
	"strings"
	"testing"
	"unicode"
)

// TestAuthListHostileScopes: a hostile token endpoint grants "scopes"
// that are terminal escape sequences (clear the screen, set the window
// title, move the cursor up over the rows before). auth list prints the
// scopes an endpoint said; an operator's terminal must not run them.
func TestAuthListHostileScopes(t *testing.T) {
	t.Parallel()
	g := newRotatingGitHub(t)
	g.scope = "issues:write \x1b[2J\x1b]0;pwned\x07 \x1b[1A\rconnection:github\tok"
	e, doc := newVaultEnv(t, g, true)
	e.outcome(ExitWaiting, "run", doc)
	for _, format := range []string{"text", "json"} {
		out, _ := e.cli(ExitOK, "auth", "list", "--format", format)
		if strings.ContainsFunc(strings.TrimRight(out, "\n"), func(r rune) bool { return unicode.IsControl(r) && r != '\n' }) {
			t.Errorf("auth list --format %s prints the endpoint's control characters: %q", format, out)
		}
	}
}
