package runtime

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// memRun is one run's log and rows, in memory: what reconciliation reads
// (the rest of store.Store is not implemented).
type memRun struct {
	store.Store
	recs      []audit.Record
	calls     []store.Call
	approvals []store.Approval
}

func (m *memRun) AuditHead(context.Context, string) (int64, string, error) {
	return int64(len(m.recs)), "", nil
}
func (m *memRun) Audit(context.Context, string) ([]audit.Record, error) { return m.recs, nil }
func (m *memRun) GetRun(_ context.Context, id string) (store.Run, error) {
	return store.Run{ID: id, Status: store.RunRunning}, nil
}
func (m *memRun) Calls(context.Context, string, store.CallFilter) ([]store.Call, error) {
	return m.calls, nil
}
func (m *memRun) Approvals(context.Context, string) ([]store.Approval, error) {
	return m.approvals, nil
}
func (m *memRun) Gates(context.Context, string) ([]store.Gate, error) { return nil, nil }
func (m *memRun) Steps(context.Context, string) ([]store.Step, error) { return nil, nil }

// memPager is memRun with its calls in pages.
type memPager struct{ *memRun }

func (m memPager) CallPage(_ context.Context, run, step string, attempt, after, limit int) ([]store.Call, error) {
	var out []store.Call
	for _, c := range m.calls {
		if c.Step == step && c.Attempt == attempt && c.Index > after {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b store.Call) int { return a.Index - b.Index })
	return out[:min(len(out), limit)], nil
}

func (m memPager) CallCount(context.Context, string) (int, error) { return len(m.calls), nil }

