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
