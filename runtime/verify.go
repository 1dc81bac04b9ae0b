package runtime

import (
	"context"
	"errors"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// disagreesPrefix begins the message of a [Disagreement] as a problem
// of [VerifyRun].
const disagreesPrefix = "the store disagrees with the audit log: "

// VerifyRun proves run's audit chain and compares its rows with it, as
// `openplaybook audit --verify` and serve's audit API do, and returns
// what it found: the chain's problems first (store.VerifyAudit's: gaps,
// links, hashes, the head), then each [Disagreement] of the rows, its
// message after "the store disagrees with the audit log: "; none means
// the run verifies. each, when not nil, is called with every record of
// the log in seq order as it is read (to print it); its error stops the
// reading and is returned.
//
// On an engine that reads from one snapshot ([store.Snapshotter]) the
// log is read once, a page at a time, and each record is checked,
// walked and given to each as it comes, all from that snapshot; memory
// then does not grow with the log (as [Disagreements], the rows are
// compared whole again when the calls disagree). Another engine is read
// as three reads: VerifyAudit, [Disagreements], then the log for each.
func VerifyRun(ctx context.Context, st store.Store, runID string, each func(audit.Record) error) ([]audit.Problem, error) {
	sn, ok := store.As[store.Snapshotter](st)
	if !ok {
		return verifyReads(ctx, st, runID, each)
	}
	var probs []audit.Problem
	err := sn.ReadSnapshot(ctx, func(s store.Snapshot) error {
		var err error
		probs, err = verifySnapshot(ctx, s, runID, each)
		return err
	})
	return probs, err
}

// verifyReads is VerifyRun without a snapshot.
func verifyReads(ctx context.Context, st store.Store, runID string, each func(audit.Record) error) ([]audit.Problem, error) {
	probs, err := st.VerifyAudit(ctx, runID)
	if err != nil {
		return nil, err
	}
	ds, err := Disagreements(ctx, st, runID)
	if err != nil {
		return nil, err
	}
	if each != nil {
		if err := store.EachAudit(ctx, st, runID, each); err != nil {
			return nil, err
		}
	}
	return withDisagreements(probs, ds), nil
}

// withDisagreements appends ds to probs as problems.
func withDisagreements(probs []audit.Problem, ds []Disagreement) []audit.Problem {
	for _, d := range ds {
		probs = append(probs, audit.Problem{Seq: d.Seq, Message: disagreesPrefix + d.Message})
	}
	return probs
}

// verifySnapshot is VerifyRun in one snapshot: one read of the log, each
// record verified ([audit.Verifier]), walked into the chain, merged with
// the call rows (a run of more than wholeCalls calls, [callMerge]) and
// given to each. When the merge gives up, the rows are compared whole
// after the read, with a second walk of the log in the same snapshot.
func verifySnapshot(ctx context.Context, s store.Snapshot, runID string, each func(audit.Record) error) ([]audit.Problem, error) {
	seq, hash, err := s.AuditHead(ctx, runID)
	if err != nil {
		return nil, err
	}
	count, err := s.CallCount(ctx, runID)
	if err != nil {
		return nil, err
	}
	var v audit.Verifier
	ch := newChain()
	var m *callMerge
	if count > wholeCalls {
		m = newCallMerge(ctx, s, runID, count, ch)
	}
	irregular := false
	err = store.EachAuditPage(ctx, s, runID, 0, func(r audit.Record) error {
		if each != nil {
			if err := each(r); err != nil {
				return err
			}
		}
		v.Add(r)
		if irregular {
			return nil
		}
		ch.add(&r)
		if m == nil {
			return nil
		}
		err := m.walked()
		irregular = errors.Is(err, errIrregular)
		if irregular {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	probs := v.EndHead(seq, hash)
	if m != nil && !irregular {
		err := m.finish()
		if irregular = errors.Is(err, errIrregular); !irregular && err != nil {
			return nil, err
		}
	}
	var ds []Disagreement
	switch {
	case m == nil:
		ds, err = compareWhole(ctx, s, ch, runID)
	case irregular:
		walk := func(fn func(audit.Record) error) error { return store.EachAuditPage(ctx, s, runID, 0, fn) }
		ds, err = reconcileWhole(ctx, s, walk, runID)
	default:
		ds, err = compareMerged(ctx, s, ch, runID)
	}
	if err != nil {
		return nil, err
	}
	return withDisagreements(probs, ds), nil
}
