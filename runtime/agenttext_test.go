package runtime_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/openai"
	"github.com/openplaybook/openplaybook/runtime"
)

// agentTextOf starts a run whose model (the OpenAI driver, against a
// loopback fake of Chat Completions) replies content with a call to
// charge.refund (requiresApproval), and returns the run's
// approval.requested record.
func agentTextOf(t *testing.T, r *rig, content string) runtime.ApprovalRequested {
	t.Helper()
	fake := &chatFake{t: t}
	msg, _ := json.Marshal(content)
	reply := strings.Replace(toolCalls([3]string{"call_1", "charge__refund", `{"chargeId":"ch_2","reason":"duplicate"}`}), `"content":null`, `"content":`+string(msg), 1)
	fake.turns = []func(chatReq) (int, string){func(chatReq) (int, string) { return 200, chatCompletion("tool_calls", reply) }}
	srv := fake.start()
	d, err := openai.New(openai.Config{Model: "gpt-test", BaseURL: srv.URL + "/v1", HTTPClient: srv.Client(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.engineWith(0, map[string]driver.Driver{"model": d}, nil, nil).Start(context.Background(), nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	var ar runtime.ApprovalRequested
	n := 0
	for _, rec := range r.auditOf(out.Run) {
		if rec.Kind == string(runtime.KindApprovalRequested) {
			n++
			if err := json.Unmarshal(rec.Data, &ar); err != nil {
				t.Fatalf("approval.requested %s: %v", rec.Data, err)
			}
			if strings.Contains(string(rec.Data), secretKey) {
				t.Errorf("approval.requested holds the secret value: %s", rec.Data)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d approval.requested records, want 1", n)
	}
	return ar
}

const secretKey = "sk_test_51Hagenttextsecret77"

// TestAgentTextOnApprovalRequest: the text a model wrote in the reply
// that carries a call waiting for approval is recorded, trimmed, in the
// approval.requested record's agentText; a secret value in it is
// redacted, also where the 2 KiB clip would cut through it; a long text
// is clipped, with a note of what was left out; a call with no text
// records none.
func TestAgentTextOnApprovalRequest(t *testing.T) {
	t.Parallel()
	url, _ := stripeMock(t)
	r := newRig(t, rigConfig{stripe: url, secrets: map[string]string{"STRIPE_API_KEY": secretKey}},
		buildDoc(t, "agenttext", agentStep("act", "model", []string{"charge.refund"}, "")))

	said := "The customer was charged twice for order 1234, so I refund the duplicate ch_2. <script>alert(1)</script>"
	if ar := agentTextOf(t, r, "\n  "+said+"\n"); ar.AgentText != said {
		t.Errorf("agentText %q, want %q", ar.AgentText, said)
	}

	ar := agentTextOf(t, r, "Using key "+secretKey+" as the customer asked.")
	if ar.AgentText != "Using key [redacted] as the customer asked." {
		t.Errorf("agentText %q, want the key redacted", ar.AgentText)
	}

	// 10 KB, with the key where the clip cuts.
	long := strings.Repeat("é", (runtime.MaxAgentTextBytes-11)/2) + "x" + secretKey + strings.Repeat("word ", 2000)
	ar = agentTextOf(t, r, long)
	head, note, ok := strings.Cut(ar.AgentText, "... (")
	if !ok || len(head) > runtime.MaxAgentTextBytes || !strings.HasSuffix(note, " more bytes not shown)") {
		t.Errorf("agentText of %d bytes: %d bytes before the note %q, want at most %d and the clip note", len(long), len(head), note, runtime.MaxAgentTextBytes)
	}
	if strings.Contains(ar.AgentText, secretKey[:12]) || !strings.Contains(ar.AgentText, "[redacted]") {
		t.Errorf("agentText %q shows part of the key", ar.AgentText[len(ar.AgentText)-80:])
	}

	if ar := agentTextOf(t, r, " \n "); ar.AgentText != "" {
		t.Errorf("agentText %q of a blank text, want none", ar.AgentText)
	}
}

// TestAgentTextInvalidUTF8: a Reasoning that is not valid UTF-8 is
// recorded with U+FFFD in place of the bad bytes (the record's data is
// kept, not dropped).
func TestAgentTextInvalidUTF8(t *testing.T) {
	t.Parallel()
	url, _ := stripeMock(t)
	r := newRig(t, rigConfig{stripe: url, secrets: map[string]string{"STRIPE_API_KEY": secretKey}},
		buildDoc(t, "agenttextutf8", agentStep("act", "ops", []string{"charge.refund"}, "")))
	drv := scripted{"act": {{Name: "charge.refund", Arguments: []byte(`{"chargeId":"ch_2","reason":"duplicate"}`), Reasoning: "bad \xff\xfe bytes"}}}
	out, err := r.engineWith(0, map[string]driver.Driver{"ops": drv}, nil, nil).Start(context.Background(), nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	for _, rec := range r.auditOf(out.Run) {
		if rec.Kind == string(runtime.KindApprovalRequested) {
			var ar runtime.ApprovalRequested
			if err := json.Unmarshal(rec.Data, &ar); err != nil || ar.AgentText != "bad \uFFFD bytes" || ar.ArgsDigest == "" {
				t.Errorf("approval.requested %s (%v), want agentText %q", rec.Data, err, "bad \uFFFD bytes")
			}
			return
		}
	}
	t.Fatal("no approval.requested record")
}
