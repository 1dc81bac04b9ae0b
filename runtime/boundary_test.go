package runtime_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// boundaryDoc: step work may call customer.get, billing_customer.get and
// mcp.ctr.lookup; step other may call charge.refund, note.add and
// mcp.ctr.launch.
func boundaryDoc(t *testing.T) []byte {
	return buildDoc(t, "boundary",
		agentStep("work", "mallory", []string{"customer.get", "billing_customer.get", "mcp.ctr.lookup"}, "other"),
		agentStep("other", "mallory", []string{"charge.refund", "note.add", "mcp.ctr.launch"}, ""),
	)
}

// boundaryRig is a rig for boundaryDoc with Stripe and ctr counting what
// reaches them.
func boundaryRig(t *testing.T) (*rig, *ctrServer, func() int) {
	url, stripe := stripeMock(t)
	ctr := startCtr(t, true)
	r := newRig(t, rigConfig{stripe: url, http: map[string]string{"ctr": ctr.URL}, secrets: map[string]string{"STRIPE_API_KEY": "sk_test_123"}}, boundaryDoc(t))
	base := stripe.Count()
	return r, ctr, func() int { return stripe.Count() - base }
}

// boundaryAttacks are names an agent may send in step work instead of an allowed
// one, each with arguments the tool it imitates would accept.
var boundaryAttacks = []tcall{
	// Another step's tools.
	{"charge.refund", map[string]any{"chargeId": "ch_duplicate", "reason": "duplicate"}},
	{"note.add", map[string]any{"body": "written from the wrong step"}},
	{"mcp.ctr.launch", map[string]any{"target": "w1"}},
	// Case variants.
	{"Customer.get", map[string]any{"customerId": "cus_ada"}},
	{"CUSTOMER.GET", map[string]any{"customerId": "cus_ada"}},
	{"CHARGE.REFUND", map[string]any{"chargeId": "ch_duplicate", "reason": "duplicate"}},
	{"mcp.ctr.LOOKUP", map[string]any{"id": "w1"}},
	{"MCP.ctr.lookup", map[string]any{"id": "w1"}},
	// Unicode look-alikes: one dot leader, Cyrillic а and о, fullwidth ｃ,
	// a combining mark.
	{"customer\u2024get", map[string]any{"customerId": "cus_ada"}},
	{"charge\u0430refund", map[string]any{"chargeId": "ch_duplicate", "reason": "duplicate"}},
	{"mcp.ctr.l\u043eokup", map[string]any{"id": "w1"}},
	{"\uff43ustomer.get", map[string]any{"customerId": "cus_ada"}},
	{"customer.ge\u0301t", map[string]any{"customerId": "cus_ada"}},
	// Blanks, invisible and control characters.
	{"customer.get ", map[string]any{"customerId": "cus_ada"}},
	{"\tcustomer.get", map[string]any{"customerId": "cus_ada"}},
	{"mcp.ctr.lookup\n", map[string]any{"id": "w1"}},
	{"\u00a0customer.get", map[string]any{"customerId": "cus_ada"}},
	{"customer.get\u200b", map[string]any{"customerId": "cus_ada"}},
	{"customer.get\x00", map[string]any{"customerId": "cus_ada"}},
	{"customer\x00.get", map[string]any{"customerId": "cus_ada"}},
	{"\x1bcustomer.get", map[string]any{"customerId": "cus_ada"}},
	// Wire names, patterns, partial and empty names.
	{"customer__get", map[string]any{"customerId": "cus_ada"}},
	{"mcp__ctr__lookup", map[string]any{"id": "w1"}},
	{"mcp.memory.*", map[string]any{"query": "x"}},
	{"mcp.ctr.*", map[string]any{"id": "w1"}},
	{"*", map[string]any{}},
	{"lookup", map[string]any{"id": "w1"}},
	{"ctr.lookup", map[string]any{"id": "w1"}},
	{"mcp.ctr.lookup.", map[string]any{"id": "w1"}},
	{"customer.get.", map[string]any{"customerId": "cus_ada"}},
	{"", map[string]any{"customerId": "cus_ada"}},
}

// boundaryAllowed are the calls the agent makes after the boundaryAttacks: each is
// on step work's list and must still run.
var boundaryAllowed = []tcall{
	{"customer.get", map[string]any{"customerId": "cus_ada"}},
	{"billing_customer.get", map[string]any{"customerId": "cus_StripeAda"}},
	{"mcp.ctr.lookup", map[string]any{"id": "w1"}},
}

