// Package storetest is the conformance suite of the [store] contract:
// every engine runs [Run] against stores it opens, and passes it. The
// suite holds what the runtime relies on whatever the engine: a
// transaction is atomic (also when it shares a commit), a Tx's reads see
// its own writes and its batch-mates', Tx after Queue returns only after
// the queued function, the audit chain is sealed and verifies, LockRun
// is exclusive with [store.ErrRunBusy], and a refused change is the same
// sentinel error (store.ErrState, store.ErrNotFound, store.ErrExpired,
// store.ErrTxDone, store.ErrClosed) on every engine.
//
// What only one engine can show (its files, its locks, its cache, a
// kill of its process) stays in that engine's own tests.
package storetest

import (
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

// Opener opens a new, empty store for one test; the engine closes it
// when the test ends (t.Cleanup). Closing it twice must not fail.
type Opener func(t *testing.T) store.Store

// Clock is what an engine's store implements to let the suite control
// time (approval expiry); the tests that need it are skipped without it.
type Clock interface {
	SetClock(now func() time.Time)
}

// Run runs the conformance suite, one subtest per property, each with a
// store of its own from open.
func Run(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"RunLifecycle", testRunLifecycle},
		{"CallNeedsRunningStep", testCallNeedsRunningStep},
		{"TxAtomic", testTxAtomic},
		{"TxAfterClose", testTxAfterClose},
		{"TxKeptAfterReturn", testTxKeptAfterReturn},
		{"AuditChain", testAuditChain},
		{"LockRunIsExclusive", testLockRunIsExclusive},
		{"QueueOrder", testQueueOrder},
		{"TxRunsAfterQueue", testTxRunsAfterQueue},
		{"AppendAll", testAppendAll},
		{"ApprovalDefaults", testApprovalDefaults},
		{"ConsumeApprovalOnce", testConsumeApprovalOnce},
		{"ConsumeApprovalMatchesExactly", testConsumeApprovalMatchesExactly},
		{"ApprovalExpired", testApprovalExpired},
		{"ApprovalDenied", testApprovalDenied},
		{"ApprovalForWaitingCall", testApprovalForWaitingCall},
		{"RecordCallEqualsStartFinish", testRecordCallEqualsStartFinish},
		{"RecordCallChecks", testRecordCallChecks},
		{"RecordCallsEqualsRecordCall", testRecordCallsEqualsRecordCall},
		{"RecordCallsChecks", testRecordCallsChecks},
		{"ReopenRun", testReopenRun},
		{"TxReadsSeeBatchMates", testTxReadsSeeBatchMates},
		{"ToolNamesRoundTrip", testToolNamesRoundTrip},
		{"AuditToolNames", testAuditToolNames},
		{"AuditPages", testAuditPages},
		{"CallPages", testCallPages},
		{"Outbox", testOutbox},
		{"Vault", testVault},
		{"ConsoleLogins", testConsoleLogins},
		{"RunPages", testRunPages},
		{"ClaimAndFence", testClaimAndFence},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

func setClock(t *testing.T, s store.Store, now func() time.Time) {
	t.Helper()
	c, ok := s.(Clock)
	if !ok {
		t.Skipf("the engine (%T) has no SetClock", s)
	}
	c.SetClock(now)
}
