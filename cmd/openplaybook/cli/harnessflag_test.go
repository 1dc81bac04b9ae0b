package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/runtime"
)

// runIn runs the command line in process as CLI c (its streams replaced
// by buffers) and returns the exit code, stdout and stderr.
func runIn(c *CLI, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	code := c.Main(args)
	return code, out.String(), errb.String()
}

func noEnv(string) string { return "" }

// gatedEnv is a harness and a document that stops at a gate.
func gatedEnv(t *testing.T) (*rtEnv, string) {
	e := newRTEnv(t, rtConfig{transcripts: map[string]string{"clerk": rtTranscript(map[string][]map[string]any{
		"write": {rtCall("note.add", map[string]any{"body": "after the gate"})},
	})}})
	doc := e.write("doc.json", string(rtDoc(t, "gated",
		map[string]any{"id": "confirm", "kind": "gate", "purpose": "A person confirms.", "next": "write"},
		map[string]any{"id": "write", "kind": "agent", "agent": "clerk", "purpose": "Write a note.", "allowedTools": []string{"note.add"}},
	)))
	return e, doc
}

// TestHarnessDiscovery: without --harness, a command takes
// $OPENPLAYBOOK_HARNESS, else ./openplaybook.yaml, .yml or .json; with
// none it fails (exit 2) naming all three; --harness wins over both.
func TestHarnessDiscovery(t *testing.T) {
	t.Parallel()
	e, doc := gatedEnv(t)

	// None: every command that takes --harness says the three ways.
	empty := t.TempDir()
	for _, args := range [][]string{
		{"run", doc}, {"resume", "run_x"}, {"approve", "run_x", "g"}, {"deny", "run_x", "g"},
		{"status"}, {"audit", "run_x"}, {"today"}, {"check", doc}, {"check"}, {"pin", doc}, {"replay", doc, doc},
	} {
		code, out, stderr := runIn(&CLI{Getenv: noEnv, Dir: empty}, args...)
		if code != ExitUsage || out != "" || !strings.Contains(stderr, "--harness FILE") ||
			!strings.Contains(stderr, HarnessEnv) || !strings.Contains(stderr, "openplaybook.yaml (or .yml, .json)") {
			t.Errorf("%s with no harness: exit %d, stdout %q, stderr %q", args[0], code, out, stderr)
		}
	}

	// The environment variable.
	env := func(k string) string {
		if k == HarnessEnv {
			return e.harness
		}
		return ""
	}
	code, out, stderr := runIn(&CLI{Getenv: env, Dir: empty}, "run", "-f", "json", doc)
	if code != ExitWaiting {
		t.Fatalf("run with %s: exit %d\n%s\n%s", HarnessEnv, code, out, stderr)
	}
	var o runtime.Outcome
	if err := json.Unmarshal([]byte(out), &o); err != nil || o.Status != runtime.Waiting {
		t.Fatalf("run -f json: %q (%v)", out, err)
	}

	// ./openplaybook.json in the working directory: the same store.
	if err := os.WriteFile(filepath.Join(e.dir, "openplaybook.json"), []byte(mustReadFile(t, e.harness)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runIn(&CLI{Getenv: noEnv, Dir: e.dir}, "status", "-f", "json", o.Run)
	if code != ExitOK || !strings.Contains(out, o.Run) {
		t.Fatalf("status from ./openplaybook.json: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, _ = runIn(&CLI{Getenv: noEnv, Dir: e.dir}, "status", o.Run)
	if want := "--harness " + filepath.Join(e.dir, "openplaybook.json"); code != ExitOK || !strings.Contains(out, want) {
		t.Errorf("status hints do not name the harness found (%s):\n%s", want, out)
	}

	// Two candidates are ambiguous; --harness decides.
	if err := os.WriteFile(filepath.Join(e.dir, "openplaybook.yaml"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runIn(&CLI{Getenv: noEnv, Dir: e.dir}, "status")
	if code != ExitUsage || !strings.Contains(stderr, "openplaybook.yaml") || !strings.Contains(stderr, "openplaybook.json") {
		t.Errorf("two harness files: exit %d, %q", code, stderr)
	}
	code, _, stderr = runIn(&CLI{Getenv: env, Dir: t.TempDir()}, "status", "--harness", filepath.Join(empty, "nope.json"))
	if code != ExitUsage || !strings.Contains(stderr, "nope.json") {
		t.Errorf("--harness does not win over %s: exit %d, %q", HarnessEnv, code, stderr)
	}
}
