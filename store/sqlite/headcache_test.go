package sqlite

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/store"

	"github.com/openplaybook/openplaybook/audit"
)

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
