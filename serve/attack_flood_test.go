package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/serve"
)

// TestAttackAttachFolded: a token's sessions are recorded once per step
// attempt: forty sessions opened during one step add one agent.attached
// record, and the next record (at the gate) counts them as folded.
func TestAttackAttachFolded(t *testing.T) {
	r := newRig(t, "")
	run, tok, a := startAgentRun(t, r)
	attached := func() []map[string]any {
		au, err := r.srv.Audit(context.Background(), run, false)
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		for _, rec := range au.Records {
			if rec.Kind == "agent.attached" {
				var m map[string]any
				_ = json.Unmarshal(rec.Data, &m)
				out = append(out, m)
			}
		}
		return out
	}
	before := len(attached())
	// The client is named, from its initialize (the session's first
	// message, which it attaches with).
	if c := attached()[0]["client"]; c != "test-agent 1" {
		t.Errorf("the first agent.attached names client %v, want \"test-agent 1\"", c)
	}
	const n = 40
	for range n {
		s := r.connect(tok.MCPURL, tok.Token)
		s.tools(t, "customer__get", "note__add", serve.FinishTool)
		s.cs.Close()
	}
	recs := attached()
	if len(recs)-before > 1 {
		t.Errorf("BROKEN: %d agent.attached records for %d sessions of one token in one step", len(recs)-before, n)
	}
	if _, isErr := a.call(t, serve.FinishTool, map[string]any{"output": "x"}); isErr {
		t.Fatal("finish failed")
	}
	r.waitStatus(run, "waiting", "gate")
	r.connect(tok.MCPURL, tok.Token).tools(t, serve.FinishTool)
	recs = attached()
	last := recs[len(recs)-1]
	if last["step"] != nil {
		t.Errorf("the record at the gate names step %v", last["step"])
	}
	if got, _ := last["folded"].(float64); int(got) != n-1 {
		t.Errorf("the record at the gate counts %v folded sessions, want %d: %v", last["folded"], n-1, recs)
	}
}

// TestAttackGateFloodClipped: what a token holder sends while no step
// executes is clipped before it is recorded or shown: four calls with 1
// MiB tool names, a 1 MiB method name and a 1 MiB client name add little
// to the audit log and to the run's console page, and a flood of
// rejected messages stores at most serve.MaxRejectedRecords records.
func TestAttackGateFloodClipped(t *testing.T) {
	r := newRig(t, "")
	run, tok, a := startAgentRun(t, r)
	if _, isErr := a.call(t, serve.FinishTool, map[string]any{"output": "x"}); isErr {
		t.Fatal("finish failed")
	}
	r.waitStatus(run, "waiting", "gate")
	size := func() int {
		au, err := r.srv.Audit(context.Background(), run, false)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, rec := range au.Records {
			n += len(rec.Data)
		}
		return n
	}
	before := size()
	huge := strings.Repeat("n", 1<<20)
	for i := range 4 {
		if text, isErr := a.call(t, huge+fmt.Sprint(i), map[string]any{}); !isErr {
			t.Fatalf("a call at the gate ran: %.100s", text)
		}
	}
	post(t, tok.MCPURL, tok.Token, a.cs.ID(), []byte(`{"jsonrpc":"2.0","id":1,"method":"`+huge+`"}`), nil)
	client := strings.Replace(initBody, `"name":"flood"`, `"name":"`+huge+`"`, 1)
	post(t, tok.MCPURL, tok.Token, "", []byte(client), nil)
	if grown := size() - before; grown > 64<<10 {
		t.Errorf("BROKEN: four 1 MiB tool names, a 1 MiB method and a 1 MiB client name added %d bytes to the audit log", grown)
	}
	au, err := r.srv.Audit(context.Background(), run, false)
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, rec := range au.Records {
		all.Write(rec.Data)
	}
	for _, want := range []string{"(a name of 1048577 bytes)", "(a name of 1048576 bytes)", fmt.Sprintf("a client name of %d bytes", len(huge)+2)} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("no record says %q", want)
		}
	}
	b := r.browser()
	b.login()
	if p := b.get("/runs/" + run); p.status != http.StatusOK || len(p.body) > 512<<10 {
		t.Errorf("BROKEN: the run's console page: %d, %d bytes", p.status, len(p.body))
	}

	// The budget: past it, rejected messages are counted, not stored.
	for i := range serve.MaxRejectedRecords + 20 {
		post(t, tok.MCPURL, tok.Token, a.cs.ID(), []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/execute"}`, i)), nil)
	}
	if n := rejectedCount(t, r, run); n != serve.MaxRejectedRecords {
		t.Errorf("BROKEN: %d agent.rejected records, want the budget, %d", n, serve.MaxRejectedRecords)
	}
	if n := r.srv.RejectedUnstored(run); n < 20 {
		t.Errorf("%d rejected messages counted past the budget, want at least 20", n)
	}
	// Past the budget a rejected message is still answered.
	_, body := post(t, tok.MCPURL, tok.Token, a.cs.ID(), []byte(`{"jsonrpc":"2.0","id":"late","method":"tools/execute"}`), nil)
	if ans, ok := answerOf(t, body); !ok || ans.Error == nil || ans.Error.Code != -32601 || string(ans.ID) != `"late"` {
		t.Errorf("past the budget: %s", body)
	}
}
