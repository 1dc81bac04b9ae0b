package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

func TestQueueErrors(t *testing.T) {
	s := openTest(t)
	run, _ := newRun(t, s)
	boom := errors.New("boom")
	fail := func(store.Tx) error { return boom }
	if err := s.Flush(bg); err != nil {
		t.Fatal(err)
	}
	q1 := s.Queue(bg, appendRec(run, 1))
	q2 := s.Queue(bg, fail)
	q3 := s.Queue(bg, appendRec(run, 2))
	if err := s.Flush(bg); !errors.Is(err, boom) {
		t.Fatalf("Flush = %v, want boom", err)
	}
	if err := errors.Join(q1.Wait(), q3.Wait()); err != nil {
		t.Fatal(err)
	}
	if err := q2.Wait(); !errors.Is(err, boom) {
		t.Fatalf("Wait = %v", err)
	}
	if err := q2.Wait(); !errors.Is(err, boom) {
		t.Fatalf("second Wait = %v", err)
	}
	if err := s.Flush(bg); err != nil {
		t.Fatalf("second Flush = %v: a failure is reported once", err)
	}
	// A failure the caller waited for is not reported by Flush again.
	if err := s.Queue(bg, fail).Wait(); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if err := s.Flush(bg); err != nil {
		t.Fatalf("Flush after Wait = %v", err)
	}
	// A panic is an error, two failures are counted.
	s.Queue(bg, func(store.Tx) error { panic("oops") })
	s.Queue(bg, fail)
	if err := s.Flush(bg); err == nil || !strings.Contains(err.Error(), "2 queued") || !strings.Contains(err.Error(), "oops") {
		t.Fatalf("Flush = %v", err)
	}
	mustVerify(t, s, run, 3)
}

func TestQueueCancel(t *testing.T) {
	s := openTest(t)
	run, _ := newRun(t, s)
	release := blockWriter(t, s)
	ctx, cancel := context.WithCancel(bg)
	q := s.Queue(ctx, appendRec(run, 1))
	ran := false
	txDone := make(chan error, 1)
	go func() {
		txDone <- s.Tx(ctx, func(tx store.Tx) error { ran = true; return appendRec(run, 2)(tx) })
	}()
	fctx, fcancel := context.WithCancel(bg)
	flushDone := make(chan error, 1)
	go func() { flushDone <- s.Flush(fctx) }()
	waitQueued(t, s, 3) // q, the Tx and the Flush
	cancel()
	fcancel()
	// Tx and Flush give up while the writer is busy: ctx is checked until
	// the function (the flush) is reached.
	for _, ch := range []chan error{txDone, flushDone} {
		select {
		case err := <-ch:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("got %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a cancelled Tx or Flush did not return while the writer was busy")
		}
	}
	release()
	// The cancelled flush left the failure for the next one.
	if err := s.Flush(bg); !errors.Is(err, context.Canceled) {
		t.Errorf("Flush = %v, want the queued function's context.Canceled", err)
	}
	if err := q.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait = %v, want context.Canceled", err)
	}
	if ran {
		t.Error("a cancelled Tx ran")
	}
	if q := s.Queue(ctx, appendRec(run, 3)); !errors.Is(q.Wait(), context.Canceled) {
		t.Error("Queue with a done ctx did not fail")
	}
	s.Flush(bg)
	mustVerify(t, s, run, 1)
}

// Close commits what was queued before it, answers everything, and does
// not hang.
func TestQueueClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := OpenWith(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	run, _ := newRun(t, s)
	release := blockWriter(t, s)
	var qs []store.Queued
	for i := range 20 {
		qs = append(qs, s.Queue(bg, appendRec(run, i)))
	}
	qs = append(qs, s.Queue(bg, func(store.Tx) error { return errors.New("boom") }))
	txDone := make(chan error, 1)
	go func() { txDone <- s.Tx(bg, appendRec(run, 20)) }()
	waitQueued(t, s, 22)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	time.Sleep(20 * time.Millisecond)
	release()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close hung")
	}
	for i, q := range qs {
		if err := q.Wait(); (err != nil) != (i == 20) {
			t.Errorf("queued function %d: %v", i, err)
		}
	}
	if err := <-txDone; err != nil {
		t.Errorf("Tx queued before Close: %v", err)
	}
	if err := s.Queue(bg, appendRec(run, 99)).Wait(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Queue after Close: %v", err)
	}
	if err := s.Flush(bg); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Flush after Close: %v", err)
	}
	if err := s.Tx(bg, appendRec(run, 99)); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Tx after Close: %v", err)
	}
	s2 := openAt(t, path, nil)
	mustVerify(t, s2, run, 22)
}

// waitQueued waits until n requests wait for the writer.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		got := len(s.queue)
		s.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests queued, want %d", got, n)
		}
	}
}
