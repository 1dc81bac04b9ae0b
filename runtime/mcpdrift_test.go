package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/mcphost/mcptest"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// TestDriftDuringRun: an MCP server whose tool becomes riskier while a run
// waits (mcphost/testdata/changing: probe turns destructive on flip, and
// the server sends notifications/tools/list_changed) gets no call to that
// tool from the same process afterwards: the call is refused with code
// drifted, and the agent goes on.
func TestDriftDuringRun(t *testing.T) {
	t.Parallel()
	bin := mcptest.BuildChangingServer(t)
	doc := buildDoc(t, "drift",
		agentStep("before", "dana", []string{"mcp.chg.quiet"}, "hold"),
		gateStep("hold", "after", ""),
		agentStep("after", "dana", []string{"mcp.chg.probe", "mcp.chg.quiet"}, ""),
	)
	r := newRig(t, rigConfig{stdio: map[string]stdioServer{"chg": {command: bin, env: map[string]string{"VARIANT": "a"}}}}, doc)
	ctx := context.Background()
	tr := map[string]string{"dana": transcriptOf(map[string][]tcall{
		"before": {{"mcp.chg.quiet", map[string]any{}}},
		// Valid against the imported schema (variant a, which declares
		// "id" alone: an undeclared "force" would be refused as invalid
		// arguments before the drift check).
		"after": {{"mcp.chg.probe", map[string]any{"id": "w1"}}, {"mcp.chg.quiet", map[string]any{}}},
	})}
	seen := &agentLog{}
	eng := r.engine(0, tr, seen, nil) // one process: start and resume
	out, err := eng.Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)

	srv := r.env.Servers["chg"]
	changed := srv.Changed()
	if res, err := srv.Call(ctx, "flip", nil); err != nil || res.IsError {
		t.Fatalf("flip: %v %+v", err, res)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not announce its changed tools within 5s")
	}

	r.mustDecide(out.Run, "hold", true)
	out, err = eng.Resume(ctx, out.Run)
	wantOutcome(t, "resume", out, err, runtime.Completed)
	s := seen.of("after")
	if len(s) != 2 || s[0].Res.Content != nil || !strings.Contains(s[0].Res.Error, `"mcp.chg.probe"`) || !strings.Contains(s[0].Res.Error, "changed") {
		t.Fatalf("the agent saw %+v; want the probe refused as changed", s)
	}
	if s[1].Res.Error != "" {
		t.Errorf("the call after the refusal: %q", s[1].Res.Error)
	}
	rows := r.calls(out.Run)
	probe := rows[len(rows)-2]
	if probe.Tool != "mcp.chg.probe" || probe.State != store.CallRefused || probe.Code != string(runtime.CodeDrifted) {
		t.Errorf("the probe is stored %s %s %q, want refused with code %s", probe.Tool, probe.State, probe.Reason, runtime.CodeDrifted)
	}
	if !auditHas(r.auditOf(out.Run), "call.refused", "mcp.chg.probe") {
		t.Errorf("audit: %v", auditKinds(r.auditOf(out.Run)))
	}
}

// TestDriftWithoutListChanged: a server that does not declare
// tools.listChanged never announces a change, so the runtime cannot wait
// for one: the tool is compared with what the server lists before each
// call, and a tool that became riskier is refused before any request.
func TestDriftWithoutListChanged(t *testing.T) {
	t.Parallel()
	ctr := startCtr(t, false)
	doc := buildDoc(t, "drift-silent",
		agentStep("first", "dana", []string{"mcp.ctr.lookup"}, "hold"),
		gateStep("hold", "second", ""),
		agentStep("second", "dana", []string{"mcp.ctr.lookup"}, ""),
	)
	r := newRig(t, rigConfig{http: map[string]string{"ctr": ctr.URL}}, doc)
	ctx := context.Background()
	tr := map[string]string{"dana": transcriptOf(map[string][]tcall{
		"first":  {{"mcp.ctr.lookup", map[string]any{"id": "w1"}}},
		"second": {{"mcp.ctr.lookup", map[string]any{"id": "w2"}}},
	})}
	eng := r.engine(0, tr, nil, nil)
	out, err := eng.Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	if ctr.calls() != 1 {
		t.Fatalf("ctr before the change: %s", ctr)
	}
	ctr.addLookup(true) // now destructive; the server tells nobody
	r.mustDecide(out.Run, "hold", true)
	out, err = eng.Resume(ctx, out.Run)
	wantOutcome(t, "resume", out, err, runtime.Completed)
	if ctr.calls() != 1 {
		t.Errorf("ctr after the change: %s; the riskier lookup was called", ctr)
	}
	rows := r.calls(out.Run)
	if last := rows[len(rows)-1]; last.State != store.CallRefused || last.Code != string(runtime.CodeDrifted) {
		t.Errorf("the lookup after the change is stored %s %q, want refused with code %s", last.State, last.Reason, runtime.CodeDrifted)
	}
}
