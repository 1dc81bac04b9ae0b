package serve_test

import (
	"context"
	"slices"
	"testing"
)

// TestOIDCPolicyTwoApproversForAGate: a harness policy rule asks two
// people of finance for the gate "review". The run carol starts waits
// after alice's approval (recorded as gate.endorsed, with her claims);
// alice again is refused (distinct people), as is carol (not a decider);
// bob's
// approval approves it, and gate.approved names both, with the rule.
func TestOIDCPolicyTwoApproversForAGate(t *testing.T) {
	ir := newIdentityRig(t, `policy:
  rules:
    - name: two-from-finance
      gates: [review]
      deciders: {groups: [finance]}
      approvals: 2
`)
	carolAPI := ir.api(ir.token(carol, apiAudience))
	run := ir.startGateRun(carolAPI)
	gate := "/api/v1/runs/" + run + "/decisions/review"
	yes := map[string]any{"approve": true, "reason": "fine"}
	aliceAPI := ir.api(ir.token(alice, apiAudience))

	want(t, "carol decides her own run", carolAPI.do("POST", gate, yes), 403, "not one of serve.oidc.deciders")
	want(t, "alice approves", aliceAPI.do("POST", gate, yes), 200, `"approvals":1,"needed":2`)
	if p, _ := ir.srv.Pending(context.Background(), run); len(p) != 1 || p[0].Kind != "gate" {
		t.Fatalf("after one of two approvals the run waits for %+v", p)
	}
	want(t, "alice approves again", aliceAPI.do("POST", gate, yes), 403, "distinct people")
	want(t, "bob approves", ir.api(ir.token(bob, apiAudience)).do("POST", gate, yes), 200, `"approvals":2,"needed":2`)
	ir.waitStatus(run, "waiting", "agent")

	recs := ir.audit(aliceAPI, run)
	endorsed := kinds(recs, "gate.endorsed")
	if len(endorsed) != 2 || endorsed[0]["by"] != "alice" || endorsed[0]["byEmail"] != "alice@example.com" || endorsed[1]["by"] != "bob" || endorsed[1]["count"] != 2.0 {
		t.Fatalf("gate.endorsed records %v", endorsed)
	}
	ok := kinds(recs, "gate.approved")
	if len(ok) != 1 || ok[0]["by"] != "bob" || !slices.Equal(anyStrings(ok[0]["approvers"]), []string{"alice", "bob"}) || !slices.Equal(anyStrings(ok[0]["rules"]), []string{"two-from-finance"}) {
		t.Fatalf("gate.approved records %v", ok)
	}
	waiting := kinds(recs, "gate.waiting")
	if len(waiting) != 1 || waiting[0]["policy"] == nil {
		t.Fatalf("gate.waiting records %v: the requirement is not recorded", waiting)
	}
}

func anyStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
