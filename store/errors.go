package store

import (
	"errors"
)

// Errors a caller can test with [errors.Is].
var (
	// ErrNotFound: the run, step, call, approval, gate or customer does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrState: the row exists but is not in a state that allows the
	// change (a call that is not started, an approval that is not pending,
	// a run that has ended, ...).
	ErrState = errors.New("store: wrong state")
	// ErrExpired: the approval's expiry has passed.
	ErrExpired = errors.New("store: approval expired")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrTxDone: a [Tx] was used after its function returned.
	ErrTxDone = errors.New("store: transaction already finished")
)

// ErrRunBusy is returned by [Store.LockRun] when another process holds the
// run.
var ErrRunBusy = errors.New("the run is being executed by another process")

// ErrFenced is returned (wrapped) by a transaction that [Tx.Fence] made
// conditional on an owner and epoch the run no longer has: another
// replica claimed the run since. Nothing of the transaction is kept; the
// session that wrote it must stop (it no longer executes the run).
var ErrFenced = errors.New("store: the run was claimed by another replica (fenced)")
