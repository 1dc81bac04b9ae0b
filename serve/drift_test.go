package serve_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/runtime"
)

// TestServeSaysDriftWarnings: a run created through the server from a
// document whose embedded description of a memory tool differs from what
// the server lists goes on (a warning), and the warning reaches the run's
// event stream (what the console and GET /api/v1/runs/{run}/events show)
// and its audit log (run.drift).
func TestServeSaysDriftWarnings(t *testing.T) {
	r := newRig(t, "")
	var doc map[string]any
	if err := json.Unmarshal(readTestdata(t, "agent.json"), &doc); err != nil {
		t.Fatal(err)
	}
	for _, tl := range doc["tools"].([]any) {
		if d := tl.(map[string]any); d["name"] == "mcp.memory.search_nodes" {
			d["description"] = "Search the graph, as the reviewer read it."
		}
	}
	src, _ := json.Marshal(doc)
	events, stop := r.srv.Events().Subscribe("")
	defer stop()
	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, "agent.json", src, []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	said := ""
	for wait := time.After(20 * time.Second); said == ""; {
		select {
		case ev := <-events:
			if ev.Run == run && ev.Type == "progress" && strings.Contains(ev.Text, "[drift-description]") {
				said = ev.Text
			}
		case <-wait:
			t.Fatal("the run's events never said the description drift in 20 s")
		}
	}
	if !strings.Contains(said, `warning: tool "mcp.memory.search_nodes": the description changed`) {
		t.Errorf("the drift event says %q", said)
	}
	recs, err := r.st.Audit(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rec := range recs {
		found = found || rec.Kind == string(runtime.KindRunDrift) && strings.Contains(string(rec.Data), "mcp.memory.search_nodes")
	}
	if !found {
		t.Errorf("no run.drift record naming the tool")
	}
}
