package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/runtime"
)

// TestRunDecisionLogs: run, approve and resume with --log-format json
// write one JSON line on stderr per audit record they commit (the
// refusal of a look-alike name, the gate and the refund's approval, each
// call's outcome), each naming the record's run, seq, kind and tool as
// the audit log has them; no line is missing or extra, and no secret of
// the run (planted in the agent's arguments) is in any of them.
func TestRunDecisionLogs(t *testing.T) {
	t.Parallel()
	mock := stripemock.Start(t)
	rec := stripemock.Proxy(t, mock)
	e := newRTEnv(t, rtConfig{stripe: rec.URL, memory: true, transcripts: map[string]string{"rita": ritaTranscript()}})
	doc := rtExample(t, "refund-review.json")

	type line struct {
		Level, Msg, Run, Tool, Code, Reason string
		Seq                                 int64
	}
	var lines []line
	logged := func(stderr string) {
		sc := bufio.NewScanner(strings.NewReader(stderr))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			s := sc.Text()
			if !strings.HasPrefix(s, "{") {
				continue // progress text
			}
			var l line
			if err := json.Unmarshal([]byte(s), &l); err != nil {
				t.Fatalf("a log line is not JSON: %v\n%s", err, s)
			}
			lines = append(lines, l)
		}
	}
	stdout, stderr := e.cli(ExitWaiting, "run", "--log-format", "json", "--format", "json", "--input", rtRefundInput, doc)
	logged(stderr)
	var o runtime.Outcome
	if err := json.Unmarshal([]byte(stdout), &o); err != nil {
		t.Fatal(err)
	}
	run := o.Run
	_, stderr = e.cli(ExitOK, "approve", "--log-format", "json", run, "approve_refund")
	logged(stderr)
	stdout, stderr = e.cli(ExitWaiting, "resume", "--log-format", "json", "--format", "json", run)
	logged(stderr)
	o = runtime.Outcome{}
	if err := json.Unmarshal([]byte(stdout), &o); err != nil || len(o.Waiting) != 1 {
		t.Fatalf("resume: %s %v", stdout, err)
	}
	_, stderr = e.cli(ExitOK, "approve", "--log-format", "json", run, o.Waiting[0].ID)
	logged(stderr)
	_, stderr = e.cli(ExitOK, "resume", "--log-format", "json", run)
	logged(stderr)
	// Without a log flag there are no lines.
	_, stderr = e.cli(ExitOK, "resume", run)
	if strings.Contains(stderr, `{"time"`) {
		t.Errorf("resume without --log-format wrote log lines:\n%s", stderr)
	}

	_, recs := e.auditJSON(run)
	want := map[string]string{}
	for _, r := range recs {
		seq, _ := r["seq"].(float64)
		tool, _ := r["tool"].(string)
		want[fmt.Sprintf("%d", int64(seq))] = r["kind"].(string) + " " + tool
	}
	got := map[string]string{}
	for _, l := range lines {
		if l.Run != run {
			t.Errorf("a line of another run: %+v", l)
			continue
		}
		k := fmt.Sprintf("%d", l.Seq)
		if _, dup := got[k]; dup {
			t.Errorf("record %s logged twice", k)
		}
		got[k] = l.Msg + " " + l.Tool
		if l.Msg == "call.refused" && (l.Level != "WARN" || l.Code == "") {
			t.Errorf("a refusal's line: %+v; want level WARN and its code", l)
		}
		// A call's reason quotes the tool's or the schema's error, which
		// may hold argument values: never on a line.
		if strings.HasPrefix(l.Msg, "call.") && l.Reason != "" {
			t.Errorf("a call's line carries its reason: %+v", l)
		}
	}
	for seq, w := range want {
		if got[seq] != w {
			t.Errorf("audit record %s is %q; its log line %q", seq, w, got[seq])
		}
	}
	for seq, g := range got {
		if _, ok := want[seq]; !ok {
			t.Errorf("log line %s (%s) has no audit record", seq, g)
		}
	}
	refused := 0
	for _, l := range lines {
		if l.Msg == "call.refused" {
			refused++
		}
	}
	if refused == 0 || len(lines) < 10 {
		t.Errorf("%d lines, %d refusals: the run's decisions are not all logged", len(lines), refused)
	}
	e.noSecrets()
}