// TestBoundaryRefusesEveryOtherName sends every name of boundaryAttacks in step
// work. Each is refused: no upstream request reaches ctr or Stripe, no
// handler runs (no note is written), the agent is told the step and the
// name as received (escaped), the call is stored as refused with the name's
// exact bytes, the audit log has call.refused, and the allowed calls the
// agent makes afterwards still run.
func TestBoundaryRefusesEveryOtherName(t *testing.T) {
	t.Parallel()
	r, ctr, stripeRequests := boundaryRig(t)
	ctx := context.Background()
	calls := append(append([]tcall(nil), boundaryAttacks...), boundaryAllowed...)
	tr := transcriptOf(map[string][]tcall{"work": calls})
	seen := &agentLog{}
	out, err := r.engine(0, map[string]string{"mallory": tr}, seen, nil).Start(ctx, nil)
	wantOutcome(t, "run", out, err, runtime.Completed)

	// The driver is offered the step's own tools only.
	if got := strings.Join(seen.tools("work"), " "); got != "customer.get billing_customer.get mcp.ctr.lookup" {
		t.Errorf("the driver of step work was offered %q", got)
	}
	got := seen.of("work")
	rows := r.calls(out.Run)
	if len(got) != len(calls) || len(rows) != len(calls) {
		t.Fatalf("the agent made %d calls and the store holds %d, want %d", len(got), len(rows), len(calls))
	}
	refusedAt := map[int]audit.Record{}
	for _, rec := range r.auditOf(out.Run) {
		if rec.Kind == "call.refused" {
			refusedAt[auditIndex(t, rec)] = rec
		}
	}
	for i, a := range boundaryAttacks {
		name := a.tool
		q := strconv.QuoteToASCII(name)
		s := got[i]
		if s.Err != nil || s.Res.Content != nil {
			t.Errorf("%s: the agent got %s, error %v; want a refusal", q, s.Res.Content, s.Err)
			continue
		}
		if !strings.Contains(s.Res.Error, q) || !strings.Contains(s.Res.Error, `step "work"`) || !strings.Contains(s.Res.Error, "refused") {
			t.Errorf("%s: refusal %q does not name the step and the tool as received (%s)", q, s.Res.Error, q)
		}
		c := rows[i]
		if c.Tool != name || c.State != store.CallRefused || c.Decision != store.DecisionRefused || c.Code != string(runtime.CodeNotAllowed) {
			t.Errorf("%s: stored as tool %q state %s decision %s reason %q", q, c.Tool, c.State, c.Decision, c.Reason)
		}
		if !c.Finished.Equal(c.Started) || c.Result != nil {
			t.Errorf("%s: a refused call has a result or ran: %+v", q, c)
		}
		if rec, ok := refusedAt[i]; !ok || rec.Tool != name || rec.Step != "work" {
			t.Errorf("%s: audit call.refused for call %d: %+v (found %v)", q, i, rec, ok)
		}
	}
	for i := range boundaryAllowed {
		s, c := got[len(boundaryAttacks)+i], rows[len(boundaryAttacks)+i]
		if s.Res.Error != "" || s.Res.Content == nil || c.State != store.CallSucceeded {
			t.Errorf("allowed call %s after the refusals: agent got %q %s, stored %s", c.Tool, s.Res.Error, s.Res.Content, c.State)
		}
	}

	// Nothing but the allowed calls reached anything.
	if ctr.calls() != 1 || ctr.runs("lookup") != 1 || ctr.runs("launch") != 0 {
		t.Errorf("ctr: %s; want one tools/call request, lookup's", ctr)
	}
	if n := stripeRequests(); n != 1 {
		t.Errorf("Stripe received %d requests, want 1 (billing_customer.get)", n)
	}
	if notes, err := r.st.ListNotes(ctx, "", "", 100); err != nil || len(notes) != 0 {
		t.Errorf("notes after refused note.add calls: %+v %v", notes, err)
	}
	if p := r.progress.String(); !strings.Contains(p, `refused "customer\u2024get"`) || !strings.Contains(p, `refused "customer.get\x00"`) {
		t.Errorf("progress does not show refusals escaped:\n%s", p)
	}
}

