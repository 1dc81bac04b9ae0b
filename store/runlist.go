package store

import (
	"fmt"
	"github.com/go-json-experiment/json"
	"time"
)

// RunFilter selects the runs [Store.RunPage] lists. The zero value keeps
// every run.
type RunFilter struct {
	// Statuses keeps the runs in one of them; empty: every status.
	Statuses []RunStatus
	// Playbook keeps the runs of this playbook (manifest.id, exactly);
	// "": every playbook.
	Playbook string
	// Decide keeps the runs that wait for a person's decision: a gate
	// waiting, or an approval pending and not expired.
	Decide bool
	// CreatedFrom keeps the runs created at or after it; zero: no bound.
	CreatedFrom time.Time
	// CreatedBefore keeps the runs created before it; zero: no bound.
	CreatedBefore time.Time
}

// RunCursor is a position in the list of runs, newest first (created
// time descending, then ID ascending): [Store.RunPage] lists the runs
// after it. The zero value is the list's start.
type RunCursor struct {
	Created time.Time
	ID      string
}

// IsZero reports whether c is the list's start.
func (c RunCursor) IsZero() bool { return c.Created.IsZero() && c.ID == "" }

// MaxRunPage is the largest page [Store.RunPage] returns; a larger limit
// is read as this one.
const MaxRunPage = 500

// ListedRun is a run as a list of runs shows it. It is read from the
// runs' indexed columns and the gate and approval rows, never from the
// stored document: Run's Document, Input, HarnessPath and
// DocumentDigest are empty, and AuditSeq and AuditHash are not read
// (0 and "").
type ListedRun struct {
	Run
	// Gates are the steps whose gate waits for a person, in step order.
	Gates []string
	// Approvals are the run's pending, unexpired approvals, oldest
	// first. They come from the approval rows alone (not checked against
	// the audit chain): what each is for is read, checked, with
	// [Store.GetApproval] and the chain.
	Approvals []PendingRef
}

// PendingRef names a pending approval: its ID, kind and step.
type PendingRef struct {
	ID   string
	Kind ApprovalKind
	Step string
}

// Waits reports whether the run waits for a person's decision (a gate or
// an approval), as [RunFilter.Decide] keeps it.
func (r ListedRun) Waits() bool { return len(r.Gates) > 0 || len(r.Approvals) > 0 }

// DecodePendingLists decodes the two JSON arrays an engine's list query
// aggregates from the gate rows (an array of step ids) and the approval
// rows (an array of [id, kind, step] triples) into r. Empty or null
// text is an empty list; anything else that is not of that shape is an
// error naming the run.
func DecodePendingLists(r *ListedRun, gates, approvals []byte) error {
	if len(gates) > 0 {
		if err := json.Unmarshal(gates, &r.Gates); err != nil {
			return fmt.Errorf("store: reading run %s: its waiting gates do not decode: %w", r.ID, err)
		}
	}
	if len(approvals) == 0 {
		return nil
	}
	var triples [][]string
	if err := json.Unmarshal(approvals, &triples); err != nil {
		return fmt.Errorf("store: reading run %s: its pending approvals do not decode: %w", r.ID, err)
	}
	for _, t := range triples {
		if len(t) != 3 {
			return fmt.Errorf("store: reading run %s: a pending approval has %d fields, not 3 (id, kind, step)", r.ID, len(t))
		}
		r.Approvals = append(r.Approvals, PendingRef{ID: t[0], Kind: ApprovalKind(t[1]), Step: t[2]})
	}
	return nil
}

// ClampRunPage is the limit an engine's RunPage uses for limit: at least
// 1, at most [MaxRunPage].
func ClampRunPage(limit int) int { return min(max(limit, 1), MaxRunPage) }
