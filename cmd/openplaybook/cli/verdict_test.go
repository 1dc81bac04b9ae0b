package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
)

// Tests that check, run and replay give one verdict, and one message, on
// what a user is sent down: check says what a run would do.

// checkDiags runs check --format json in e and returns the diagnostics.
func (e *rtEnv) checkDiags(want int, args ...string) []diag.Diagnostic {
	e.t.Helper()
	out, _ := e.cli(want, append([]string{"check", "--format", "json"}, args...)...)
	var ds []diag.Diagnostic
	if err := json.Unmarshal([]byte(out), &ds); err != nil {
		e.t.Fatalf("check --format json printed %q: %v", out, err)
	}
	return ds
}

// TestRegistryToolWithoutDefinition: a step allows today.surface, which
// the registry has (a built-in) but the document does not embed. check
// fails on it, and run refuses to start with the very same diagnostic;
// nothing runs.
func TestRegistryToolWithoutDefinition(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t, rtConfig{transcripts: map[string]string{"clerk": rtTranscript(map[string][]map[string]any{
		"write": {rtCall("note.add", map[string]any{"body": "a note"}), rtCall("today.surface", map[string]any{"title": "Look"})},
	})}})
	doc := e.write("doc.json", string(rtDoc(t, "unembedded",
		map[string]any{"id": "write", "kind": "agent", "agent": "clerk", "purpose": "Write a note and surface it.",
			"allowedTools": []string{"customer.get", "note.add", "today.surface"}},
	)))
	ds := e.checkDiags(ExitProblems, doc)
	d := find(ds, "registry-resolve", "/steps/0/allowedTools/2", diag.Error, `"today.surface"`, `step "write"`, "no embedded definition", "pin --write")
	if d == nil {
		t.Fatalf("check: no registry-resolve error for the unembedded built-in:\n%s", dump(ds))
	}
	if n := diag.Count(ds, diag.Error); n != 1 {
		t.Errorf("check: %d errors, want exactly the one:\n%s", n, dump(ds))
	}
	_, stderr := e.cli(ExitProblems, "run", doc)
	line := fmt.Sprintf("%s:%d:%d: error: %s [registry-resolve]", doc, d.Line, d.Column, d.Message)
	if !strings.Contains(stderr, "nothing was run") || !strings.Contains(stderr, line) {
		t.Errorf("run does not stop with check's error\nwant the line: %s\nstderr:\n%s", line, stderr)
	}
	if strings.Contains(stderr, "started") {
		t.Errorf("run started a run:\n%s", stderr)
	}
}

// The transcript of TestTranscriptStepIDs, written by hand for known
// positions: "writ" (a misspelt agent step) on line 3, "confirm" (a gate)
// on line 6, "write" (fine) on line 9.
const badStepsTranscript = `{
  "steps": {
    "writ": [
      {"tool": "note.add", "arguments": {"body": "misfiled"}}
    ],
    "confirm": [
      {"tool": "note.add", "arguments": {"body": "at the gate"}}
    ],
    "write": [
      {"tool": "note.add", "arguments": {"body": "after the gate"}}
    ]
  }
}
`

// TestTranscriptStepIDs: a transcript entry for a step id the playbook
// does not have, or for a gate, is an error at the step id in the
// transcript file, with a "did you mean", in check, run and replay alike.
func TestTranscriptStepIDs(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t, rtConfig{transcripts: map[string]string{"clerk": badStepsTranscript}})
	tr := e.dir + "/clerk.json"
	doc := e.write("doc.json", string(rtDoc(t, "gated",
		map[string]any{"id": "confirm", "kind": "gate", "purpose": "A person confirms.", "next": "write"},
		map[string]any{"id": "write", "kind": "agent", "agent": "clerk", "purpose": "Write a note.", "allowedTools": []string{"customer.get", "note.add"}},
	)))
	want := []struct {
		line, col int
		pointer   string
		says      []string
	}{
		{3, 5, "/steps/writ", []string{`step "writ"`, `playbook "gated" does not have (did you mean "write"?)`, "its call would never be replayed", `the agent steps are "write"`}},
		{6, 5, "/steps/confirm", []string{`step "confirm"`, "a gate of", "no agent runs there", `record calls under an agent step ("write")`}},
	}
	lines := func(ds []diag.Diagnostic) []string {
		var out []string
		for _, d := range ds {
			out = append(out, fmt.Sprintf("%s:%d:%d: error: %s [%s]", d.File, d.Line, d.Column, d.Message, d.Rule))
		}
		return out
	}

	ds := e.checkDiags(ExitProblems, doc)
	var got []diag.Diagnostic
	for _, d := range ds {
		if d.Rule == "preflight-transcript" {
			got = append(got, d)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("check: %d preflight-transcript diagnostics, want %d:\n%s", len(got), len(want), dump(ds))
	}
	for i, w := range want {
		d := got[i]
		if d.File != tr || d.Line != w.line || d.Column != w.col || d.Pointer != w.pointer || d.Severity != diag.Error {
			t.Errorf("check: diagnostic %d at %s:%d:%d %s (%v), want %s:%d:%d %s (error)", i, d.File, d.Line, d.Column, d.Pointer, d.Severity, tr, w.line, w.col, w.pointer)
		}
		for _, s := range w.says {
			if !strings.Contains(d.Message, s) {
				t.Errorf("check: diagnostic %d does not say %q: %s", i, s, d.Message)
			}
		}
	}
	if n := diag.Count(ds, diag.Error); n != len(want) {
		t.Errorf("check: %d errors, want only the transcript's:\n%s", n, dump(ds))
	}

	_, stderr := e.cli(ExitProblems, "run", doc)
	if !strings.Contains(stderr, "nothing was run") {
		t.Errorf("run did not stop:\n%s", stderr)
	}
	for _, l := range lines(got) {
		if !strings.Contains(stderr, l) {
			t.Errorf("run does not say, as check does:\n  %s\nstderr:\n%s", l, stderr)
		}
	}

	// replay is given the transcript; the harness's own is one that fits.
	e.write("clerk.json", rtTranscript(map[string][]map[string]any{"write": {rtCall("note.add", map[string]any{"body": "fine"})}}))
	bad := e.write("bad.json", badStepsTranscript)
	out, stderr := e.cli(ExitProblems, "replay", doc, bad)
	if !strings.Contains(stderr, "nothing was replayed") || out != "" {
		t.Errorf("replay did not stop before replaying:\nstdout:\n%s\nstderr:\n%s", out, stderr)
	}
	for _, l := range lines(got) {
		l = strings.Replace(l, tr, bad, 1)
		if !strings.Contains(stderr, l) {
			t.Errorf("replay does not say, as check does:\n  %s\nstderr:\n%s", l, stderr)
		}
	}
	// The snippet shows the step id, with a caret under its quote.
	if !strings.Contains(stderr, "3 |     \"writ\": [\n   |     ^") {
		t.Errorf("replay shows no snippet of the step id:\n%s", stderr)
	}
	// With the transcript fixed, replay replays.
	fixed := e.write("fixed.json", rtTranscript(map[string][]map[string]any{"write": {rtCall("note.add", map[string]any{"body": "fine"})}}))
	out, _ = e.cli(ExitOK, "replay", doc, fixed)
	if !strings.Contains(out, "1 calls, 0 would be refused") {
		t.Errorf("replay of a fitting transcript:\n%s", out)
	}
}
