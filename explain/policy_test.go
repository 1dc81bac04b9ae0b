package explain

import (
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/policy"
)

// TestPolicyPerTool: with a harness policy, each allowed tool lists the
// rules about it in its step (by name pattern, risk class and step), a
// gate the rules about it, and text says what each does; a tool no rule
// is about lists none, and without a policy the member is null.
func TestPolicyPerTool(t *testing.T) {
	p, err := policy.New([]policy.Rule{
		{Name: "big-refunds", Tools: []string{"charge.*"}, When: "args.amount > 10000", Effect: policy.RequireApproval,
			Deciders: policy.Principals{Groups: []string{"finance"}}, Approvals: 2},
		{Name: "no-notes-in-decline", Tools: []string{"note.add"}, Steps: []string{"decline"}, Effect: policy.Deny},
		{Name: "legal-gate", Gates: []string{"approve_refund"}, Deciders: policy.Principals{Subjects: []string{"carol"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, probs := read(t, "../examples/refund-review.json")
	e := BuildWith(doc, probs, &Options{Policy: p})
	rules := func(step, tool string) []string {
		for _, st := range e.Steps {
			if st.ID != step {
				continue
			}
			if tool == "" {
				return names(st.Policy)
			}
			for _, tl := range st.AllowedTools {
				if tl.Name == tool {
					return names(tl.Policy)
				}
			}
		}
		t.Fatalf("no %s in step %s", tool, step)
		return nil
	}
	for _, c := range []struct{ step, tool, want string }{
		{"refund", "charge.refund", "big-refunds"},
		{"refund", "note.add", ""},
		{"decline", "note.add", "no-notes-in-decline"},
		{"review", "customer.get", ""},
		{"review", "charge.history", "big-refunds"},
		{"approve_refund", "", "legal-gate"},
	} {
		if got := strings.Join(rules(c.step, c.tool), ","); got != c.want {
			t.Errorf("%s %s: rules %q, want %q", c.step, c.tool, got, c.want)
		}
	}
	text := strings.Join(strings.Fields(render(t, e, "text")), " ") // unwrapped
	for _, want := range []string{
		"policy: rule big-refunds requires approval when args.amount > 10000, by groups finance, 2 distinct people",
		"policy: rule no-notes-in-decline refuses the call",
		"gate: a person decides (policy: rule legal-gate requires approval, by carol)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if e := Build(doc, probs); e.Steps[0].AllowedTools[0].Policy != nil || !strings.Contains(render(t, e, "json"), `"policy": null`) {
		t.Error("without a policy, a tool's policy is not null")
	}
}

func names(rs []PolicyRule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Rule)
	}
	return out
}
