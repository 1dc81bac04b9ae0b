package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// Helpers for the engines' tests and benchmarks, over the store contract
// only: a run with one running step, and whole audited calls as the
// runtime writes them (StartCall or RecordCall with their call.started and
// call.succeeded records). The conformance suite uses them too.

// MustTx runs fn in one transaction of s and fails the test on an error.
func MustTx(t testing.TB, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Tx(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

// TestDoc is the document of the runs NewRun creates.
const TestDoc = `{"openplaybook":"1.6","manifest":{"id":"demo","version":"1.0.0"}}`

// NewRun creates a run with one running step "work" and returns the run
// id and the step's attempt.
func NewRun(t testing.TB, s store.Store) (string, int) {
	t.Helper()
	var run string
	var attempt int
	MustTx(t, s, func(tx store.Tx) error {
		r, err := tx.CreateRun(store.Run{PlaybookID: "demo", PlaybookVersion: "1.0.0", Document: []byte(TestDoc),
			HarnessPath: "harness.json", Input: jsontext.Value(`{"customerId":"c1"}`)})
		if err != nil {
			return err
		}
		run = r.ID
		if _, err := tx.Append(audit.Record{Run: run, Kind: "run.started"}); err != nil {
			return err
		}
		attempt, err = tx.StartStep(run, "work")
		return err
	})
	return run, attempt
}

// Digest is the SHA-256 of b, in hex.
func Digest(b string) string {
	sum := sha256.Sum256([]byte(b))
	return hex.EncodeToString(sum[:])
}

// StartCall records an allowed call and its "call.started" audit record.
func StartCall(tx store.Tx, run, step string, attempt int, tool, args string) (store.Call, error) {
	c, err := tx.StartCall(store.Call{CallKey: store.CallKey{Run: run, Step: step, Attempt: attempt}, Tool: tool, DefDigest: Digest("def:" + tool),
		Args: jsontext.Value(args), ArgsDigest: Digest(args), Decision: store.DecisionAllowed, SideEffecting: true})
	if err != nil {
		return c, err
	}
	_, err = tx.Append(audit.Record{Run: run, Kind: "call.started", Step: step, Tool: tool,
		Data: jsontext.Value(fmt.Sprintf(`{"attempt":%d,"index":%d,"argsDigest":%q}`, attempt, c.Index, c.ArgsDigest))})
	return c, err
}

// FinishCall records a call's success and its "call.succeeded" audit record.
func FinishCall(tx store.Tx, c store.Call) (audit.Record, error) {
	if err := tx.FinishCall(c.CallKey, store.CallSucceeded, jsontext.Value(`{"ok":true}`), ""); err != nil {
		return audit.Record{}, err
	}
	return tx.Append(audit.Record{Run: c.Run, Kind: "call.succeeded", Step: c.Step, Tool: c.Tool,
		Data: jsontext.Value(fmt.Sprintf(`{"attempt":%d,"index":%d}`, c.Attempt, c.Index))})
}

// AuditedCall is one whole audited call in one transaction.
func AuditedCall(tx store.Tx, run, step string, attempt int, tool, args string) (audit.Record, error) {
	c, err := StartCall(tx, run, step, attempt, tool, args)
	if err != nil {
		return audit.Record{}, err
	}
	return FinishCall(tx, c)
}

// RecordedCall is a read call recorded after it ran: RecordCall and the
// call.started and call.succeeded records in one AppendAll.
func RecordedCall(tx store.Tx, run, step string, attempt int, tool, args string) (audit.Record, error) {
	c, err := tx.RecordCall(store.Call{CallKey: store.CallKey{Run: run, Step: step, Attempt: attempt}, Tool: tool, DefDigest: Digest("def:" + tool),
		Args: jsontext.Value(args), ArgsDigest: Digest(args), Decision: store.DecisionAllowed, State: store.CallSucceeded,
		Result: jsontext.Value(`{"ok":true}`)})
	if err != nil {
		return audit.Record{}, err
	}
	recs, err := tx.AppendAll(
		audit.Record{Run: run, Kind: "call.started", Step: step, Tool: tool,
			Data: jsontext.Value(fmt.Sprintf(`{"attempt":%d,"index":%d,"argsDigest":%q}`, attempt, c.Index, c.ArgsDigest))},
		audit.Record{Run: run, Kind: "call.succeeded", Step: step, Tool: tool,
			Data: jsontext.Value(fmt.Sprintf(`{"attempt":%d,"index":%d}`, attempt, c.Index))})
	if err != nil {
		return audit.Record{}, err
	}
	return recs[1], nil
}
