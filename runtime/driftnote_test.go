package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/preflight"
	"github.com/openplaybook/openplaybook/runtime"
)

// withDocEdit returns doc with edit applied to its decoded JSON.
func withDocEdit(t *testing.T, doc []byte, edit func(map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// embedded returns the embedded definition named name of a decoded doc.
func embedded(m map[string]any, name string) map[string]any {
	for _, tl := range m["tools"].([]any) {
		if d := tl.(map[string]any); d["name"] == name {
			return d
		}
	}
	return nil
}

// driftRecords returns the run's run.drift records, decoded.
func driftRecords(t *testing.T, r *rig, run string) []runtime.RunDrift {
	t.Helper()
	var out []runtime.RunDrift
	for _, rec := range r.auditOf(run) {
		if rec.Kind != string(runtime.KindRunDrift) {
			continue
		}
		var d runtime.RunDrift
		if err := json.Unmarshal(rec.Data, &d); err != nil {
			t.Fatalf("run.drift data %s: %v", rec.Data, err)
		}
		out = append(out, d)
	}
	return out
}

// checked is an engine option: the import check preflight does (launch
// passes it to every run), so drift findings reach the session.
func checked(r *rig) func(*runtime.SessionOptions) {
	return func(o *runtime.SessionOptions) {
		o.Check = func(ctx context.Context, doc *playbook.Document) []diag.Diagnostic {
			return preflight.Check(ctx, r.env, doc)
		}
	}
}

// TestRunRecordsDriftWarnings: a run started against an MCP server whose
// tools differ from the document's definitions in ways drift lets run (the
// server's description of lookup changed; the document's launch schema
// has a property description the server's lacks) records each warning in
// a run.drift record, naming the tool and rule, and prints it. A resume
// that finds the same warnings records nothing more; one that finds the
// server's description changed again records and prints the new ones.
func TestRunRecordsDriftWarnings(t *testing.T) {
	t.Parallel()
	ctr := startCtr(t, true)
	doc := withDocEdit(t, buildDoc(t, "drift-warned",
		agentStep("first", "dana", []string{"mcp.ctr.lookup", "mcp.ctr.launch"}, "hold"),
		gateStep("hold", "second", ""),
		agentStep("second", "dana", []string{"mcp.ctr.lookup"}, ""),
	), func(m map[string]any) {
		embedded(m, "mcp.ctr.lookup")["description"] = "Looks a widget up by id."
		props := embedded(m, "mcp.ctr.launch")["inputSchema"].(map[string]any)["properties"].(map[string]any)
		for _, p := range props {
			p.(map[string]any)["description"] = "What to launch, as the reviewer read it."
		}
	})
	r := newRig(t, rigConfig{http: map[string]string{"ctr": ctr.URL}}, doc)
	ctx := context.Background()
	tr := map[string]string{"dana": transcriptOf(map[string][]tcall{
		"first":  {{"mcp.ctr.lookup", map[string]any{"id": "w1"}}},
		"second": {{"mcp.ctr.lookup", map[string]any{"id": "w2"}}},
	})}
	out, err := r.engine(0, tr, nil, checked(r)).Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	recs := driftRecords(t, r, out.Run)
	if len(recs) != 1 {
		t.Fatalf("%d run.drift records, want 1", len(recs))
	}
	rules := map[string]string{}
	for _, w := range recs[0].Warnings {
		rules[w.Tool] += w.Rule + " "
	}
	if !strings.Contains(rules["mcp.ctr.lookup"], "drift-description") || !strings.Contains(rules["mcp.ctr.launch"], "drift-input-schema") {
		t.Errorf("run.drift lists %+v; want lookup's drift-description and launch's drift-input-schema", recs[0])
	}
	said := r.progress.String()
	if !strings.Contains(said, "warning: tool \"mcp.ctr.lookup\": the description changed") || !strings.Contains(said, "[drift-description]") {
		t.Errorf("the start does not print the description warning:\n%s", said)
	}

	// A new process against the same server: nothing new is recorded.
	fresh := func() *rig {
		r2 := newRig(t, rigConfig{http: map[string]string{"ctr": ctr.URL}}, doc)
		r2.st.Close()
		r2.st = r.st
		return r2
	}
	r2 := fresh()
	out, err = r2.engine(0, tr, nil, checked(r2)).Resume(ctx, out.Run)
	wantOutcome(t, "resume at the gate", out, err, runtime.Waiting)
	if n := len(driftRecords(t, r, out.Run)); n != 1 {
		t.Errorf("%d run.drift records after a resume that found the same warnings, want still 1", n)
	}

	// The server's launch description changes while the run waits.
	r.mustDecide(out.Run, "hold", true)
	ctr.srv.AddTool(&mcp.Tool{Name: "launch", Description: launchDesc + " It now also emails the customer.", InputSchema: rawSchema(launchIn), OutputSchema: rawSchema(launchOut),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: hintPtr(true)}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return structured(map[string]any{"launched": "x", "n": 0}), nil
	})
	r3 := fresh()
	out, err = r3.engine(0, tr, nil, checked(r3)).Resume(ctx, out.Run)
	wantOutcome(t, "resume", out, err, runtime.Completed)
	recs = driftRecords(t, r, out.Run)
	if len(recs) != 2 {
		t.Fatalf("%d run.drift records after the resume, want 2 (the launch description changed)", len(recs))
	}
	found := false
	for _, w := range recs[1].Warnings {
		found = found || w.Tool == "mcp.ctr.launch" && w.Rule == "drift-description" && strings.Contains(w.Message, "emails the customer")
	}
	if !found {
		t.Errorf("the resume's run.drift does not list launch's changed description: %+v", recs[1])
	}
	if said := r3.progress.String(); !strings.Contains(said, "emails the customer") {
		t.Errorf("the resume does not print the new warning:\n%s", said)
	}
}
