package sqlite

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/openplaybook/openplaybook/store"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
)

func appendRec(run string, i int) func(store.Tx) error {
	return func(tx store.Tx) error {
		_, err := tx.Append(audit.Record{Run: run, Kind: "note", Data: jsontext.Value(fmt.Sprintf(`{"i":%d}`, i))})
		return err
	}
}

func mustVerify(t *testing.T, s *Store, run string, wantSeq int64) {
	t.Helper()
	probs, err := s.VerifyAudit(bg, run)
	if err != nil || len(probs) != 0 {
		t.Fatalf("VerifyAudit = %v, %v", probs, err)
	}
	if seq, _, err := s.AuditHead(bg, run); err != nil || seq != wantSeq {
		t.Fatalf("head = %d, %v; want %d", seq, err, wantSeq)
	}
}

// blockWriter queues a function that holds the writer until the returned
// function is called, and waits until it runs, so that what is queued next
// forms one batch.
func blockWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	started, rel := make(chan struct{}), make(chan struct{})
	q := s.Queue(bg, func(store.Tx) error { close(started); <-rel; return nil })
	<-started
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(rel)
			if err := q.Wait(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// The writer's head cache must notice another connection's appends: a
// second Store on the same file appends between the first's batches.
func TestHeadCacheSecondStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s1 := openAt(t, path, nil)
	s2 := openAt(t, path, nil)
	run, _ := newRun(t, s1)
	n := int64(1)
	for i := range 10 {
		for _, s := range []*Store{s1, s1, s2, s1, s2, s2} {
			mustTx(t, s, appendRec(run, i))
			n++
		}
		// Both stores in one batch of each, interleaved.
		q1, q2 := s1.Queue(bg, appendRec(run, i)), s1.Queue(bg, appendRec(run, i))
		mustTx(t, s2, appendRec(run, i))
		if err := errors.Join(q1.Wait(), q2.Wait()); err != nil {
			t.Fatal(err)
		}
		n += 3
	}
	mustVerify(t, s1, run, n)
	mustVerify(t, s2, run, n)
}

