package postgres_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/store"
)

// TestDeadlockIsAnError: two transactions that lock two runs in opposite
// orders deadlock; the server ends one (SQLSTATE 40P01), whose Tx returns
// that error, not a retry, and keeps nothing; the other commits.
func TestDeadlockIsAnError(t *testing.T) {
	s := openTest(t)
	a, _ := newRun(t, s)
	b, _ := newRun(t, s)
	var both sync.WaitGroup
	both.Add(2)
	errs := make([]error, 2)
	runs := make([]int, 2)
	var wg sync.WaitGroup
	for i, order := range [][2]string{{a, b}, {b, a}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Tx(bg, func(tx store.Tx) error {
				runs[i]++
				if _, err := tx.Append(audit.Record{Run: order[0], Kind: "first"}); err != nil {
					return err
				}
				both.Done()
				both.Wait() // each holds its first run's lock
				_, err := tx.Append(audit.Record{Run: order[1], Kind: "second"})
				return err
			})
		}()
	}
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err == nil {
			continue
		}
		failed++
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "40P01" {
			t.Errorf("tx %d: %v, want a deadlock (40P01)", i, err)
		}
	}
	if failed != 1 || runs[0] != 1 || runs[1] != 1 {
		t.Fatalf("%d of 2 transactions failed, functions ran %v times; want 1 failure and no retry", failed, runs)
	}
	for _, run := range []string{a, b} {
		if probs, err := s.VerifyAudit(bg, run); err != nil || len(probs) != 0 {
			t.Errorf("%s: VerifyAudit = %v, %v", run, probs, err)
		}
	}
	ra, _ := s.Audit(bg, a)
	rb, _ := s.Audit(bg, b)
	if len(ra)+len(rb) != 2+2 { // run.started of each, the winner's first and second
		t.Errorf("%d and %d records; want the winner's two only beside the two run.started", len(ra), len(rb))
	}
}

// TestDumpHoldsEverything: a value written into every kind of column
// (text, bytea, JSON, the built-ins' tables) is found in Dump's output as
// its raw bytes.
func TestDumpHoldsEverything(t *testing.T) {
	s := openTest(t)
	const secret = "sk_live_s3cr3t"
	run, attempt := newRun(t, s)
	mustTx(t, s, func(tx store.Tx) error {
		c, err := tx.StartCall(store.Call{CallKey: store.CallKey{Run: run, Step: "work", Attempt: attempt}, Tool: "tool\x00" + secret,
			Args: jsontext.Value(`{"key":"` + secret + `"}`), Decision: store.DecisionAllowed})
		if err != nil {
			return err
		}
		if err := tx.FinishCall(c.CallKey, store.CallFailed, nil, "401 for "+secret); err != nil {
			return err
		}
		if _, err := tx.Append(audit.Record{Run: run, Kind: "note", Data: jsontext.Value(`{"x":"` + secret + `"}`)}); err != nil {
			return err
		}
		if _, err := tx.(builtin.DataTx).AddNote(store.Note{Body: "body " + secret}); err != nil {
			return err
		}
		return tx.(builtin.DataTx).PutCustomer(store.Customer{ID: "c1", Name: secret, Email: "a@b"})
	})
	d, err := s.Dump(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"calls\t", "tool=tool\x00" + secret, `args={"key":"` + secret + `"}`, "error=401 for " + secret,
		`data={"x":"` + secret + `"}`, "body=body " + secret, "name=" + secret, "schema_version\tversion=3",
	} {
		if !bytes.Contains(d, []byte(want)) {
			t.Errorf("the dump lacks %q", want)
		}
	}
	if bytes.Contains(d, []byte("rowid=")) {
		t.Error("the dump shows the rowid column")
	}
}
