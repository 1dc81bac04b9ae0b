package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// A long run's calls are compared with the chain as the chain walk
// passes them ([callMerge]), not once the walk has gathered every call:
// a call whose last record so far ends it (call.succeeded, call.failed,
// call.refused) is compared with its row, read a page at a time from
// its step attempt's calls ([store.CallPager]), once mergeWindow more
// calls have ended after it, and its state is dropped. Memory is then a
// page of rows, the calls still open and the window, however long the
// run.
//
// The merge only proves that the calls agree: a row that disagrees, a
// call the store lacks, a row the chain does not name (the run's call
// count is not the number compared), or a record that names a call the
// merge already compared (the comparison came too early), and the merge
// gives up (a call named again after its comparison finds no row left);
// the run is then compared whole (reconcileWhole), which says
// what disagrees in the words and order it always has.

// mergeWindow is how many ended calls wait before their comparison, so
// that a record naming one soon after does not make the merge give up
// (a variable for the tests).
var mergeWindow = 256

// callPageSize is the calls read at a time, and wholeCalls the most
// calls a run may have to be compared whole at once (variables for the
// tests).
var (
	callPageSize = store.CallPageSize
	wholeCalls   = 2 * store.CallPageSize
)

// errIrregular stops a merge that gives up.
var errIrregular = errors.New("the calls do not merge with the chain")

// callMerge compares a run's calls with a chain walked in order.
type callMerge struct {
	ctx   context.Context
	p     store.CallPager
	run   string
	count int // the run's calls
	ch    *chain
	rows  map[attemptKey]*attemptRows
	ended []endedCall // calls waiting for their comparison, oldest first
	head  int         // ended[:head] were taken
	// matched counts the rows compared that agree; each row is compared
	// once (it leaves its attemptRows), so a call named again after its
	// comparison finds no row and the merge gives up.
	matched int
}

// endedCall is a call that its record seq ended.
type endedCall struct {
	k   callKey
	seq int64
}

// attemptRows is the reading of one step attempt's calls, in index
// order: after is the last index read, held the rows read whose call
// the merge has not compared yet, in index order.
type attemptRows struct {
	after int
	end   bool
	held  []store.Call
}

// newCallMerge returns the merge of ch, a chain about to be walked, with
// the calls of run, of which there are count (CallCount), read through p.
func newCallMerge(ctx context.Context, p store.CallPager, runID string, count int, ch *chain) *callMerge {
	ch.unordered = true
	ch.keep, ch.kept = map[callKey]bool{}, map[callKey]*chainCall{}
	return &callMerge{ctx: ctx, p: p, run: runID, count: count, ch: ch, rows: map[attemptKey]*attemptRows{}}
}

// reconcilePaged is reconcileOnce with the calls merged ([callMerge]);
// ok is false when the merge gave up (nothing is concluded: compare the
// run whole). count is the run's number of calls (CallCount).
func reconcilePaged(ctx context.Context, rd rowReads, p store.CallPager, walk logWalk, runID string, count int) (out []Disagreement, ok bool, err error) {
	ch := newChain()
	m := newCallMerge(ctx, p, runID, count, ch)
	err = walk(func(r audit.Record) error {
		ch.add(&r)
		return m.walked()
	})
	if err == nil {
		err = m.finish()
	}
	if errors.Is(err, errIrregular) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out, err = compareMerged(ctx, rd, ch, runID)
	return out, true, err
}

// compareMerged compares the rows of the run other than its calls with
// ch, a walk of its whole log whose calls a merge found to agree.
func compareMerged(ctx context.Context, rd rowReads, ch *chain, runID string) ([]Disagreement, error) {
	var out []Disagreement
	run, err := rd.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	reconcileRun(&out, ch, run)
	return out, reconcileRest(ctx, rd, &out, ch, runID)
}

// walked takes the chain's last record.
func (m *callMerge) walked() error {
	cc, k := m.ch.lastCall, m.ch.lastKey
	if cc == nil {
		return nil
	}
	switch cc.last.kind {
	case KindCallSucceeded, KindCallFailed, KindCallRefused:
		m.ended = append(m.ended, endedCall{k, cc.last.seq})
	}
	for len(m.ended)-m.head > mergeWindow {
		e := m.ended[m.head]
		m.head++
		// A call with a record after the one that ended it is compared
		// later (when that record ends it again, or at the log's end).
		if cc := m.ch.calls[e.k]; cc != nil && cc.last.seq == e.seq {
			if err := m.compare(e.k, cc); err != nil {
				return err
			}
		}
	}
	if m.head > 4096 && m.head > len(m.ended)/2 {
		m.ended = append(m.ended[:0], m.ended[m.head:]...)
		m.head = 0
	}
	return nil
}

// finish compares the calls still open at the log's end and checks that
// every row of the run was compared.
func (m *callMerge) finish() error {
	for k, cc := range m.ch.calls {
		if err := m.compare(k, cc); err != nil {
			return err
		}
	}
	for _, r := range m.rows {
		if len(r.held) > 0 {
			return errIrregular // rows the chain does not name
		}
	}
	if m.count != m.matched {
		return errIrregular // rows of steps the chain does not name
	}
	return nil
}

// compare compares call k, whose chain state cc is final, with its row
// and drops its state.
func (m *callMerge) compare(k callKey, cc *chainCall) error {
	delete(m.ch.calls, k)
	if m.ch.keep[k] {
		m.ch.kept[k] = cc
	}
	row, ok, err := m.row(k)
	if err != nil {
		return err
	}
	if !ok {
		return errIrregular // the store lacks the call
	}
	var ds []Disagreement
	reconcileCall(rowCheck{&ds, "calls", ""}, &row, cc)
	if len(ds) > 0 {
		return errIrregular
	}
	m.matched++
	return nil
}

// row returns the row of call k, reading its step attempt's calls up to
// its index.
func (m *callMerge) row(k callKey) (store.Call, bool, error) {
	ak := attemptKey{k.step, k.attempt}
	r := m.rows[ak]
	if r == nil {
		r = &attemptRows{after: -1}
		m.rows[ak] = r
	}
	for !r.end && r.after < k.index {
		page, err := m.p.CallPage(m.ctx, m.run, k.step, k.attempt, r.after, callPageSize)
		if err != nil {
			return store.Call{}, false, err
		}
		for _, c := range page {
			if c.Run != m.run || c.Step != k.step || c.Attempt != k.attempt || c.Index <= r.after {
				return store.Call{}, false, fmt.Errorf("%w: a page of the calls of step %q attempt %d after index %d holds call %d of step %q attempt %d",
					errIrregular, k.step, k.attempt, r.after, c.Index, c.Step, c.Attempt)
			}
			r.after = c.Index
		}
		r.held = append(r.held, page...)
		r.end = len(page) < callPageSize
	}
	// The calls are mostly compared in index order: the row is mostly
	// the first held.
	i, ok := slices.BinarySearchFunc(r.held, k.index, func(c store.Call, index int) int { return cmp.Compare(c.Index, index) })
	if !ok {
		return store.Call{}, false, nil
	}
	c := r.held[i]
	if i == 0 {
		r.held[0] = store.Call{}
		r.held = r.held[1:]
	} else {
		r.held = slices.Delete(r.held, i, i+1)
	}
	return c, true, nil
}
