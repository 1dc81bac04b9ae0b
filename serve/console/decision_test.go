package console

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

const refundSchema = `{"type":"object","properties":{
  "chargeId":{"type":"string","title":"Charge","description":"Stripe charge id to refund."},
  "amount":{"type":"integer","minimum":0,"description":"Amount to refund; omit for a full refund."},
  "reason":{"type":"string","enum":["duplicate","fraudulent"],"description":"Refund reason \u202e recorded in Stripe."},
  "metadata":{"type":"object","default":{"source":"openplaybook"},"description":"Extra keys."}},
  "required":["chargeId","reason"]}`

// TestDecisionArgs: each argument with what the schema says of it, the
// omitted ones with their defaults, and the summary in the schema's order.
func TestDecisionArgs(t *testing.T) {
	c := &Console{b: noSecrets{}}
	args, omitted, line := c.decisionArgs(jsontext.Value(`{"reason":"duplicate","chargeId":"ch_1","extra":"hunter2hunter2"}`), jsontext.Value(refundSchema))
	if len(args) != 3 {
		t.Fatalf("%d arguments: %+v", len(args), args)
	}
	if a := args[0]; a.Name != "reason" || !a.Required || a.Schema != "string, one of duplicate, fraudulent" || a.Description != `Refund reason \u202e recorded in Stripe.` {
		t.Errorf("reason: %+v", a)
	}
	if a := args[1]; a.Name != "chargeId" || a.Title != "Charge" || !a.Required || a.Value != "ch_1" {
		t.Errorf("chargeId: %+v", a)
	}
	if a := args[2]; a.Name != "extra" || !a.Unknown || a.Value != "[redacted]" {
		t.Errorf("an argument the schema does not name: %+v", a)
	}
	if len(omitted) != 2 || omitted[0].Name != "amount" || omitted[0].Default != "" || !strings.Contains(omitted[0].Description, "full refund") ||
		omitted[1].Name != "metadata" || omitted[1].Default != `{"source":"openplaybook"}` {
		t.Errorf("omitted: %+v", omitted)
	}
	if got := strings.Join(line, ", "); got != "chargeId ch_1, reason duplicate, extra [redacted]" {
		t.Errorf("the summary's arguments: %q", got)
	}
	// No schema: the arguments as they are, nothing omitted.
	args, omitted, _ = c.decisionArgs(jsontext.Value(`{"a":1}`), nil)
	if len(args) != 1 || args[0].Unknown || args[0].Kind != "number" || len(omitted) != 0 {
		t.Errorf("without a schema: %+v %+v", args, omitted)
	}
}

// TestUnlocks: a gate's approval runs the steps up to the run's end or
// the next gate, each with its side-effecting tools.
func TestUnlocks(t *testing.T) {
	doc := `{"openplaybook":"1.6","manifest":{"id":"u","name":"u","version":"1.0.0","description":"d"},
  "tools":[{"name":"note.add","source":"primitive","description":"Add a note.","permissions":[],"riskClass":"internal","sideEffecting":true,"requiresApproval":false,"inputSchema":{"type":"object"},"outputSchema":{"type":"object"}},
           {"name":"customer.get","source":"primitive","description":"Get.","permissions":[],"riskClass":"read","sideEffecting":false,"requiresApproval":false,"inputSchema":{"type":"object"},"outputSchema":{"type":"object"}}],
  "steps":[{"id":"g1","kind":"gate","purpose":"first","next":"a"},
           {"id":"a","kind":"agent","agent":"x","purpose":"write","allowedTools":["note.add","customer.get"],"next":"b"},
           {"id":"b","kind":"agent","agent":"x","purpose":"read","allowedTools":["customer.get"],"next":"g2"},
           {"id":"g2","kind":"gate","purpose":"second","next":"c"},
           {"id":"c","kind":"agent","agent":"x","purpose":"after","allowedTools":["note.add"]}]}`
	ch := check("u.json", []byte(doc))
	steps, ends := unlocks(ch.Explanation, "g1")
	if len(steps) != 3 || steps[0].Ref != "a" || steps[1].Ref != "b" || steps[2].Ref != "g2" || ends {
		t.Fatalf("unlocks of g1: %+v (ends %t)", steps, ends)
	}
	if len(steps[0].Effects) != 1 || steps[0].Effects[0].Name != "note.add" || len(steps[1].Effects) != 0 {
		t.Errorf("side-effecting tools: %+v %+v", steps[0].Effects, steps[1].Effects)
	}
	steps, ends = unlocks(ch.Explanation, "g2")
	if len(steps) != 1 || steps[0].Ref != "c" || !ends {
		t.Errorf("unlocks of g2: %+v (ends %t)", steps, ends)
	}
}

// TestOutputText: an earlier output's strings, top level first, escaped
// and redacted.
func TestOutputText(t *testing.T) {
	c := &Console{b: noSecrets{}}
	got := c.outputText(jsontext.Value(`{"customer":{"id":"cus_1","key":"hunter2hunter2"},"summary":"Extend the trial \u202e.","n":3}`))
	if len(got) != 3 || got[0].Name != "summary" || got[0].Value != `Extend the trial \u202e.` || got[1].Name != "customer.id" || got[2].Value != "[redacted]" {
		t.Errorf("%+v", got)
	}
	if got := c.outputText(jsontext.Value(`"just text"`)); len(got) != 1 || got[0].Value != "just text" {
		t.Errorf("a string output: %+v", got)
	}
}