// A raw connection (the CLI, a script) appending through SQL is noticed too.
func TestHeadCacheRawWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s := openAt(t, path, nil)
	run, _ := newRun(t, s)
	mustTx(t, s, appendRec(run, 1))
	db := rawDB(t, path)
	var seq int64
	var prev string
	if err := db.QueryRow(`SELECT audit_last_seq, audit_last_hash FROM runs WHERE id = ?`, run).Scan(&seq, &prev); err != nil {
		t.Fatal(err)
	}
	rec, err := audit.Seal(audit.Record{Run: run, Seq: seq + 1, Time: "2026-01-01T00:00:00Z", Kind: "raw"}, prev)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO audit (run, seq, time, kind, step, tool, data, prev, hash) VALUES (?, ?, ?, ?, '', x'', NULL, ?, ?)`,
		run, rec.Seq, rec.Time, rec.Kind, rec.Prev, rec.Hash); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`UPDATE runs SET audit_last_seq = ?, audit_last_hash = ? WHERE id = ?`, rec.Seq, rec.Hash, run); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	mustTx(t, s, appendRec(run, 2))
	mustVerify(t, s, run, 4)
}

// A function that fails in a batch is rolled back to its savepoint, and so
// are its head cache changes: the functions after it in the same batch,
// and later batches, append on the real head.
func TestHeadCacheFailedFunction(t *testing.T) {
	s := openTest(t)
	run, _ := newRun(t, s)
	boom := errors.New("boom")
	release := blockWriter(t, s)
	qa := s.Queue(bg, appendRec(run, 1))
	qb := s.Queue(bg, func(tx store.Tx) error {
		if err := appendRec(run, 2)(tx); err != nil {
			return err
		}
		if _, err := tx.AppendAll(audit.Record{Run: run, Kind: "x"}, audit.Record{Run: run, Kind: "y"}); err != nil {
			return err
		}
		return boom
	})
	qc := s.Queue(bg, appendRec(run, 3))
	// An Append that fails itself (invalid UTF-8 is refused before anything
	// is written), in a function that carries on and then fails.
	qd := s.Queue(bg, func(tx store.Tx) error {
		if _, err := tx.Append(audit.Record{Run: run, Kind: "bad", Tool: "\xff"}); err == nil {
			return errors.New("appended invalid UTF-8")
		}
		return boom
	})
	qe := s.Queue(bg, appendRec(run, 4))
	release()
	for i, q := range []store.Queued{qa, qb, qc, qd, qe} {
		err := q.Wait()
		if want := i == 1 || i == 3; want != errors.Is(err, boom) || (!want && err != nil) {
			t.Errorf("function %d: %v", i, err)
		}
	}
	mustTx(t, s, appendRec(run, 5))
	mustVerify(t, s, run, 5)
	recs, err := s.Audit(bg, run)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs[1:] {
		got = append(got, string(r.Data))
	}
	if want := `{"i":1} {"i":3} {"i":4} {"i":5}`; strings.Join(got, " ") != want {
		t.Errorf("records %s, want %s", strings.Join(got, " "), want)
	}

	// A batch of one function that fails (no savepoint: the whole
	// transaction is rolled back) does not poison the cache either.
	if err := s.Tx(bg, func(tx store.Tx) error {
		if err := appendRec(run, 6)(tx); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	mustTx(t, s, appendRec(run, 7))
	mustVerify(t, s, run, 6)
}

func TestAppendAll(t *testing.T) {
	s := openTest(t)
	run, _ := newRun(t, s)
	other, _ := newRun(t, s)
	var got []audit.Record
	mustTx(t, s, func(tx store.Tx) error {
		if out, err := tx.AppendAll(); err != nil || out != nil {
			return fmt.Errorf("AppendAll() = %v, %v", out, err)
		}
		one, err := tx.Append(audit.Record{Run: run, Kind: "one"})
		if err != nil {
			return err
		}
		var recs []audit.Record
		for i := range 40 { // more than one INSERT's worth
			recs = append(recs, audit.Record{Run: run, Kind: "many", Step: "work", Tool: "t\x00ool",
				Data: jsontext.Value(fmt.Sprintf(`{"i":%d}`, i))})
		}
		recs[3].Time = "2026-01-01T00:00:00Z"
		out, err := tx.AppendAll(recs...)
		if err != nil {
			return err
		}
		got = append([]audit.Record{one}, out...)
		_, err = tx.Append(audit.Record{Run: run, Kind: "after"})
		return err
	})
	if len(got) != 41 {
		t.Fatalf("%d records", len(got))
	}
	for i, r := range got {
		if r.Seq != int64(i+2) {
			t.Errorf("record %d: seq %d", i, r.Seq)
		}
		if i > 0 && r.Prev != got[i-1].Hash {
			t.Errorf("record %d: prev %s, want %s", i, r.Prev, got[i-1].Hash)
		}
	}
	if got[4].Time != "2026-01-01T00:00:00Z" || got[5].Time == got[4].Time {
		t.Errorf("times %q, %q", got[4].Time, got[5].Time)
	}
	stored, err := s.Audit(bg, run)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stored[1:42], got) {
		t.Errorf("stored records differ from those returned")
	}
	mustVerify(t, s, run, 43)

	// Records of two runs: refused, nothing appended.
	err = s.Tx(bg, func(tx store.Tx) error {
		_, err := tx.AppendAll(audit.Record{Run: run, Kind: "a"}, audit.Record{Run: other, Kind: "b"})
		return err
	})
	if err == nil {
		t.Error("AppendAll of two runs succeeded")
	}
	// An invalid record among valid ones: nothing appended.
	err = s.Tx(bg, func(tx store.Tx) error {
		if _, err := tx.AppendAll(audit.Record{Run: run, Kind: "a"}, audit.Record{Run: run, Kind: "b", Tool: "\xff"}); err == nil {
			return errors.New("appended invalid UTF-8")
		}
		return nil // carry on: the cache must not hold the refused records
	})
	if err != nil {
		t.Fatal(err)
	}
	mustTx(t, s, appendRec(run, 1))
	mustVerify(t, s, run, 44)
	mustVerify(t, s, other, 1)
	if err := s.Tx(bg, func(tx store.Tx) error {
		_, err := tx.AppendAll(audit.Record{Run: "run_none", Kind: "a"})
		return err
	}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AppendAll to no run: %v", err)
	}
}
