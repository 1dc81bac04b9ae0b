package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestHelpSpeaksOfEveryConnector: no command's help or man page speaks of
// the connectors as if Stripe were the only one (there is one connector
// per provider of the format).
func TestHelpSpeaksOfEveryConnector(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := &CLI{Getenv: func(string) string { return "" }}
	if code, _, stderr := runIn(c, "docs", "man", dir); code != ExitOK {
		t.Fatalf("docs man: exit %d: %s", code, stderr)
	}
	stale := regexp.MustCompile(`(?i)the\s+stripe\s+connector|stripe\s+is\s+asked\s+once`)
	pages, err := filepath.Glob(filepath.Join(dir, "*.1"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no man pages: %v", err)
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := stale.Find(b); m != nil {
			t.Errorf("%s says %q", filepath.Base(p), m)
		}
	}
	for _, cmd := range []string{"check", "pin", "run", "validate", "registry", "explain", "serve"} {
		_, out, _ := runIn(&CLI{}, cmd, "--help")
		if m := stale.FindString(out); m != "" {
			t.Errorf("%s --help says %q", cmd, m)
		}
	}
}
