package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
	"github.com/openplaybook/openplaybook/runtime"
)

// TestReadmeTourIsTrue runs the README's tour of refund-review as it is
// written (its memory seed, its input, the example transcript) in a
// harness of its own, and checks that it ends as the README says:
// completed, with every call succeeded (a failed call does not stop a
// transcript step, so "completed" alone would not show it). The seed goes
// to the file the example harness names.
func TestReadmeTourIsTrue(t *testing.T) {
	t.Parallel()
	root := mcptest.RepoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, tour, _ := strings.Cut(string(readme), "## A tour")
	tour, _, _ = strings.Cut(tour, "\n## ")
	seed := regexp.MustCompile(`(?s)echo '([^']*)' \\?\s*>\s*(\S+)`).FindStringSubmatch(tour)
	if seed == nil {
		t.Fatal("the tour seeds no memory graph, and refund-review's add_observations needs the customer in it")
	}
	h, err := os.ReadFile(filepath.Join(root, "examples", "harness.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`MEMORY_FILE_PATH: (\S+)`).FindSubmatch(h); m == nil || string(m[1]) != seed[2] {
		t.Fatalf("the tour seeds %s; examples/harness.yaml's memory server reads %q", seed[2], m)
	}
	input := regexp.MustCompile(`--input '([^']*)'`).FindStringSubmatch(tour)
	if input == nil || !strings.Contains(tour, "examples/refund-review.json") {
		t.Fatal("the tour runs no refund-review with an --input")
	}
	rita, err := os.ReadFile(filepath.Join(root, "examples", "transcripts", "rita.json"))
	if err != nil {
		t.Fatal(err)
	}

	e := newRTEnv(t, rtConfig{stripe: stripemock.Start(t), memory: true, transcripts: map[string]string{"rita": string(rita)}})
	e.write("memory.jsonl", seed[1]+"\n") // the README's seed, in place of the test's
	o := e.outcome(ExitWaiting, "run", "--input", input[1], rtExample(t, "refund-review.json"))
	if len(o.Waiting) != 1 || o.Waiting[0].ID != "approve_refund" {
		t.Fatalf("run: %+v, want waiting at approve_refund", o)
	}
	e.cli(ExitOK, "approve", o.Run, "approve_refund")
	o = e.outcome(ExitWaiting, "resume", o.Run)
	if len(o.Waiting) != 1 || o.Waiting[0].Kind != "call" {
		t.Fatalf("resume: %+v, want waiting for the refund approval", o)
	}
	e.cli(ExitOK, "approve", o.Run, o.Waiting[0].ID)
	if o = e.outcome(ExitOK, "resume", o.Run); o.Status != runtime.Completed {
		t.Fatalf("the last resume: %+v, want completed", o)
	}
	verified, recs := e.auditJSON(o.Run)
	if !verified {
		t.Error("the audit chain does not verify")
	}
	for _, r := range recs {
		if r["kind"] == "call.failed" || r["kind"] == "call.refused" {
			t.Errorf("the tour's run has a %s record: %v", r["kind"], r)
		}
	}
	if !rtHasRecord(recs, "call.succeeded", "mcp.memory.add_observations") {
		t.Error("add_observations did not succeed")
	}
}
