package store

import (
	"context"
	"fmt"

	"github.com/openplaybook/openplaybook/audit"
)

// AuditPager is what an engine implements beside [Store] to read a run's
// audit log in bounded pages: readers of long logs (`openplaybook audit`,
// the chain walk of reconciliation) then hold one page at a time, not the
// whole log. It is optional: [EachAudit] reads an engine without it with
// [Store.Audit], whole.
type AuditPager interface {
	// AuditPage returns at most limit (at least 1) of run's records whose
	// seq is above after, in seq order; fewer than limit (none) at the
	// log's end.
	AuditPage(ctx context.Context, run string, after int64, limit int) ([]audit.Record, error)
}

// AuditPageSize is the number of records [EachAudit] reads at a time.
const AuditPageSize = 512

// EachAudit calls fn with each of run's audit records in seq order,
// reading them a page at a time when st is (or wraps, [As]) an [AuditPager] (so that
// memory stays bounded however long the log), else with [Store.Audit].
// The pages are separate reads: compare the run's head before and after
// (Store.AuditHead) to know they saw one state. fn's error stops the
// read and is returned.
func EachAudit(ctx context.Context, st Store, run string, fn func(audit.Record) error) error {
	return EachAuditAfter(ctx, st, run, 0, fn)
}

// EachAuditAfter is [EachAudit] for the records whose seq is above after:
// with an [AuditPager], a reader that keeps its place (a cursor) reads
// only what is new, not the log from its start.
func EachAuditAfter(ctx context.Context, st Store, run string, after int64, fn func(audit.Record) error) error {
	p, ok := As[AuditPager](st)
	if !ok {
		recs, err := st.Audit(ctx, run)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if r.Seq <= after {
				continue
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	}
	return EachAuditPage(ctx, p, run, after, fn)
}

// EachAuditPage is [EachAuditAfter] through p, a page of
// [AuditPageSize] records at a time: a [Snapshot] reads the log so from
// one state of the store.
func EachAuditPage(ctx context.Context, p AuditPager, run string, after int64, fn func(audit.Record) error) error {
	for {
		page, err := p.AuditPage(ctx, run, after, AuditPageSize)
		if err != nil {
			return err
		}
		for _, r := range page {
			if r.Seq <= after {
				return fmt.Errorf("store: reading audit: record %d came after record %d in a page of records above %d", r.Seq, after, after)
			}
			after = r.Seq
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(page) < AuditPageSize {
			return nil
		}
	}
}

// CallPager is what an engine implements beside [Store] to read a run's
// call rows in bounded pages, as [AuditPager] its log: reconciliation
// (`openplaybook audit --verify`) then compares the rows with the chain
// a page at a time, in the order the chain names them (one step attempt
// at a time, by index), instead of holding every call of the run. It is
// optional: an engine without it is compared with [Store.Calls], whole.
type CallPager interface {
	// CallPage returns at most limit (at least 1) of the calls of run's
	// attempt attempt at step step whose index is above after (-1: from
	// index 0), in index order; fewer than limit (none) at the end. Their
	// Started and Finished are zero: the columns the chain records are
	// read, not the times (which it does not).
	CallPage(ctx context.Context, run, step string, attempt, after, limit int) ([]Call, error)
	// CallCount returns the number of run's calls, of every step: 0 for
	// a run with none (or no such run).
	CallCount(ctx context.Context, run string) (int, error)
}

// CallPageSize is the number of calls a reader of [CallPager] pages
// asks for at a time.
const CallPageSize = 512

// Snapshot is reads of a store that all see one state of it (one
// read-only transaction), so that a reader that makes several of them,
// as `openplaybook audit --verify` does, needs no check that the run did
// not change between them. Its methods are the [Store] methods of the
// same names, [AuditPager]'s and [CallPager]'s, as that state holds
// them. It is valid only while the function given to
// [Snapshotter.ReadSnapshot] runs.
type Snapshot interface {
	GetRun(ctx context.Context, id string) (Run, error)
	Steps(ctx context.Context, run string) ([]Step, error)
	Calls(ctx context.Context, run string, f CallFilter) ([]Call, error)
	Approvals(ctx context.Context, run string) ([]Approval, error)
	Gates(ctx context.Context, run string) ([]Gate, error)
	AuditHead(ctx context.Context, run string) (seq int64, hash string, err error)
	AuditPager
	CallPager
}

// Snapshotter is what an engine implements beside [Store] to read from
// one snapshot. It is optional: a reader of an engine without it reads
// the [Store] and compares the run's head before and after.
type Snapshotter interface {
	// ReadSnapshot calls fn with reads that all see the store as it was
	// when ReadSnapshot was called, and returns fn's error (or the
	// error of beginning the read). The Snapshot must not be used after
	// fn returns.
	ReadSnapshot(ctx context.Context, fn func(Snapshot) error) error
}