// TestMergedCallsAsWhole: on random logs and rows (calls of two steps
// and two attempts, records in any order, a call named after it ended,
// outcome-unknown approvals, rows agreeing with the chain or changed,
// missing, extra, duplicated or out of order), reconciliation with the
// calls merged a page at a time gives exactly what reading every call
// at once gives, with merge windows from 0 to 3 ended calls and pages
// of 1 to 3 calls; and it
// merges (does not give up) on every log as a run leaves it whose rows
// agree.
func TestMergedCallsAsWhole(t *testing.T) {
	defer func(w, p, c int) { mergeWindow, callPageSize, wholeCalls = w, p, c }(mergeWindow, callPageSize, wholeCalls)
	wholeCalls = 0
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 20))
	kinds := []EventKind{KindCallStarted, KindCallStarted, KindCallSucceeded, KindCallSucceeded, KindCallFailed, KindCallRefused,
		KindCallWaiting, KindCallOutcomeUnknown, KindCallRerun, KindCallRetried, KindStepStarted}
	argsOf := func(step string, attempt, idx int) string { return fmt.Sprintf(`{"k":"%s/%d/%d"}`, step, attempt, idx) }
	merged, cleanMerged, clean := 0, 0, 0
	for round := range 3000 {
		mergeWindow, callPageSize = round%4, 1+round%3
		m := &memRun{}
		// Odd rounds: records in any order. Even rounds: a log as a run
		// leaves it, each call decided then ended before the next.
		realistic := round%2 == 0
		nrec := 1 + rng.IntN(24)
		next := map[attemptKey]int{}
		for i := 0; len(m.recs) < nrec; i++ {
			step := []string{"a", "b"}[rng.IntN(2)]
			attempt, idx := 1+rng.IntN(2), rng.IntN(5)
			ks := []EventKind{kinds[rng.IntN(len(kinds))]}
			if realistic {
				idx = next[attemptKey{step, attempt}]
				next[attemptKey{step, attempt}]++
				ks = [][]EventKind{{KindCallStarted, KindCallSucceeded}, {KindCallStarted, KindCallFailed}, {KindCallRefused}, {KindCallWaiting}}[rng.IntN(4)]
			}
			args := argsOf(step, attempt, idx)
			if !realistic && rng.IntN(20) == 0 {
				args = `{"other":true}`
			}
			for _, k := range ks {
				data := fmt.Sprintf(`{"attempt":%d,"index":%d,"argsDigest":%q,"defDigest":"def","resultDigest":%q,"reason":"r%d","code":"c%d"`,
					attempt, idx, digest([]byte(args)), digest([]byte(`{"ok":true}`)), rng.IntN(2), rng.IntN(2))
				if k == KindCallOutcomeUnknown || (k == KindCallStarted && rng.IntN(3) == 0) {
					data += fmt.Sprintf(`,"approval":"apr_%d"`, rng.IntN(3))
				}
				m.recs = append(m.recs, audit.Record{Seq: int64(len(m.recs) + 1), Kind: string(k), Step: step, Tool: "t", Data: jsontext.Value(data + "}")})
			}
		}
		// Rows that agree with the chain, in the order calls were first
		// named, then spoiled at random.
		ch := readChain(m.recs)
		for _, k := range ch.callOrder {
			cc := ch.calls[k]
			row := store.Call{CallKey: store.CallKey{Run: "run_x", Step: k.step, Attempt: k.attempt, Index: k.index}, Tool: cc.tool, DefDigest: cc.firstD.DefDigest,
				Args: jsontext.Value(argsOf(k.step, k.attempt, k.index)), ArgsDigest: cc.args, Decision: decisionOf(cc.decided.kind), Code: cc.code,
				Reason: cc.reason, State: stateOf(cc.last.kind, store.CallStarted)}
			if row.State == store.CallSucceeded && cc.resultAt.seq > 0 {
				row.Result = jsontext.Value(`{"ok":true}`)
			}
			if row.State == store.CallFailed && cc.failureAt.seq > 0 {
				row.Error = cc.failure
			}
			m.calls = append(m.calls, row)
		}
		for _, id := range ch.approvalOrder {
			m.approvals = append(m.approvals, store.Approval{ID: id, Kind: store.KindOutcomeUnknown, Step: ch.approvals[id].asked.Step, DefDigest: "def"})
		}
		spoiled := rng.IntN(2) == 0
		if spoiled && len(m.calls) > 0 {
			i := rng.IntN(len(m.calls))
			switch rng.IntN(6) {
			case 0:
				m.calls = slices.Delete(m.calls, i, i+1)
			case 1:
				m.calls = append(m.calls, m.calls[i])
			case 2:
				extra := m.calls[i]
				extra.Index += 10
				if rng.IntN(2) == 0 {
					extra.Step = "c"
				}
				m.calls = append(m.calls, extra)
			case 3:
				m.calls[i].Reason += "!"
			case 4:
				m.calls[i].State = store.CallFailed
			case 5:
				j := rng.IntN(len(m.calls))
				m.calls[i], m.calls[j] = m.calls[j], m.calls[i]
				m.calls[i].Error = "x"
			}
		}
		whole, err := reconcileWhole(ctx, m, storeWalk(ctx, m, "run_x"), "run_x")
		if err != nil {
			t.Fatal(err)
		}
		got, err := reconcileOnce(ctx, memPager{m}, "run_x")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, whole) {
			t.Fatalf("round %d (window %d): merged\n%v\nwhole\n%v\nlog %v\nrows %+v", round, mergeWindow, got, whole, m.recs, m.calls)
		}
		_, ok, err := reconcilePaged(ctx, m, memPager{m}, storeWalk(ctx, m, "run_x"), "run_x", len(m.calls))
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			merged++
		}
		if !spoiled && realistic {
			clean++
			if ok {
				cleanMerged++
			} else if testing.Verbose() && clean < 3 {
				t.Logf("not merged: %v\nlog %v\nrows %+v", whole, m.recs, m.calls)
			}
		}
	}
	if cleanMerged != clean {
		t.Errorf("the merge concluded on %d of the %d logs as a run leaves them whose rows agree, want all: it gives up where it need not", cleanMerged, clean)
	}
	t.Logf("merged %d of 3000 logs, %d of %d as a run leaves them with rows that agree", merged, cleanMerged, clean)
}
