package runtime

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

// MayDecide says whether v's person may approve now what run runID waits
// for under id, making the checks [Decide] makes of who decides and
// recording nothing: id is an approval id ("apr_...") or a waiting gate's
// step id, as [Pendings] lists them; v is taken as an approval (its
// Approve is ignored), with By, Verified, Groups and SelfApproval as
// Decide would be given them.
//
// It returns nil when Decide would take the approval now; an error
// wrapping [ErrNotDecider] when v's person may not approve it (outside a
// policy rule's deciders, the run's starter or a gate's approver
// (self-approval), unverified where a rule names deciders or asks for
// several approvers, or one who already approved what needs several
// distinct people); and otherwise the error Decide would return: the run
// has ended or is not in the store, its audit chain does not verify or
// the approval's rows disagree with it ([ErrStoreAltered]), the approval is not the run's, no longer
// pending ([store.ErrState]) or expired ([store.ErrExpired]), or the run
// waits for no gate or approval id. Who decides is docs/policy.md,
// "Who decides: deciders, N of M, self-approval".
//
// A decision the store takes later may still be refused: MayDecide reads
// the store once, and another person may decide first.
func MayDecide(ctx context.Context, st store.Store, runID, id string, v Verdict) error {
	v.Approve = true
	t, err := awaited(ctx, st, runID, id)
	if err != nil {
		return err
	}
	if err := t.dc.check(v, runID, t.what, t.gate == nil); err != nil {
		return err
	}
	if t.gate == nil {
		if err := approvable(ctx, st, runID, id); err != nil {
			return err
		}
		a, err := st.GetApproval(ctx, id)
		switch {
		case err != nil:
			return fmt.Errorf("approval %s: %w", id, err)
		case a.Run != runID:
			return fmt.Errorf("approval %s belongs to run %s, not %s", id, a.Run, runID)
		case a.Status != store.ApprovalPending:
			return fmt.Errorf("%w: approval %s is %s", store.ErrState, id, a.Status)
		case !a.Expires.IsZero() && !st.Now().Before(a.Expires):
			return fmt.Errorf("%w: approval %s expired at %s", store.ErrExpired, id, a.Expires.UTC().Format(time.RFC3339))
		}
	}
	if needed := t.dc.req.Needed(); needed > 1 && slices.Contains(t.dc.endorsers, v.By) {
		return approvedTwice(v.By, id, needed)
	}
	return nil
}
