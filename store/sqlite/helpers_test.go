package sqlite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/openplaybook/openplaybook/store"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
)

var bg = context.Background()

func openTest(t testing.TB) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "store.db"), nil)
}

func openAt(t testing.TB, path string, o *Options) *Store {
	t.Helper()
	s, err := OpenWith(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustTx(t testing.TB, s *Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Tx(bg, fn); err != nil {
		t.Fatal(err)
	}
}

const testDoc = `{"openplaybook":"1.6","manifest":{"id":"demo","version":"1.0.0"}}`

// newRun creates a run with one running step "work" and returns the run
// id and the step's attempt.
func newRun(t testing.TB, s *Store) (string, int) {
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

// startCall records an allowed call and its "call.started" audit record.
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

// finishCall records a call's success and its "call.succeeded" audit record.
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

// recordedCall is a read call recorded after it ran: RecordCall and the
// call.started and call.succeeded records in one AppendAll.
func recordedCall(tx store.Tx, run, step string, attempt int, tool, args string) (audit.Record, error) {
	c, err := tx.RecordCall(store.Call{CallKey: store.CallKey{Run: run, Step: step, Attempt: attempt}, Tool: tool, DefDigest: digest("def:" + tool),
		Args: jsontext.Value(args), ArgsDigest: digest(args), Decision: store.DecisionAllowed, State: store.CallSucceeded,
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
