package sqlite

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/store"
)

func TestOpenTwice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s1, err := OpenWith(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	run, _ := newRun(t, s1)
	// A second store on the same file while the first is open, then again
	// after both closed: the schema is created once and kept.
	s2, err := OpenWith(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.GetRun(bg, run); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	s1.Close()
	s3 := openAt(t, path, nil)
	r, err := s3.GetRun(bg, run)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Document) != testDoc {
		t.Errorf("document = %q", r.Document)
	}
	var versions []int
	rows, err := s3.rdb.Query(`SELECT version FROM schema_version ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v int
		rows.Scan(&v)
		versions = append(versions, v)
	}
	rows.Close()
	if fmt.Sprint(versions) != fmt.Sprint([]int{1, 2, 3, 4, 5, 6, 7, 8}) || SchemaVersion != 8 {
		t.Errorf("schema versions = %v, SchemaVersion %d", versions, SchemaVersion)
	}
	for _, p := range []string{"journal_mode", "synchronous", "foreign_keys", "busy_timeout"} {
		var v string
		if err := s3.rdb.QueryRow("PRAGMA " + p).Scan(&v); err != nil {
			t.Fatal(err)
		}
		t.Logf("read pool %s = %s", p, v)
	}
	var jm, sync, fk string
	mustTx(t, s3, func(tx store.Tx) error {
		tx.(*Tx).row("PRAGMA journal_mode").Scan(&jm)
		tx.(*Tx).row("PRAGMA synchronous").Scan(&sync)
		return tx.(*Tx).row("PRAGMA foreign_keys").Scan(&fk)
	})
	if jm != "wal" || sync != "2" || fk != "1" {
		t.Errorf("writer: journal_mode %s, synchronous %s (2 is FULL), foreign_keys %s", jm, sync, fk)
	}
}

func TestOpenNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := OpenWith(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_version VALUES (99, 'x')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := OpenWith(path, nil); err == nil || !strings.Contains(err.Error(), "schema version 99") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open = %v, want an error about schema version 99", err)
	}
}

func TestOpenOptions(t *testing.T) {
	if _, err := OpenWith(filepath.Join(t.TempDir(), "x.db"), &Options{Synchronous: "OFF"}); err == nil {
		t.Error("synchronous OFF accepted")
	}
	if _, err := OpenWith(":memory:", nil); err == nil {
		t.Error(":memory: accepted")
	}
	s := openAt(t, filepath.Join(t.TempDir(), "n.db"), &Options{Synchronous: "NORMAL"})
	var v string
	mustTx(t, s, func(tx store.Tx) error { return tx.(*Tx).row("PRAGMA synchronous").Scan(&v) })
	if v != "1" {
		t.Errorf("synchronous = %s, want 1 (NORMAL)", v)
	}
}

func TestDump(t *testing.T) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	const secret = "sk_test_DUMPME\x00\x01"
	mustTx(t, s, func(tx store.Tx) error {
		_, err := auditedCall(tx, run, "work", attempt, "tool"+secret, `{"k":"v"}`)
		return err
	})
	if err := s.SeedCustomers(bg, []store.Customer{{ID: "c1", Name: "Ana", Email: "ana@example.com"}}); err != nil {
		t.Fatal(err)
	}
	d, err := s.Dump(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"runs\tid=" + run, "calls\t", "audit\t", "tool=tool" + secret, "customers\tid=c1", "schema_version\t", testDoc} {
		if !bytes.Contains(d, []byte(want)) {
			t.Errorf("dump lacks %q", want)
		}
	}
	if testing.Verbose() {
		t.Logf("%s", d)
	}
}

// TestOutcomeUnknown: a call left started by a process that died is
// found on reopening the file and becomes outcome_unknown.
func TestOutcomeUnknown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := OpenWith(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	run, attempt := newRun(t, s)
	var c store.Call
	mustTx(t, s, func(tx store.Tx) error {
		c, err = startCall(tx, run, "work", attempt, "stripe.refund", `{"charge":"ch_1"}`)
		return err
	})
	s.Close() // the process "dies" while the refund runs

	s = openAt(t, path, nil)
	started, err := s.Calls(bg, run, store.CallFilter{States: []store.CallState{store.CallStarted}})
	if err != nil || len(started) != 1 || started[0].CallKey != c.CallKey {
		t.Fatalf("started calls = %+v, %v", started, err)
	}
	var a store.Approval
	mustTx(t, s, func(tx store.Tx) error {
		a, err = tx.MarkOutcomeUnknown(c.CallKey, "process ended before the outcome was recorded")
		return err
	})
	if a.Kind != store.KindOutcomeUnknown || a.Status != store.ApprovalPending || a.Call == nil || *a.Call != c.CallKey ||
		a.Tool != c.Tool || a.ArgsDigest != c.ArgsDigest || a.DefDigest != c.DefDigest || !a.Expires.IsZero() {
		t.Errorf("decision = %+v", a)
	}
	// Nothing may re-run it before a person decides.
	mustTx(t, s, func(tx store.Tx) error {
		if _, ok, err := tx.ConsumeApproval(run, "work", c.Tool, c.DefDigest, c.ArgsDigest); ok || err != nil {
			t.Errorf("consumed an undecided outcome-unknown decision: %v %v", ok, err)
		}
		return nil
	})
	// Marking it again is a state error.
	err = s.Tx(bg, func(tx store.Tx) error { _, err := tx.MarkOutcomeUnknown(c.CallKey, ""); return err })
	if !errors.Is(err, store.ErrState) {
		t.Errorf("marking twice: %v", err)
	}
	pend, _ := s.PendingApprovals(bg, run)
	if len(pend) != 1 || pend[0].ID != a.ID {
		t.Errorf("pending = %+v", pend)
	}
	mustTx(t, s, func(tx store.Tx) error {
		_, err := tx.DecideApproval(a.ID, true, "refund not in Stripe: retry", "ana")
		return err
	})
	n := 0
	for range 3 {
		mustTx(t, s, func(tx store.Tx) error {
			if _, ok, err := tx.ConsumeApproval(run, "work", c.Tool, c.DefDigest, c.ArgsDigest); ok {
				n++
			} else if err != nil {
				return err
			}
			return nil
		})
	}
	if n != 1 {
		t.Errorf("the retry was let through %d times", n)
	}
	calls, _ := s.Calls(bg, run, store.CallFilter{})
	if len(calls) != 1 || calls[0].State != store.CallOutcomeUnknown {
		t.Errorf("calls = %+v", calls)
	}
}
