// Package store is the model of a run's durable state (runs, step
// attempts, tool calls, approvals, gates, agent tokens, the hash-chained
// audit log and the built-in primitives' data) and the contract every
// engine keeps: [Store] and [Tx]. It holds no SQL and names no database:
// the engines live beside it (store/sqlite, the embedded default; others
// implement the same interfaces), and store/storetest is the conformance
// suite each of them passes. See docs/store.md.
//
// Every change goes through [Store.Tx] (or [Store.Queue]): the function it
// is given runs inside a transaction, and Tx returns nil only after that
// transaction is durable. A change that Tx acknowledged survives kill -9;
// a change that Tx did not acknowledge is either wholly there or wholly
// absent, never in part. To record a tool call together with its audit
// records, make both changes in one function.
package store

import (
	"context"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
)

// Store is an open store. It is safe for concurrent use. The built-in
// primitives' business tables (customers, notes, today) are not part of
// it: builtin.Data and builtin.DataTx say what an engine that holds them
// implements beside it.
//
// Reads (GetRun, Calls, Audit, ...) see what was committed; inside a
// transaction's function they do not see its own changes nor those of
// the functions committed with it: read through the [Tx] there.
type Store interface {
	// Now returns the current time; the store records every timestamp
	// with it (in UTC), and expiry compares with it.
	Now() time.Time
	// Close answers everything handed to the store before it (each
	// committed or failed) and closes it; Tx, Queue and Flush afterwards
	// return [ErrClosed]. Closing twice is not an error.
	Close() error

	// Tx runs fn inside a write transaction and commits it. It returns
	// fn's error (nothing fn did is kept), a commit error (nothing is
	// kept), or nil once the transaction is durable. fn must make changes
	// only through its Tx, return the errors its methods return, never
	// block on anything else (above all on the store), and not keep the
	// Tx. A panic in fn is returned as an error. ctx is checked until fn
	// starts; once it has, Tx waits for the outcome.
	Tx(ctx context.Context, fn func(Tx) error) error
	// Queue hands fn to the store and returns at once; [Queued.Wait]
	// returns what Tx would have. Tx, Queue and Flush share one FIFO
	// order: a Tx or Flush called after Queue returned returns only after
	// the queued function committed or failed, and the function of such
	// a Tx runs after fn: after fn returned, in the same transaction (it
	// sees fn's changes, which commit with its own unless fn failed), or
	// once fn's outcome is known (fn's Done is closed); the runtime's step
	// end relies on it. A queued change is durable only once acknowledged
	// (its Wait, or a later Tx or Flush, returned).
	Queue(ctx context.Context, fn func(Tx) error) Queued
	// Flush returns once everything queued before it is durable or
	// failed, with the first error of a queued function that failed since
	// the last Flush and whose Wait was not called.
	Flush(ctx context.Context) error
	// LockRun takes the exclusive right to execute run, across
	// processes, until unlock is called; another holder makes it return
	// [ErrRunBusy] at once.
	LockRun(run string) (unlock func(), err error)

	GetRun(ctx context.Context, id string) (Run, error)
	// ListRuns returns the runs with one of statuses (every run when none
	// is given), newest first.
	ListRuns(ctx context.Context, statuses ...RunStatus) ([]Run, error)
	// RunPage returns at most limit runs that f keeps and that come after
	// the cursor, newest first (created time descending, then ID
	// ascending), with the gates and approvals each waits for, in one
	// read of one snapshot and without reading any stored document.
	// limit is clamped to 1..[MaxRunPage]; fewer than limit runs (none):
	// the list's end. The cursor of the next page is the last run's
	// created time and ID.
	RunPage(ctx context.Context, f RunFilter, after RunCursor, limit int) ([]ListedRun, error)
	Steps(ctx context.Context, run string) ([]Step, error)
	Calls(ctx context.Context, run string, f CallFilter) ([]Call, error)
	GetApproval(ctx context.Context, id string) (Approval, error)
	// PendingApprovals returns the pending, unexpired approvals of run
	// (of every run when run is ""), oldest first.
	PendingApprovals(ctx context.Context, run string) ([]Approval, error)
	Approvals(ctx context.Context, run string) ([]Approval, error)
	Gates(ctx context.Context, run string) ([]Gate, error)
	Audit(ctx context.Context, run string) ([]audit.Record, error)
	// AuditHead returns the seq and hash of the run's last audit record
	// as the run records them (0 and [audit.Genesis] before the first).
	AuditHead(ctx context.Context, run string) (seq int64, hash string, err error)
	// VerifyAudit reads a run's records and head from one snapshot and
	// checks them with [audit.Verify]; no problems: the chain verifies.
	VerifyAudit(ctx context.Context, run string) ([]audit.Problem, error)
	AgentTokenByHash(ctx context.Context, hash string) (AgentToken, error)
	AgentTokens(ctx context.Context, run string) ([]AgentToken, error)
	AgentTokenByID(ctx context.Context, id string) (AgentToken, error)
	// Dump returns every row the store holds as text, one line per row
	// (table<TAB>column=value...), for tests that look for a secret in
	// everything written.
	Dump(ctx context.Context) ([]byte, error)
}

