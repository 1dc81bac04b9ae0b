package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/internal/stripemock"
)

// TestRunRecordsDescriptionDrift: `run` of a document whose embedded
// description of an MCP tool differs from what the live server lists (a
// warning: the run goes on) prints the warning and records it in the
// run's audit log (run.drift), through the real import path (launch,
// preflight).
func TestRunRecordsDescriptionDrift(t *testing.T) {
	t.Parallel()
	rec := stripemock.Proxy(t, stripemock.Start(t))
	e := newRTEnv(t, rtConfig{stripe: rec.URL, memory: true, transcripts: map[string]string{"rita": ritaTranscript()}})
	src, err := os.ReadFile(rtExample(t, "refund-review.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	changed := false
	for _, tl := range doc["tools"].([]any) {
		if d := tl.(map[string]any); d["name"] == "mcp.memory.search_nodes" {
			d["description"] = "Search the knowledge graph, as the reviewer read it."
			changed = true
		}
	}
	if !changed {
		t.Fatal("refund-review embeds no mcp.memory.search_nodes")
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	path := e.write("drifted.json", string(b))
	stdout, stderr := e.cli(ExitWaiting, "run", "--format", "json", "--input", rtRefundInput, path)
	if !strings.Contains(stderr, `warning: tool "mcp.memory.search_nodes": the description changed`) || !strings.Contains(stderr, "[drift-description]") {
		t.Errorf("run does not print the description drift:\n%s", stderr)
	}
	var o struct{ Run string }
	if err := json.Unmarshal([]byte(stdout), &o); err != nil || o.Run == "" {
		t.Fatalf("run --format json printed %q: %v", stdout, err)
	}
	e.outcome(ExitWaiting, "resume", o.Run)
	_, recs := e.auditJSON(o.Run)
	n := 0
	for _, r := range recs {
		if r["kind"] == "run.drift" {
			n++
			if !strings.Contains(fmt.Sprint(r["data"]), "mcp.memory.search_nodes") {
				t.Errorf("run.drift does not name the tool: %v", r["data"])
			}
		}
	}
	if n != 1 {
		t.Errorf("%d run.drift records, want 1 (the resume found the same warning)", n)
	}
}
