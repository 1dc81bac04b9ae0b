package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/storetest"

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

// mustTx runs fn in one transaction of s and fails the test on an error.
func mustTx(t testing.TB, s *Store, fn func(store.Tx) error) { t.Helper(); storetest.MustTx(t, s, fn) }

// newRun creates a run with one running step "work" (storetest.NewRun).
func newRun(t testing.TB, s *Store) (string, int) { t.Helper(); return storetest.NewRun(t, s) }

// The conformance suite's call helpers.
var (
	digest       = storetest.Digest
	startCall    = storetest.StartCall
	finishCall   = storetest.FinishCall
	auditedCall  = storetest.AuditedCall
	recordedCall = storetest.RecordedCall
)

const testDoc = storetest.TestDoc

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
