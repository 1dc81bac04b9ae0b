package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// ErrHarnessChanged is wrapped by the error of continuing a run (resume,
// retry, a server resuming it) with a harness other than the one it was
// last run with, when the change is not accepted. Nothing of the new
// harness was used: no server started, no connection made, no secret
// looked up.
var ErrHarnessChanged = errors.New("the run was last run with another harness")

// HarnessChangedError is the error of [CheckHarness] when the harness
// changed and the change is not accepted. errors.Is finds
// [ErrHarnessChanged] in it.
type HarnessChangedError struct {
	Run string
	// Last is the digest (SHA-256, hex) of the harness the run was last
	// run with; This the digest of the harness it was opened with.
	Last, This string
}

func (e *HarnessChangedError) Error() string {
	return fmt.Sprintf("run %s was last run with another harness (digest %s, this one %s); continue it with that harness file, or accept this one with resume or retry --accept-harness-change (the change is recorded in the audit log)", e.Run, short(e.Last), short(e.This))
}

// Unwrap returns [ErrHarnessChanged].
func (e *HarnessChangedError) Unwrap() error { return ErrHarnessChanged }

// HarnessCheck is what [CheckHarness] found.
type HarnessCheck struct {
	// Last is the digest of the harness the run was last run with: its
	// run.created record's, or the last accepted change's
	// (run.harness-changed); "" when the run recorded none.
	Last string
	// Changed is set when the digest checked is another and the change
	// was accepted: the caller records run.harness-changed when the run
	// goes on.
	Changed bool
	// Records are the run's audit records, the chain verified.
	Records []audit.Record
}

// CheckHarness checks, from the store alone, that run runID may be
// continued with the harness whose file has SHA-256 digest (hex): the
// run's audit chain verifies, and digest is the harness the run was last
// run with, or accept is set. It reads nothing of the harness itself, so
// that whatever opens an existing run calls it before the harness is used
// for anything (launch.OpenRun: before any MCP server is
// started, any connection made, any secret looked up, any preflight). An
// empty digest checks nothing about the harness.
//
// Errors: a chain that does not verify wraps [ErrStoreAltered]; a changed
// harness that is not accepted is a [*HarnessChangedError]; a run that
// does not exist is store.ErrNotFound; other store errors as they are.
func CheckHarness(ctx context.Context, st store.Store, runID, digest string, accept bool) (HarnessCheck, error) {
	if _, err := st.GetRun(ctx, runID); err != nil {
		return HarnessCheck{}, err
	}
	recs, err := verifiedRecords(ctx, st, runID)
	if err != nil {
		return HarnessCheck{}, fmt.Errorf("run %s: %w", runID, err)
	}
	var last string
	for _, r := range recs {
		switch EventKind(r.Kind) {
		case KindRunCreated:
			last = dataOf(r).HarnessDigest
		case KindRunHarnessChanged:
			var d RunHarnessChanged
			_ = json.Unmarshal(r.Data, &d)
			last = d.To
		}
	}
	changed := digest != "" && last != digest
	if changed && !accept {
		return HarnessCheck{}, &HarnessChangedError{Run: runID, Last: last, This: digest}
	}
	return HarnessCheck{Last: last, Changed: changed, Records: recs}, nil
}
