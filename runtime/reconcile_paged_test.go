package runtime_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// pageCounter wraps a store and counts its reads of calls: whole
// (Store.Calls of every call) and a page at a time (store.CallPager).
type pageCounter struct {
	store.Store
	whole, pages atomic.Int64
}

func (p *pageCounter) Calls(ctx context.Context, run string, f store.CallFilter) ([]store.Call, error) {
	if reflect.DeepEqual(f, store.CallFilter{}) {
		p.whole.Add(1)
	}
	return p.Store.Calls(ctx, run, f)
}

func (p *pageCounter) CallPage(ctx context.Context, run, step string, attempt, after, limit int) ([]store.Call, error) {
	p.pages.Add(1)
	return p.Store.(store.CallPager).CallPage(ctx, run, step, attempt, after, limit)
}

func (p *pageCounter) CallCount(ctx context.Context, run string) (int, error) {
	return p.Store.(store.CallPager).CallCount(ctx, run)
}

// wholeOnly hides the engine's CallPager (and everything else optional):
// reconciliation reads every call at once, as it did before pages.
type wholeOnly struct{ store.Store }

// longRun runs a playbook of one step making n calls, which fill three
// pages of calls (store.CallPageSize; more than a run compared whole may
// have) and four of the log, to its end.
func longRun(t *testing.T, name string) (r *rig, run string, n int) {
	n = 2*store.CallPageSize + 3
	r = newRig(t, rigConfig{maxToolCalls: n + 1}, buildDoc(t, name, agentStep("act", "ops", []string{"customer.get"}, "")))
	calls := make([]tcall, n)
	for i := range calls {
		calls[i] = tcall{"customer.get", map[string]any{"customerId": fmt.Sprintf("cus_%d", i)}}
	}
	out, err := r.engine(0, map[string]string{"ops": transcriptOf(map[string][]tcall{"act": calls})}, nil, nil).Start(context.Background(), nil)
	wantOutcome(t, "start", out, err, runtime.Completed)
	return r, out.Run, n
}

// TestReconcileCallsAcrossPages: a run whose calls fill three pages
// (store.CallPageSize; more than a run compared whole may have) is
// compared with its chain a page at a time (no read of every call), and a call row changed, missing or extra on
// either side of a page boundary is caught with the same disagreements,
// in the same order, as when every call is read at once; on both
// engines.
func TestReconcileCallsAcrossPages(t *testing.T) {
	r, run, n := longRun(t, "paged")
	ctx := context.Background()
	rows := r.calls(run)
	if len(rows) != n {
		t.Fatalf("setup: %d calls, want %d", len(rows), n)
	}

	pc := &pageCounter{Store: r.st}
	if ds, err := runtime.Disagreements(ctx, pc, run); err != nil || len(ds) != 0 {
		t.Fatalf("an untouched run disagrees with its chain: %v %v", ds, err)
	}
	if w, p := pc.whole.Load(), pc.pages.Load(); w != 0 || p < 3 {
		t.Fatalf("an untouched run of %d calls: %d whole reads of its calls, %d pages; want none and at least 3", n, w, p)
	}

	// check runs reconciliation through the pages and whole, wants the
	// same disagreements from both, and each of want in them.
	check := func(what string, want ...string) {
		t.Helper()
		paged, err := runtime.Disagreements(ctx, r.st, run)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		whole, err := runtime.Disagreements(ctx, wholeOnly{r.st}, run)
		if err != nil {
			t.Fatalf("%s, whole: %v", what, err)
		}
		if !reflect.DeepEqual(paged, whole) {
			t.Fatalf("%s: read in pages, the run disagrees with\n%v\nread whole, with\n%v", what, paged, whole)
		}
		if len(paged) != len(want) {
			t.Fatalf("%s: %d disagreements, want %d: %v", what, len(paged), len(want), paged)
		}
		for i, w := range want {
			if !strings.Contains(paged[i].Message, w) {
				t.Errorf("%s: disagreement %d is %q, want it to say %q", what, i, paged[i].Message, w)
			}
		}
	}
	for _, idx := range []int{store.CallPageSize - 1, store.CallPageSize, 2 * store.CallPageSize} {
		r.hostileWrite(`UPDATE calls SET args_digest = 'feed' WHERE run = ? AND idx = ?`, run, idx)
		check(fmt.Sprintf("args_digest of call %d changed", idx),
			fmt.Sprintf(`calls row call %d of step "act" attempt 1: column args_digest is "feed" in the store`, idx))
		r.hostileWrite(`UPDATE calls SET args_digest = ? WHERE run = ? AND idx = ?`, rows[idx].ArgsDigest, run, idx)
		check(fmt.Sprintf("call %d restored", idx))
	}
	// A row moved past the last index: the chain's call is missing from
	// the store, and the store has a call no record names.
	r.hostileWrite(`UPDATE calls SET idx = ? WHERE run = ? AND idx = ?`, n+7, run, store.CallPageSize)
	check("call 512 renumbered",
		fmt.Sprintf(`calls row call %d of step "act" attempt 1 is in the store, but no audit record names it`, n+7),
		fmt.Sprintf(`names call %d of step "act" attempt 1, which the store does not have (no calls row)`, store.CallPageSize))
	r.hostileWrite(`UPDATE calls SET idx = ? WHERE run = ? AND idx = ?`, store.CallPageSize, run, n+7)
	check("call 512 put back")
	// An extra row, a copy of the last call of the first page under a
	// new index.
	r.hostileWrite(`INSERT INTO calls (run, step, attempt, idx, tool, def_digest, args, args_digest, decision, code, reason, state, side_effecting, result, error, started_at, finished_at)
		SELECT run, step, attempt, ?, tool, def_digest, args, args_digest, decision, code, reason, state, side_effecting, result, error, started_at, finished_at
		FROM calls WHERE run = ? AND idx = ?`, n, run, store.CallPageSize-1)
	check("an extra call",
		fmt.Sprintf(`calls row call %d of step "act" attempt 1 is in the store, but no audit record names it`, n))
	r.hostileWrite(`DELETE FROM calls WHERE run = ? AND idx = ?`, run, n)
	check("the extra call deleted")
	// A row deleted: the first of the third page.
	r.hostileWrite(`DELETE FROM calls WHERE run = ? AND idx = ?`, run, 2*store.CallPageSize)
	check("call 1024 deleted",
		fmt.Sprintf(`names call %d of step "act" attempt 1, which the store does not have (no calls row)`, 2*store.CallPageSize))
}
