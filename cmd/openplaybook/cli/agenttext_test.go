package cli

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/internal/stripemock"
)

// TestStatusShowsAgentText: a model's text before a call that waits for
// approval is in status's text (marked unchecked, each line escaped, the
// harness's secret value redacted) and in its JSON as agentText.
func TestStatusShowsAgentText(t *testing.T) {
	t.Parallel()
	said := "Charged twice for order 1234,\nso I refund ch_2 \u202e with key " + runStripeSecret + "."
	content, _ := json.Marshal(said)
	args, _ := json.Marshal(`{"chargeId":"ch_2","reason":"duplicate"}`)
	call := `{"role":"assistant","content":` + string(content) + `,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"charge__refund","arguments":` + string(args) + `}}]}`
	fake := &modelFake{chat: []func() (int, string){func() (int, string) { return 200, chatReply("tool_calls", call) }}}
	srv := fake.start(t)
	rec := stripemock.Proxy(t, stripemock.Start(t))
	e := newRTEnv(t, rtConfig{stripe: rec.URL, agents: map[string]any{"model": map[string]any{"driver": "openai", "model": "gpt-test", "baseURL": srv.URL + "/v1", "maxRetries": 0}}})
	src, err := os.ReadFile(rtExample(t, "refund-review.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ex map[string]any
	if err := json.Unmarshal(src, &ex); err != nil {
		t.Fatal(err)
	}
	var refund any
	for _, tl := range ex["tools"].([]any) {
		if tl.(map[string]any)["name"] == "charge.refund" {
			refund = tl
		}
	}
	req := ex["requires"].(map[string]any)
	req["mcpServers"] = []any{}
	req["connections"].([]any)[0].(map[string]any)["capabilities"] = []string{"charge.refund"}
	doc, _ := json.Marshal(map[string]any{
		"openplaybook": "1.6",
		"manifest":     map[string]any{"id": "agent-text-cli", "name": "Agent text", "version": "1.0.0", "description": "d", "requiredConnectors": []string{"stripe"}},
		"requires":     req,
		"tools":        []any{refund},
		"steps":        []any{map[string]any{"id": "act", "kind": "agent", "agent": "model", "purpose": "Refund the duplicate charge.", "allowedTools": []string{"charge.refund"}}},
	})
	o := e.outcome(ExitWaiting, "run", e.write("agenttext.json", string(doc)))
	text, _ := e.cli(ExitOK, "status", o.Run)
	for _, want := range []string{
		"  the agent's words before the call, unchecked (its own text, ",
		"      | Charged twice for order 1234,\n      | so I refund ch_2 \\u202e with key [redacted].\n  arguments:\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, runStripeSecret) || strings.Contains(text, "\u202e") {
		t.Errorf("status shows the key or a raw U+202E:\n%s", text)
	}
	js, _ := e.cli(ExitOK, "status", "--format", "json", o.Run)
	if want, _ := json.Marshal(strings.Replace(said, runStripeSecret, "[redacted]", 1)); !strings.Contains(js, `"agentText": `+string(want)) && !strings.Contains(js, `"agentText":`+string(want)) {
		t.Errorf("status --format json lacks agentText %s:\n%s", want, js)
	}
}