// TestBoundaryRefusesInvalidUTF8 sends names that are not valid UTF-8 (a
// model's answer can hold any bytes; a transcript file cannot). Each is
// refused with zero upstream requests, stored with its exact bytes,
// audited quoted (the log is JSON) with data.toolQuoted, and the chain
// still verifies.
func TestBoundaryRefusesInvalidUTF8(t *testing.T) {
	t.Parallel()
	r, ctr, stripeRequests := boundaryRig(t)
	names := []string{"customer.get\xff", "\xc3\x28ustomer.get", "mcp.ctr.look\x80up", "billing_customer.get\xed\xa0\x80", "charge.refund\xc0\xae"}
	var calls []driver.Call
	for _, n := range names {
		calls = append(calls, driver.Call{Name: n, Arguments: jsontext.Value(`{"customerId":"cus_ada","id":"w1"}`)})
	}
	calls = append(calls, driver.Call{Name: "mcp.ctr.lookup", Arguments: jsontext.Value(`{"id":"w1"}`)})
	seen := &agentLog{}
	out, err := r.engineWith(0, map[string]driver.Driver{"mallory": scripted{"work": calls}}, seen, nil).Start(context.Background(), nil)
	wantOutcome(t, "run", out, err, runtime.Completed)
	got, rows := seen.of("work"), r.calls(out.Run)
	if len(got) != len(calls) || len(rows) != len(calls) {
		t.Fatalf("the agent made %d calls, the store holds %d, want %d", len(got), len(rows), len(calls))
	}
	recs := r.auditOf(out.Run)
	for i, n := range names {
		q := strconv.QuoteToASCII(n)
		if !strings.Contains(got[i].Res.Error, q) || !strings.Contains(got[i].Res.Error, `step "work"`) {
			t.Errorf("%s: refusal %q", q, got[i].Res.Error)
		}
		if rows[i].Tool != n || rows[i].State != store.CallRefused {
			t.Errorf("%s: stored as %q %s", q, rows[i].Tool, rows[i].State)
		}
		found := false
		for _, rec := range recs {
			if rec.Kind == "call.refused" && auditIndex(t, rec) == i {
				found = true
				var d struct {
					ToolQuoted bool `json:"toolQuoted"`
				}
				_ = json.Unmarshal(rec.Data, &d)
				if rec.Tool != q || !d.ToolQuoted {
					t.Errorf("%s: audit tool %q data %s; want it quoted with toolQuoted", q, rec.Tool, rec.Data)
				}
			}
		}
		if !found {
			t.Errorf("%s: no call.refused record", q)
		}
	}
	if last := rows[len(rows)-1]; last.State != store.CallSucceeded {
		t.Errorf("the allowed call after the refusals: %s %s", last.State, last.Error)
	}
	if ctr.calls() != 1 || stripeRequests() != 0 {
		t.Errorf("upstream: ctr %s, Stripe %d requests; want lookup's only", ctr, stripeRequests())
	}
}

