package replica

import (
	"context"
	"fmt"
	"sync"

	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/store"
)

// Owned returns a view of s for one execution by the replica owner
// (its id, as [store.Store.Tx]'s [store.Tx.ClaimRun] records it):
//
//   - LockRun takes s's run lock, then claims the run for owner in a
//     transaction of its own ([store.Tx.ClaimRun]: the owner epoch goes up by
//     one) and remembers the epoch; a claim that fails releases the lock
//     and is LockRun's error.
//   - Tx and Queue make every function's transaction conditional on each
//     run claimed through this view still having owner and that epoch
//     ([store.Tx.Fence]): once another replica has claimed it, they fail with
//     [store.ErrFenced] and keep nothing.
//   - ClaimCreated claims a run in the transaction that creates it
//     ([store.CreateClaimer]), so that a replica that dies before it
//     executes a run it created leaves it to be adopted.
//   - alive, when not nil, is called before every Tx and Queue: an error
//     from it (the replica lost its liveness, see docs/store.md,
//     "Replicas") fails the function with store.ErrFenced before anything is
//     sent.
//
// The view keeps s's [builtin.Data] when s has it.
func Owned(s store.Store, owner string, alive func() error) store.Store {
	o := &owned{Store: s, owner: owner, alive: alive, epochs: map[string]int64{}}
	if d, ok := s.(builtin.Data); ok {
		return &ownedData{owned: o, Data: d}
	}
	return o
}

type owned struct {
	store.Store
	owner string
	alive func() error

	mu     sync.Mutex
	epochs map[string]int64 // runs claimed through the view, and their epoch
}

type ownedData struct {
	*owned
	builtin.Data
}

// Unwrap returns the wrapped store.
func (o *owned) Unwrap() store.Store { return o.Store }

func (o *owned) LockRun(run string) (func(), error) {
	unlock, err := o.Store.LockRun(run)
	if err != nil {
		return nil, err
	}
	var epoch int64
	err = o.Store.Tx(context.Background(), func(tx store.Tx) error {
		var err error
		epoch, err = tx.ClaimRun(run, o.owner)
		return err
	})
	if err != nil {
		unlock()
		return nil, fmt.Errorf("claiming run %s: %w", run, err)
	}
	o.mu.Lock()
	o.epochs[run] = epoch
	o.mu.Unlock()
	return unlock, nil
}

// ClaimCreated claims run, created in tx, for the view's owner
// ([store.CreateClaimer]): epoch 1 from the commit that creates it. The
// view does not fence on it: the execution's LockRun claims it again.
func (o *owned) ClaimCreated(tx store.Tx, run string) error {
	_, err := tx.ClaimRun(run, o.owner)
	return err
}

// Epoch returns the epoch the view claimed run at (0 when it did not).
func (o *owned) Epoch(run string) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.epochs[run]
}

func (o *owned) wrap(fn func(store.Tx) error) (func(store.Tx) error, error) {
	if o.alive != nil {
		if err := o.alive(); err != nil {
			return nil, fmt.Errorf("%w: %v", store.ErrFenced, err)
		}
	}
	o.mu.Lock()
	fences := make(map[string]int64, len(o.epochs))
	for r, e := range o.epochs {
		fences[r] = e
	}
	o.mu.Unlock()
	if len(fences) == 0 {
		return fn, nil
	}
	return func(tx store.Tx) error {
		for r, e := range fences {
			if err := tx.Fence(r, o.owner, e); err != nil {
				return err
			}
		}
		return fn(tx)
	}, nil
}

func (o *owned) Tx(ctx context.Context, fn func(store.Tx) error) error {
	f, err := o.wrap(fn)
	if err != nil {
		return err
	}
	return o.Store.Tx(ctx, f)
}

func (o *owned) Queue(ctx context.Context, fn func(store.Tx) error) store.Queued {
	f, err := o.wrap(fn)
	if err != nil {
		return failed{err}
	}
	return o.Store.Queue(ctx, f)
}

// failed is a [Queued] that failed before it reached the store.
type failed struct{ err error }

func (f failed) Wait() error { return f.err }

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (f failed) Done() <-chan struct{} { return closedCh }
