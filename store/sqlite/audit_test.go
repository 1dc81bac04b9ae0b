package sqlite

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

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