// TestBoundaryRefusesArguments: arguments that are not JSON, not an
// object, or do not match the embedded inputSchema are refused before any
// request (check 3), for an MCP tool and a Stripe tool alike, and the
// agent may go on.
func TestBoundaryRefusesArguments(t *testing.T) {
	t.Parallel()
	r, ctr, stripeRequests := boundaryRig(t)
	bad := []driver.Call{
		{Name: "mcp.ctr.lookup", Arguments: jsontext.Value(`{"id": "w1"`)},               // not JSON
		{Name: "mcp.ctr.lookup", Arguments: jsontext.Value(`{"id": "w1"} {"id": "w2"}`)}, // trailing data
		{Name: "mcp.ctr.lookup", Arguments: jsontext.Value(`{"id": "w1", "id": "w2"}`)},  // a member twice
		{Name: "mcp.ctr.lookup", Arguments: jsontext.Value("{\"id\": \"w\xff\"}")},       // invalid UTF-8
		{Name: "mcp.ctr.lookup", Arguments: jsontext.Value(`["w1"]`)},                    // not an object
		{Name: "mcp.ctr.lookup", Arguments: jsontext.Value(`"{\"id\":\"w1\"}"`)},         // a string holding JSON
		{Name: "mcp.ctr.lookup", Arguments: jsontext.Value(`null`)},
		{Name: "mcp.ctr.lookup", Arguments: jsontext.Value(`42`)},
		{Name: "mcp.ctr.lookup", Arguments: jsontext.Value(`{"id": 1}`)},                     // wrong type
		{Name: "mcp.ctr.lookup", Arguments: jsontext.Value(`{}`)},                            // missing required
		{Name: "mcp.ctr.lookup", Arguments: jsontext.Value(`{"id": "w1", "admin": true}`)},   // additional property
		{Name: "billing_customer.get", Arguments: jsontext.Value(`{"customerId": ["cus"]}`)}, // wrong type
		{Name: "billing_customer.get", Arguments: jsontext.Value(`{"customerId": "cus_StripeAda", "expand": ["x"]}`)},
	}
	good := []driver.Call{
		{Name: "mcp.ctr.lookup", Arguments: jsontext.Value(` { "id" : "w1" } `)},
		{Name: "billing_customer.get", Arguments: jsontext.Value(`{"customerId":"cus_StripeAda"}`)},
	}
	seen := &agentLog{}
	out, err := r.engineWith(0, map[string]driver.Driver{"mallory": scripted{"work": append(append([]driver.Call(nil), bad...), good...)}}, seen, nil).Start(context.Background(), nil)
	wantOutcome(t, "run", out, err, runtime.Completed)
	got, rows := seen.of("work"), r.calls(out.Run)
	for i, c := range bad {
		if got[i].Res.Content != nil || !strings.Contains(got[i].Res.Error, "refused") || !strings.Contains(got[i].Res.Error, strconv.Quote(c.Name)) {
			t.Errorf("%s %s: agent got %q %s", c.Name, c.Arguments, got[i].Res.Error, got[i].Res.Content)
		}
		if rows[i].State != store.CallRefused || rows[i].Code != string(runtime.CodeInvalidArguments) {
			t.Errorf("%s %s: stored %s %q", c.Name, c.Arguments, rows[i].State, rows[i].Reason)
		}
	}
	for i := range good {
		if c := rows[len(bad)+i]; c.State != store.CallSucceeded {
			t.Errorf("good call %d: %s %s %s", i, c.Tool, c.State, c.Error)
		}
	}
	if ctr.calls() != 1 || stripeRequests() != 1 {
		t.Errorf("upstream: ctr %s, Stripe %d requests; want one each, from the good calls", ctr, stripeRequests())
	}
	if a := ctr.argsOf("lookup"); len(a) != 1 || a[0] != `{"id":"w1"}` {
		t.Errorf("lookup got arguments %q, want the canonical form of the good call", a)
	}
}

func auditIndex(t *testing.T, r audit.Record) int {
	t.Helper()
	var d struct {
		Index *int `json:"index"`
	}
	if err := json.Unmarshal(r.Data, &d); err != nil || d.Index == nil {
		return -1
	}
	return *d.Index
}

// TestBoundaryEmptyAllowList: an agent step with no allowed tools is
// offered none and every call it makes is refused.
func TestBoundaryEmptyAllowList(t *testing.T) {
	t.Parallel()
	ctr := startCtr(t, true)
	doc := buildDoc(t, "no-tools",
		agentStep("think", "mallory", []string{}, "act"),
		agentStep("act", "mallory", []string{"mcp.ctr.lookup", "note.add"}, ""),
	)
	r := newRig(t, rigConfig{http: map[string]string{"ctr": ctr.URL}}, doc)
	tr := transcriptOf(map[string][]tcall{"think": {
		{"mcp.ctr.lookup", map[string]any{"id": "w1"}},
		{"note.add", map[string]any{"body": "from a step with no tools"}},
	}})
	seen := &agentLog{}
	out, err := r.engine(0, map[string]string{"mallory": tr}, seen, nil).Start(context.Background(), nil)
	wantOutcome(t, "run", out, err, runtime.Completed)
	if tools := seen.tools("think"); len(tools) != 0 {
		t.Errorf("a step with no tools was offered %q", tools)
	}
	for _, s := range seen.of("think") {
		if s.Res.Content != nil || !strings.Contains(s.Res.Error, `step "think"`) {
			t.Errorf("%s in a step with no tools: %+v", s.Name, s.Res)
		}
	}
	if ns, _ := r.st.ListNotes(context.Background(), "", "", 10); ctr.calls() != 0 || len(ns) != 0 {
		t.Errorf("a step with no tools reached ctr (%s) or wrote notes (%d)", ctr, len(ns))
	}
}
