package sqlite

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// auditFixture makes a run with 1 + 2*n audit records and closes the
// store, leaving the file for raw SQL.
func auditFixture(t *testing.T, n int) (path, run string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "store.db")
	s, err := OpenWith(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, attempt := newRun(t, s)
	for range n {
		mustTx(t, s, func(tx store.Tx) error {
			_, err := auditedCall(tx, run, "work", attempt, "customer.get", `{"customerId":"c1"}`)
			return err
		})
	}
	if probs, err := s.VerifyAudit(bg, run); err != nil || len(probs) != 0 {
		t.Fatalf("VerifyAudit = %v, %v", probs, err)
	}
	return path, run
}

func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func verify(t *testing.T, path, run string) []audit.Problem {
	t.Helper()
	s := openAt(t, path, nil)
	probs, err := s.VerifyAudit(bg, run)
	if err != nil {
		t.Fatal(err)
	}
	return probs
}

func TestAuditChain(t *testing.T) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	var last audit.Record
	mustTx(t, s, func(tx store.Tx) error {
		var err error
		last, err = auditedCall(tx, run, "work", attempt, "note.add", `{"body":"hi"}`)
		return err
	})
	recs, err := s.Audit(bg, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[0].Prev != audit.Genesis || recs[1].Prev != recs[0].Hash || recs[2].Hash != last.Hash || string(recs[2].Data) != string(last.Data) {
		t.Errorf("records = %+v", recs)
	}
	for i, r := range recs {
		if r.Seq != int64(i+1) || r.Run != run || r.Time == "" {
			t.Errorf("record %d = %+v", i, r)
		}
	}
	seq, hash, err := s.AuditHead(bg, run)
	if err != nil || seq != 3 || hash != last.Hash {
		t.Errorf("head = %d %s %v", seq, hash, err)
	}
	// The caller's Seq, Prev and Hash are ignored; its Time is kept.
	mustTx(t, s, func(tx store.Tx) error {
		r, err := tx.Append(audit.Record{Run: run, Seq: 99, Prev: "x", Hash: "y", Time: "2026-01-01T00:00:00Z", Kind: "k"})
		if err == nil && (r.Seq != 4 || r.Prev != last.Hash || r.Time != "2026-01-01T00:00:00Z") {
			t.Errorf("appended %+v", r)
		}
		return err
	})
	if _, _, err := s.AuditHead(bg, "run_missing"); err == nil {
		t.Error("AuditHead of a missing run")
	}
	err = s.Tx(bg, func(tx store.Tx) error { _, err := tx.Append(audit.Record{Run: "run_missing", Kind: "k"}); return err })
	if err == nil {
		t.Error("appended to a missing run")
	}
	// Invalid JSON data cannot be sealed, and nothing is written.
	err = s.Tx(bg, func(tx store.Tx) error {
		_, err := tx.Append(audit.Record{Run: run, Kind: "k", Data: jsontext.Value(`{"a":`)})
		return err
	})
	if err == nil {
		t.Error("appended invalid JSON data")
	}
	if seq, _, _ := s.AuditHead(bg, run); seq != 4 {
		t.Errorf("head = %d after a failed append", seq)
	}
}

func TestAuditAppendOnly(t *testing.T) {
	path, run := auditFixture(t, 2)
	db := rawDB(t, path)
	for _, q := range []string{
		`UPDATE audit SET kind = 'x' WHERE seq = 2`,
		`UPDATE audit SET data = '{"amount":1}'`,
		`DELETE FROM audit WHERE seq = 5`,
		`DELETE FROM audit`,
		`UPDATE runs SET audit_last_seq = 4`,
	} {
		_, err := db.Exec(q)
		if err == nil || !(strings.Contains(err.Error(), "append-only") || strings.Contains(err.Error(), "only moves forward")) {
			t.Errorf("%s: %v", q, err)
		}
	}
	if probs := verify(t, path, run); len(probs) != 0 {
		t.Errorf("problems after refused edits: %v", probs)
	}
}

func TestAuditTamperEdit(t *testing.T) {
	path, run := auditFixture(t, 2)
	db := rawDB(t, path)
	if _, err := db.Exec(`DROP TRIGGER audit_no_update`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE audit SET data = '{"attempt":1,"index":0,"argsDigest":"forged"}' WHERE run = ? AND seq = 2`, run); err != nil {
		t.Fatal(err)
	}
	probs := verify(t, path, run)
	if len(probs) != 1 || probs[0].Seq != 2 || !strings.Contains(probs[0].Message, "altered") {
		t.Errorf("problems = %v, want record 2 altered", probs)
	}
}

func TestAuditTamperDeleteLast(t *testing.T) {
	path, run := auditFixture(t, 2)
	db := rawDB(t, path)
	if _, err := db.Exec(`DROP TRIGGER audit_no_delete`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM audit WHERE run = ? AND seq = 5`, run); err != nil {
		t.Fatal(err)
	}
	probs := verify(t, path, run)
	if len(probs) != 1 || probs[0].Seq != 4 || !strings.Contains(probs[0].Message, "head is record 5") {
		t.Errorf("problems = %v, want the head to name record 5", probs)
	}
}

func TestAuditTamperDeleteMiddle(t *testing.T) {
	path, run := auditFixture(t, 2)
	db := rawDB(t, path)
	if _, err := db.Exec(`DROP TRIGGER audit_no_delete`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM audit WHERE run = ? AND seq = 3`, run); err != nil {
		t.Fatal(err)
	}
	probs := verify(t, path, run)
	if len(probs) == 0 || probs[0].Seq != 4 {
		t.Errorf("problems = %v, want record 4 first", probs)
	}
}

func TestAuditTamperHeadReset(t *testing.T) {
	path, run := auditFixture(t, 1)
	db := rawDB(t, path)
	for _, q := range []string{`DROP TRIGGER audit_no_delete`, `DROP TRIGGER audit_head_forward`, `DELETE FROM audit WHERE seq > 1`,
		`UPDATE runs SET audit_last_seq = 0`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	probs := verify(t, path, run)
	if len(probs) != 1 || !strings.Contains(probs[0].Message, "reset") {
		t.Errorf("problems = %v", probs)
	}
}