// Queued is a function handed to [Store.Queue].
type Queued interface {
	// Wait returns the function's outcome once it is known: nil once
	// durable, its error, or a commit error.
	Wait() error
	// Done is closed once the outcome is known.
	Done() <-chan struct{}
}

// CreateClaimer is a store view through which one owner (a replica)
// executes runs, as [store/replica.Owned] is. [runtime.Session.Create]
// calls ClaimCreated in the transaction that creates a run (after
// [Tx.CreateRun]), so that the run has an owner from the commit that
// creates it: an owner that dies before it executes the run leaves it to
// be adopted, never running under no one. Find it with [As].
type CreateClaimer interface {
	ClaimCreated(tx Tx, run string) error
}

// Tx is one function's view of a write transaction: its changes and the
// reads that must see them. Its reads see its own writes and those of
// the functions committed before it in the same commit. Its methods are
// valid only while the function runs ([ErrTxDone] after).
type Tx interface {
	CreateRun(r Run) (Run, error)
	SetRunStatus(run string, status RunStatus, reason string) error
	ReopenRun(run string) error
	StartStep(run, step string) (attempt int, err error)
	SetStepWaiting(run, step string, attempt int) error
	SetStepRunning(run, step string, attempt int) error
	FinishStep(run, step string, attempt int, status StepStatus, output jsontext.Value, errText string) error

	StartCall(c Call) (Call, error)
	RecordCall(c Call) (Call, error)
	RecordCalls(calls []Call) ([]Call, error)
	FinishCall(k CallKey, state CallState, result jsontext.Value, errText string) error
	DecideCall(k CallKey, allowed bool, code, reason string) error
	MarkOutcomeUnknown(k CallKey, reason string) (Approval, error)

	CreateApproval(a Approval) (Approval, error)
	DecideApproval(id string, approve bool, reason, decidedBy string) (Approval, error)
	ConsumeApproval(run, step, tool, defDigest, argsDigest string) (a Approval, ok bool, err error)
	ConsumeApprovalFor(k CallKey, defDigest, argsDigest string) (a Approval, ok bool, err error)
	VoidApprovals(k CallKey, reason string) ([]Approval, error)
	ExpireAttemptApprovals(run, step string, attempt int, reason string) ([]Approval, error)
	ExpireApprovals(run string) ([]Approval, error)
	// VoidOutcomeUnknownApproval marks an approved, unused approval of
	// kind outcome_unknown as expired, with reason: the runtime could not
	// follow it (the call it would run again is not stored as sent). It
	// returns the approval as it is now, and false when it was not
	// approved and unused (nothing changed).
	VoidOutcomeUnknownApproval(id, reason string) (Approval, bool, error)

	OpenGate(run, step string, attempt int) (Gate, error)
	DecideGate(run, step string, attempt int, approve bool, reason, decidedBy string) (Gate, error)

	CreateAgentToken(run, agent, hash, by string, expires time.Time) (AgentToken, error)
	RevokeAgentTokens(run, id string) ([]AgentToken, error)

	// Append seals rec onto the run's chain (Seq, Prev, Hash; Time when
	// empty) and moves the run's head, in this transaction.
	Append(rec audit.Record) (audit.Record, error)
	// AppendAll is Append of several records of one run, in order.
	AppendAll(recs ...audit.Record) ([]audit.Record, error)

	// ClaimRun makes owner (a replica's id) the run's owner and moves
	// its owner epoch up by one, in this transaction, and returns the new
	// epoch (an ended run too: a resume claims it before it reads that it
	// ended). See docs/store.md, "Replicas".
	ClaimRun(run, owner string) (epoch int64, err error)
	// Fence makes this transaction conditional on the run having owner
	// and epoch as its owner and owner epoch when the transaction writes
	// it (checked under the run's row lock, at the latest before the
	// commit): otherwise the transaction fails with [ErrFenced] and
	// nothing of it is kept. [ErrNotFound] when there is no such run.
	Fence(run, owner string, epoch int64) error

	// Reads inside the transaction.
	Run(id string) (Run, error)
	Call(k CallKey) (Call, error)
	Calls(run string, f CallFilter) ([]Call, error)
	Approval(id string) (Approval, error)
	Approvals(run string) ([]Approval, error)
	Audit(run string) ([]audit.Record, error)
	VerifyAudit(run string) ([]audit.Problem, error)
}
