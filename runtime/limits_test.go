package runtime_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// TestOutputNotMatchingItsSchema: a result that does not match the
// embedded outputSchema is recorded as failed (call.output-invalid), the
// agent gets an error and never the result, the result is written
// nowhere, and the agent may go on.
func TestOutputNotMatchingItsSchema(t *testing.T) {
	t.Parallel()
	ctr := startCtr(t, true)
	doc := buildDoc(t, "output", agentStep("check", "olive", []string{"mcp.ctr.badout", "mcp.ctr.lookup"}, ""))
	r := newRig(t, rigConfig{http: map[string]string{"ctr": ctr.URL}}, doc)
	tr := map[string]string{"olive": transcriptOf(map[string][]tcall{"check": {
		{"mcp.ctr.badout", map[string]any{}},
		{"mcp.ctr.lookup", map[string]any{"id": "w1"}},
	}})}
	seen := &agentLog{}
	out, err := r.engine(0, tr, seen, nil).Start(context.Background(), nil)
	wantOutcome(t, "run", out, err, runtime.Completed)
	s := seen.of("check")
	if len(s) != 2 || s[0].Res.Content != nil || !strings.Contains(s[0].Res.Error, "does not match its outputSchema") || strings.Contains(s[0].Res.Error, "never passed on") {
		t.Fatalf("the agent saw %+v; want an error without the result", s)
	}
	if s[1].Res.Error != "" || !strings.Contains(string(s[1].Res.Content), `"id":"w1"`) {
		t.Errorf("the call after the invalid output: %+v", s[1])
	}
	rows := r.calls(out.Run)
	if rows[0].State != store.CallFailed || rows[0].Result != nil || !strings.Contains(rows[0].Error, "outputSchema") {
		t.Errorf("stored: %s %s %q", rows[0].State, rows[0].Result, rows[0].Error)
	}
	recs := r.auditOf(out.Run)
	if !auditHas(recs, "call.output-invalid", "mcp.ctr.badout") || !auditHas(recs, "call.failed", "mcp.ctr.badout") || auditHas(recs, "call.succeeded", "mcp.ctr.badout") {
		t.Errorf("audit: %v", auditKinds(recs))
	}
	if ctr.runs("badout") != 1 || ctr.runs("lookup") != 1 {
		t.Errorf("ctr: %s", ctr)
	}
	if dump, err := r.st.Dump(context.Background()); err != nil || bytes.Contains(dump, []byte("never passed on")) {
		t.Errorf("the store's dump holds the invalid result (or fails: %v)", err)
	}
	r.st.Close()
	for _, f := range storeFiles(t, r) {
		if b, _ := os.ReadFile(f); bytes.Contains(b, []byte("never passed on")) {
			t.Errorf("%s holds the invalid result", f)
		}
	}
}

// storeFiles returns the files of the store's directory (the database
// and its -wal and -shm files).
//
// On PostgreSQL there are none here: the callers check the store's Dump,
// and store/postgres's own tests look at what the server writes.
func storeFiles(t *testing.T, r *rig) []string {
	t.Helper()
	if r.h.Store.Postgres != nil {
		return nil
	}
	ents, err := os.ReadDir(filepath.Dir(r.h.Store.SQLite))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, filepath.Join(filepath.Dir(r.h.Store.SQLite), e.Name()))
	}
	if len(out) == 0 {
		t.Fatal("the store's directory is empty")
	}
	return out
}

