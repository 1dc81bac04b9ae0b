package sqlite

import (
	"context"
	"fmt"

	"github.com/openplaybook/openplaybook/store"
)

// Queued is a function handed to the writer by [Store.Queue]; Wait waits
// for its outcome.
type Queued struct {
	r *request
}

// Queue hands fn to the writer, as [Store.Tx] does, and returns at once,
// without waiting for fn to run or its transaction to commit. The writer
// takes functions in the order they were handed to it (Queue, Tx and Flush
// share one FIFO queue) and commits them in that order, group commit as
// for Tx; fn must follow Tx's rules.
//
// Ordering: a Tx (or Flush) called after Queue returned returns only once
// fn was committed durably in the same or an earlier transaction, or
// failed. So when that later Tx returns nil, fn's change is durable unless
// fn failed, and fn's failure, if any, is reported by [Queued.Wait] or by
// [Store.Flush].
//
// Crash window: until fn's transaction has committed, fn's change exists
// only in memory and a kill -9 (or power cut) loses it without a trace.
// It is durable once Wait returns nil, or once a Tx or Flush called after
// Queue returned has returned (a Tx's nil or its own fn's error, a
// Flush's nil or a queued function's error, not ctx's error or
// [ErrClosed]). Between Queue and that moment the caller must not tell
// anyone outside the process that the change happened.
//
// ctx is checked until fn starts: when it is done before, fn does not run
// and its error is ctx's. After [Store.Close], the Queued fails with
// [ErrClosed]. Close commits (or fails) every function queued before it.
func (s *Store) Queue(ctx context.Context, fn func(store.Tx) error) store.Queued {
	r := newRequest(ctx, fn)
	r.queued = true
	if err := ctx.Err(); err != nil {
		s.failQueued(r, err)
	} else if err := s.enqueue(r); err != nil {
		s.failQueued(r, err)
	}
	return &Queued{r}
}

// failQueued fails a request that never reached the writer.
func (s *Store) failQueued(r *request, err error) {
	r.err = err
	s.keepFailure(r)
	close(r.done)
}

// Wait waits for the queued function's outcome, as [Store.Tx] returns it:
// the function's error (nothing it did was kept), a commit error (nothing
// was kept), ctx's error or [ErrClosed] (it did not run), or nil once its
// transaction is durable. A function's failure is reported by Wait and, if
// Wait was not called before [Store.Flush] collected it, by Flush as well.
// Wait may be called more than once and from any goroutine; it does not
// hang: every queued function is answered, also on Close.
func (q *Queued) Wait() error {
	q.r.waited.Store(true)
	<-q.r.done
	return q.r.err
}

// Done is closed once the queued function has its outcome (Wait no
// longer blocks).
func (q *Queued) Done() <-chan struct{} { return q.r.done }

// Flush returns once everything handed to the writer before it (by Queue
// and Tx) is committed durably or has failed, FIFO as [Store.Queue]
// describes. It returns nil when no function queued by [Store.Queue] has
// failed since the last Flush, other than those whose [Queued.Wait] was
// called; otherwise the first such failure's error (wrapped, so that
// [errors.Is] sees the cause; nothing of that function was kept). Each
// failure is reported by one Flush. A caller that queues without waiting
// thus learns of a failure at its next Flush.
//
// ctx is checked until the writer reaches the flush: when ctx is done
// before, Flush returns ctx's error and leaves the failures for the next
// Flush. After Close it returns [ErrClosed].
func (s *Store) Flush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := newRequest(ctx, nil)
	if err := s.enqueue(r); err != nil {
		return err
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqQueued, reqCancelled) {
			return ctx.Err()
		}
		<-r.done
	}
	var first error
	n := 0
	for _, f := range r.fails {
		if f.waited.Load() {
			continue
		}
		if first == nil {
			first = f.err
		}
		n++
	}
	switch {
	case n == 1:
		return fmt.Errorf("store: a queued transaction failed: %w", first)
	case n > 1:
		return fmt.Errorf("store: %d queued transactions failed, the first: %w", n, first)
	}
	return nil
}
