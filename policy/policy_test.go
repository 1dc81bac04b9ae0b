package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func mustNew(t *testing.T, rules ...Rule) *Policy {
	t.Helper()
	p, err := New(rules)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEvaluate: rules match by tool pattern, risk class and step; a
// condition reads args and input; a deny wins over a required approval,
// which wins over nothing; refunds above 10,000 cents need an approval.
func TestEvaluate(t *testing.T) {
	p := mustNew(t,
		Rule{Name: "big-refunds", Tools: []string{"stripe.*", "charge.refund"}, When: "args.amount > 10000", Effect: RequireApproval},
		Rule{Name: "money-in-test", RiskClasses: []string{"money_movement"}, When: "input.env == 'test'", Effect: Deny, Reason: "no money moves in test runs"},
		Rule{Name: "publish-step", Steps: []string{"publish"}, Effect: RequireApproval},
	)
	cases := []struct {
		name string
		call Call
		want Verdict
	}{
		{"small refund", Call{Tool: "charge.refund", Arguments: []byte(`{"amount": 500}`)}, Verdict{}},
		{"big refund", Call{Tool: "charge.refund", Arguments: []byte(`{"amount": 25000}`)}, Verdict{Effect: RequireApproval, Rule: "big-refunds"}},
		{"big refund by pattern", Call{Tool: "stripe.refund.create", Arguments: []byte(`{"amount": 10001.5}`)}, Verdict{Effect: RequireApproval, Rule: "big-refunds"}},
		{"big refund in test: deny wins", Call{Tool: "charge.refund", RiskClass: "money_movement", Arguments: []byte(`{"amount": 25000}`), Input: []byte(`{"env": "test"}`)},
			Verdict{Effect: Deny, Rule: "money-in-test", Reason: "no money moves in test runs"}},
		{"money in prod", Call{Tool: "mercury.payment.create", RiskClass: "money_movement", Input: []byte(`{"env": "prod"}`)}, Verdict{}},
		{"publish step", Call{Tool: "note.add", Step: "publish"}, Verdict{Effect: RequireApproval, Rule: "publish-step"}},
		{"other step", Call{Tool: "note.add", Step: "draft"}, Verdict{}},
	}
	for _, c := range cases {
		got, err := p.Evaluate(c.call)
		if err != nil || got.Effect != c.want.Effect || got.Rule != c.want.Rule || got.Reason != c.want.Reason {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

// TestEvaluateFailsClosed: a condition that cannot be evaluated (a
// missing member, a type error, a value that is not a boolean, arguments
// that are not JSON, past the cost limit) gives deny and an error
// naming the rule.
func TestEvaluateFailsClosed(t *testing.T) {
	items := make([]string, 400)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	huge := `{"items": [` + strings.Join(items, ",") + `]}`
	cases := []struct {
		name, when, args string
	}{
		{"missing member", "args.amount > 1", `{}`},
		{"type error", "args.amount > 1", `{"amount": "ten"}`},
		{"not a boolean", "args.flag", `{"flag": "yes"}`},
		{"arguments not JSON", "args.amount > 1", `{"amount": `},
		{"over the cost limit", "args.items.all(x, args.items.all(y, x + y >= 0))", huge},
	}
	for _, c := range cases {
		p := mustNew(t, Rule{Name: "r", When: c.when, Effect: RequireApproval})
		got, err := p.Evaluate(Call{Tool: "t", Arguments: []byte(c.args)})
		if !errors.Is(err, ErrEvaluate) || got.Effect != Deny || got.Rule != "r" || !strings.Contains(err.Error(), `rule "r"`) {
			t.Errorf("%s: %+v, %v; want deny with ErrEvaluate", c.name, got, err)
		}
	}
}

// TestNewRefuses: conditions that do not compile or are not boolean,
// effects other than the two (there is no allow), bad patterns.
func TestNewRefuses(t *testing.T) {
	for _, r := range []Rule{
		{Name: "syntax", When: "args.amount >", Effect: Deny},
		{Name: "int", When: "1 + 2", Effect: Deny},
		{Name: "unknown variable", When: "secrets.x == 1", Effect: Deny},
		{Name: "allow", Effect: "allow"},
		{Name: "pattern", Tools: []string{"["}, Effect: Deny},
	} {
		if _, err := New([]Rule{r}); err == nil || !strings.Contains(err.Error(), r.Name) {
			t.Errorf("rule %q: %v", r.Name, err)
		}
	}
}

// TestRequirementNarrows: every requireApproval rule that matches a call
// narrows who decides it: each rule's deciders must name the decider,
// the largest approvals wins, and self-approval holds only when every
// rule allows it; a gate rule matches no call.
func TestRequirementNarrows(t *testing.T) {
	p := mustNew(t,
		Rule{Name: "finance", Tools: []string{"charge.*"}, Effect: RequireApproval, Deciders: Principals{Groups: []string{"finance"}}, SelfApproval: true},
		Rule{Name: "two", RiskClasses: []string{"money_movement"}, Effect: RequireApproval, Approvals: 2, Deciders: Principals{Subjects: []string{"alice", "bob"}}},
		Rule{Name: "three-in-test", Tools: []string{"charge.refund"}, When: "input.env == 'test'", Effect: RequireApproval, Approvals: 3},
		Rule{Name: "gate", Gates: []string{"review"}, Approvals: 2},
	)
	v, err := p.Evaluate(Call{Tool: "charge.refund", RiskClass: "money_movement", Input: []byte(`{"env": "prod"}`)})
	if err != nil || v.Effect != RequireApproval || v.Rule != "finance" || v.Require == nil {
		t.Fatalf("%+v, %v", v, err)
	}
	r := v.Require
	if strings.Join(r.Rules, ",") != "finance,two" || r.Needed() != 2 || r.SelfApproval {
		t.Fatalf("requirement %+v", r)
	}
	for _, c := range []struct {
		sub    string
		groups []string
		ok     bool
	}{
		{"alice", []string{"finance"}, true},
		{"alice", nil, false},                     // not of finance
		{"carol", []string{"finance"}, false},     // not alice or bob
		{"bob", []string{"ops", "finance"}, true}, // both
	} {
		if got := r.Refuses(c.sub, c.groups) == ""; got != c.ok {
			t.Errorf("%s %v: may decide %v, want %v (%s)", c.sub, c.groups, got, c.ok, r.Refuses(c.sub, c.groups))
		}
	}
	v, _ = p.Evaluate(Call{Tool: "charge.refund", RiskClass: "money_movement", Input: []byte(`{"env": "test"}`)})
	if v.Require.Needed() != 3 {
		t.Errorf("the strictest approvals: %d", v.Require.Needed())
	}
	if v, _ := p.Evaluate(Call{Tool: "note.add"}); v.Require != nil || v.Effect != "" {
		t.Errorf("no rule is about note.add: %+v", v)
	}
	g, err := p.EvaluateGate(Gate{Step: "review"})
	if err != nil || g == nil || g.Needed() != 2 || strings.Join(g.Rules, ",") != "gate" {
		t.Errorf("gate requirement %+v, %v", g, err)
	}
	if g, _ := p.EvaluateGate(Gate{Step: "other"}); g != nil {
		t.Errorf("no rule is about gate other: %+v", g)
	}
	if v, _ := p.Evaluate(Call{Tool: "review", Step: "review"}); v.Effect != "" {
		t.Errorf("a gate rule matched a call: %+v", v)
	}
}