// TestCallLimit: the call after runtime.maxToolCalls fails the step and
// the run, and never reaches the server.
func TestCallLimit(t *testing.T) {
	t.Parallel()
	ctr := startCtr(t, true)
	doc := buildDoc(t, "limit", agentStep("loop", "looper", []string{"mcp.ctr.lookup"}, "never"), agentStep("never", "looper", []string{"note.add"}, ""))
	r := newRig(t, rigConfig{http: map[string]string{"ctr": ctr.URL}, maxToolCalls: 3}, doc)
	var calls []tcall
	for _, id := range []string{"w1", "w2", "w3", "w4", "w5", "w6"} {
		calls = append(calls, tcall{"mcp.ctr.lookup", map[string]any{"id": id}})
	}
	tr := map[string]string{"looper": transcriptOf(map[string][]tcall{"loop": calls, "never": {{"note.add", map[string]any{"body": "x"}}}})}
	out, err := r.engine(0, tr, nil, nil).Start(context.Background(), nil)
	wantOutcome(t, "run", out, err, runtime.Failed)
	if !strings.Contains(out.Reason, "limit") || !strings.Contains(out.Reason, "loop") {
		t.Errorf("reason %q does not say the step hit its call limit", out.Reason)
	}
	if ctr.calls() != 3 || strings.Join(ctr.argsOf("lookup"), "") != `{"id":"w1"}{"id":"w2"}{"id":"w3"}` {
		t.Errorf("ctr: %s %q; want w1 to w3 only", ctr, ctr.argsOf("lookup"))
	}
	if rows := r.calls(out.Run); len(rows) != 3 {
		t.Errorf("the store holds %d calls, want 3", len(rows))
	}
	recs := r.auditOf(out.Run)
	for _, k := range []string{"step.call-limit", "step.failed", "run.failed"} {
		if !auditHas(recs, k, "") {
			t.Errorf("audit has no %s: %v", k, auditKinds(recs))
		}
	}
	if auditHas(recs, "step.started", "") && strings.Contains(strings.Join(auditKinds(recs), " "), "never") {
		t.Errorf("the next step started")
	}
	if ns, _ := r.st.ListNotes(context.Background(), "", "", 10); len(ns) != 0 {
		t.Errorf("the step after the failed one ran: %+v", ns)
	}
}

// TestCallLimitHoldsAcrossResume: the limit bounds the calls of a step
// attempt, not of one process's share of it. An agent asked again on
// resume (a model does not repeat itself) that makes new calls may make
// only as many as the attempt has left.
func TestCallLimitHoldsAcrossResume(t *testing.T) {
	t.Parallel()
	ctr := startCtr(t, true)
	doc := buildDoc(t, "limit-resume", agentStep("loop", "looper", []string{"mcp.ctr.lookup", "mcp.ctr.launch"}, ""))
	r := newRig(t, rigConfig{http: map[string]string{"ctr": ctr.URL}, maxToolCalls: 3}, doc)
	first := map[string]string{"looper": transcriptOf(map[string][]tcall{"loop": {
		{"mcp.ctr.lookup", map[string]any{"id": "a1"}},
		{"mcp.ctr.launch", map[string]any{"target": "a2"}}, // waits for approval
	}})}
	again := map[string]string{"looper": transcriptOf(map[string][]tcall{"loop": {
		{"mcp.ctr.lookup", map[string]any{"id": "b1"}},
		{"mcp.ctr.lookup", map[string]any{"id": "b2"}},
		{"mcp.ctr.lookup", map[string]any{"id": "b3"}},
		{"mcp.ctr.lookup", map[string]any{"id": "b4"}},
	}})}
	ctx := context.Background()
	out, err := r.engine(0, first, nil, nil).Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	res, err := r.engine(0, again, nil, nil).Resume(ctx, out.Run)
	wantOutcome(t, "resume", res, err, runtime.Failed)
	if n := len(r.calls(out.Run)); n != 3 {
		t.Errorf("the attempt holds %d calls, want at most 3 (maxToolCalls)", n)
	}
	if got := ctr.argsOf("lookup"); len(got) != 2 || ctr.calls() != 2 {
		t.Errorf("ctr: %s; want a1 and one call of the resumed agent (b1)", ctr)
	}
	if !auditHas(r.auditOf(out.Run), "step.call-limit", "mcp.ctr.lookup") {
		t.Errorf("audit: %v", auditKinds(r.auditOf(out.Run)))
	}
}
