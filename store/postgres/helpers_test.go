package postgres_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

func mustTx(t testing.TB, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Tx(bg, fn); err != nil {
		t.Fatal(err)
	}
}

const testDoc = `{"openplaybook":"1.6","manifest":{"id":"demo","version":"1.0.0"}}`

// newRun creates a run with one running step "work" and returns the run
// id and the step's attempt.
func newRun(t testing.TB, s store.Store) (string, int) {
	t.Helper()
	var run string
	var attempt int
	mustTx(t, s, func(tx store.Tx) error {
		r, err := tx.CreateRun(store.Run{PlaybookID: "demo", PlaybookVersion: "1.0.0", Document: []byte(testDoc),
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

func digest(b string) string {
	sum := sha256.Sum256([]byte(b))
	return hex.EncodeToString(sum[:])
}

// startCall records an allowed, side-effecting call and its
// "call.started" audit record.
func startCall(tx store.Tx, run, step string, attempt int, tool, args string) (store.Call, error) {
	c, err := tx.StartCall(store.Call{CallKey: store.CallKey{Run: run, Step: step, Attempt: attempt}, Tool: tool, DefDigest: digest("def:" + tool),
		Args: jsontext.Value(args), ArgsDigest: digest(args), Decision: store.DecisionAllowed, SideEffecting: true})
	if err != nil {
		return c, err
	}
	_, err = tx.Append(audit.Record{Run: run, Kind: "call.started", Step: step, Tool: tool,
		Data: jsontext.Value(fmt.Sprintf(`{"attempt":%d,"index":%d,"argsDigest":%q}`, attempt, c.Index, c.ArgsDigest))})
	return c, err
}

// finishCall records a call's success and its "call.succeeded" record.
func finishCall(tx store.Tx, c store.Call) (audit.Record, error) {
	if err := tx.FinishCall(c.CallKey, store.CallSucceeded, jsontext.Value(`{"ok":true}`), ""); err != nil {
		return audit.Record{}, err
	}
	return tx.Append(audit.Record{Run: c.Run, Kind: "call.succeeded", Step: c.Step, Tool: c.Tool,
		Data: jsontext.Value(fmt.Sprintf(`{"attempt":%d,"index":%d}`, c.Attempt, c.Index))})
}

// auditedCall is one whole audited call in one transaction.
func auditedCall(tx store.Tx, run, step string, attempt int, tool, args string) (audit.Record, error) {
	c, err := startCall(tx, run, step, attempt, tool, args)
	if err != nil {
		return audit.Record{}, err
	}
	return finishCall(tx, c)
}
