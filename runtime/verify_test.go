package runtime_test

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// snapCounter wraps a store and counts what its snapshots read: pages
// of the log and whole reads of the calls.
type snapCounter struct {
	store.Store
	snapshots, auditPages, wholeCalls atomic.Int64
}

func (c *snapCounter) ReadSnapshot(ctx context.Context, fn func(store.Snapshot) error) error {
	c.snapshots.Add(1)
	return c.Store.(store.Snapshotter).ReadSnapshot(ctx, func(s store.Snapshot) error {
		return fn(countedSnapshot{s, c})
	})
}

type countedSnapshot struct {
	store.Snapshot
	c *snapCounter
}

func (s countedSnapshot) AuditPage(ctx context.Context, run string, after int64, limit int) ([]audit.Record, error) {
	s.c.auditPages.Add(1)
	return s.Snapshot.AuditPage(ctx, run, after, limit)
}

func (s countedSnapshot) Calls(ctx context.Context, run string, f store.CallFilter) ([]store.Call, error) {
	s.c.wholeCalls.Add(1)
	return s.Snapshot.Calls(ctx, run, f)
}

// TestVerifyRunOnePass: VerifyRun on an engine with snapshots reads a
// long run's log once (a page at a time, its calls merged, none read
// whole), gives each record to the caller in order, and a log or rows
// tampered with around the log's page boundaries (a record changed,
// deleted, inserted or two swapped; a call row changed) give exactly the
// problems, in the same order, that the three reads without a snapshot
// give (store.VerifyAudit, Disagreements); on both engines.
func TestVerifyRunOnePass(t *testing.T) {
	r, run, _ := longRun(t, "onepass")
	ctx := context.Background()
	recs, err := r.st.Audit(ctx, run)
	if err != nil || len(recs) < 4*store.AuditPageSize {
		t.Fatalf("setup: %d records (%v), want at least %d", len(recs), err, 4*store.AuditPageSize)
	}

	sc := &snapCounter{Store: r.st}
	var seen []audit.Record
	probs, err := runtime.VerifyRun(ctx, sc, run, func(rec audit.Record) error {
		seen = append(seen, rec)
		return nil
	})
	if err != nil || len(probs) != 0 {
		t.Fatalf("an untouched run does not verify: %v %v", probs, err)
	}
	if !reflect.DeepEqual(seen, recs) {
		t.Fatalf("VerifyRun gave %d records, the log has %d, or they differ", len(seen), len(recs))
	}
	if s, p, w := sc.snapshots.Load(), sc.auditPages.Load(), sc.wholeCalls.Load(); s != 1 || p != int64(len(recs)/store.AuditPageSize+1) || w != 0 {
		t.Fatalf("an untouched run of %d records: %d snapshots, %d pages of its log, %d whole reads of its calls; want 1, %d, 0",
			len(recs), s, p, w, len(recs)/store.AuditPageSize+1)
	}

	// check verifies the run in one pass and without a snapshot, wants
	// the same problems from both, each of want in them, and the records
	// given to be the log's.
	check := func(what string, want ...string) {
		t.Helper()
		var given []audit.Record
		onePass, err := runtime.VerifyRun(ctx, r.st, run, func(rec audit.Record) error {
			given = append(given, rec)
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		reads, err := runtime.VerifyRun(ctx, plainStore{r.st}, run, nil)
		if err != nil {
			t.Fatalf("%s, without a snapshot: %v", what, err)
		}
		if !reflect.DeepEqual(onePass, reads) {
			t.Fatalf("%s: in one pass the run has the problems\n%v\nwithout a snapshot\n%v", what, onePass, reads)
		}
		if len(onePass) < len(want) || (len(want) == 0 && len(onePass) > 0) {
			t.Fatalf("%s: %d problems, want %d: %v", what, len(onePass), len(want), onePass)
		}
		for i, w := range want {
			if !strings.Contains(onePass[i].Message, w) {
				t.Errorf("%s: problem %d is %q, want it to say %q", what, i, onePass[i].Message, w)
			}
		}
		log, err := r.st.Audit(ctx, run)
		if err != nil || !reflect.DeepEqual(given, log) {
			t.Fatalf("%s: VerifyRun gave %d records, the log has %d (%v), or they differ", what, len(given), len(log), err)
		}
	}
	b := int64(store.AuditPageSize) // records b and b+1 are on either side of the first page boundary
	for _, seq := range []int64{b, b + 1, int64(len(recs))} {
		r.auditWrite(`UPDATE audit SET data = '{"attempt":1,"index":7}' WHERE run = ? AND seq = ?`, run, seq)
		check(fmt.Sprintf("record %d changed", seq), fmt.Sprintf("record %d was altered", seq))
		r.auditWrite(`UPDATE audit SET data = ? WHERE run = ? AND seq = ?`, dataArg(recs[seq-1]), run, seq)
		check(fmt.Sprintf("record %d put back", seq))
	}
	// Deleted, then put back.
	r.auditWrite(`DELETE FROM audit WHERE run = ? AND seq = ?`, run, b+1)
	check("record 513 deleted", fmt.Sprintf("record %d is missing", b+1))
	r.auditInsert(run, recs[b], b+1)
	check("record 513 put back")
	// Two records swapped across the boundary.
	swap := func() {
		r.auditWrite(`UPDATE audit SET seq = ? WHERE run = ? AND seq = ?`, 1<<40, run, b)
		r.auditWrite(`UPDATE audit SET seq = ? WHERE run = ? AND seq = ?`, b, run, b+1)
		r.auditWrite(`UPDATE audit SET seq = ? WHERE run = ? AND seq = ?`, b+1, run, 1<<40)
	}
	swap()
	check("records 512 and 513 swapped", fmt.Sprintf("record %d does not follow the record before it", b))
	swap()
	check("records 512 and 513 swapped back")
	// A record inserted at the boundary: the records after it moved up
	// one, a copy of record 512 as record 513.
	// (Through a range no record has: the key is checked row by row.)
	const away = 1 << 40
	r.auditWrite(`UPDATE audit SET seq = seq + ? WHERE run = ? AND seq > ?`, away, run, b)
	r.auditWrite(`UPDATE audit SET seq = seq - ? WHERE run = ? AND seq > ?`, away-1, run, away)
	r.auditInsert(run, recs[b-1], b+1)
	check("a record inserted after record 512", fmt.Sprintf("record %d does not follow the record before it", b+1))
	r.auditWrite(`DELETE FROM audit WHERE run = ? AND seq = ?`, run, b+1)
	r.auditWrite(`UPDATE audit SET seq = seq + ? WHERE run = ? AND seq > ?`, away, run, b+1)
	r.auditWrite(`UPDATE audit SET seq = seq - ? WHERE run = ? AND seq > ?`, away+1, run, away)
	check("the inserted record removed")
	// A call row changed: the call whose records are on either side of
	// the boundary (call 255 starts at record 513), and on either side of
	// a page of calls.
	rows := r.calls(run)
	for _, idx := range []int{int(b-2) / 2, store.CallPageSize - 1, store.CallPageSize} {
		r.hostileWrite(`UPDATE calls SET error = 'forged' WHERE run = ? AND idx = ?`, run, idx)
		check(fmt.Sprintf("call %d changed", idx),
			fmt.Sprintf(`the store disagrees with the audit log: calls row call %d of step "act" attempt 1: column error is "forged" in the store`, idx))
		r.hostileWrite(`UPDATE calls SET error = ? WHERE run = ? AND idx = ?`, rows[idx].Error, run, idx)
		check(fmt.Sprintf("call %d put back", idx))
	}
}

// plainStore hides the engine's optional parts (snapshots, pages):
// VerifyRun then makes the three reads it made before snapshots.
type plainStore struct{ store.Store }

// auditWrite makes a write to the audit log that its triggers refuse
// (they are dropped, or disabled, around it); it must change a row.
func (r *rig) auditWrite(query string, args ...any) {
	r.t.Helper()
	if r.h.Store.Postgres != nil {
		teststore.Exec(r.t, r.h, `ALTER TABLE audit DISABLE TRIGGER USER`)
		defer teststore.Exec(r.t, r.h, `ALTER TABLE audit ENABLE TRIGGER USER`)
		if n := teststore.Exec(r.t, r.h, query, args...); n == 0 {
			r.t.Fatalf("the write to the log changed no row: %s", query)
		}
		return
	}
	db, err := sql.Open("sqlite", "file:"+r.h.Store.SQLite+"?_pragma=busy_timeout(10000)")
	if err != nil {
		r.t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		r.t.Fatal(err)
	}
	defer tx.Rollback()
	rows, err := tx.Query(`SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'audit'`)
	if err != nil {
		r.t.Fatal(err)
	}
	var names, defs []string
	for rows.Next() {
		var n, d string
		if err := rows.Scan(&n, &d); err != nil {
			r.t.Fatal(err)
		}
		names, defs = append(names, n), append(defs, d)
	}
	rows.Close()
	for _, n := range names {
		if _, err := tx.Exec(`DROP TRIGGER ` + n); err != nil {
			r.t.Fatal(err)
		}
	}
	res, err := tx.Exec(query, args...)
	if err != nil {
		r.t.Fatalf("%s: %v", query, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		r.t.Fatalf("the write to the log changed no row: %s", query)
	}
	for _, d := range defs {
		if _, err := tx.Exec(d); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		r.t.Fatal(err)
	}
}

// auditInsert writes rec into the run's log as record seq, as it is
// (its prev and hash those it has).
func (r *rig) auditInsert(run string, rec audit.Record, seq int64) {
	r.t.Helper()
	r.auditWrite(`INSERT INTO audit (run, seq, time, kind, step, tool, data, prev, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		run, seq, rec.Time, rec.Kind, rec.Step, []byte(rec.Tool), dataArg(rec), rec.Prev, rec.Hash)
}

// dataArg is rec's data as the store holds it: NULL when it has none.
func dataArg(rec audit.Record) any {
	if rec.Data == nil {
		return nil
	}
	return string(rec.Data)
}
