package postgres_test

import "github.com/openplaybook/openplaybook/store/storetest"

// The engine's tests use the conformance suite's helpers.
var (
	mustTx      = storetest.MustTx
	newRun      = storetest.NewRun
	digest      = storetest.Digest
	startCall   = storetest.StartCall
	finishCall  = storetest.FinishCall
	auditedCall = storetest.AuditedCall
)

const testDoc = storetest.TestDoc
