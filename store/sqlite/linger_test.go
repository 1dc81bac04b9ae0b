package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

// TestQueueLingerEndsForWaiters: with a linger far longer than the test
// may take, queued work is still committed as soon as a Tx, a Flush or
// Close comes: only queued work ever waits.
func TestQueueLingerEndsForWaiters(t *testing.T) {
	s, err := OpenWith(filepath.Join(t.TempDir(), "linger.db"), &Options{QueueLinger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var run store.Run
	if err := s.Tx(ctx, func(tx store.Tx) error {
		var err error
		run, err = tx.CreateRun(store.Run{PlaybookID: "p", PlaybookVersion: "1", Document: []byte("{}")})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	q := s.Queue(ctx, func(tx store.Tx) error { return tx.SetRunStatus(run.ID, store.RunWaiting, "queued") })
	// A Tx after it: it must not wait for the linger, and q is durable
	// when it returns.
	if err := s.Tx(ctx, func(tx store.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-q.Done():
	default:
		t.Fatal("a Tx returned before the work queued ahead of it was committed")
	}
	if err := q.Wait(); err != nil {
		t.Fatal(err)
	}
	q2 := s.Queue(ctx, func(tx store.Tx) error { return tx.SetRunStatus(run.ID, store.RunRunning, "") })
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q2.Wait(); err != nil {
		t.Fatal(err)
	}
	q3 := s.Queue(ctx, func(tx store.Tx) error { return tx.SetRunStatus(run.ID, store.RunWaiting, "at close") })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q3.Wait(); err != nil {
		t.Fatalf("work queued before Close: %v", err)
	}
}
