package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/runtime"
)

// editTool returns examples/refund-review.json with the first `from`
// after tool's "name" replaced by `to`.
func editTool(t *testing.T, tool, from, to string) string {
	t.Helper()
	b, err := os.ReadFile(rtExample(t, "refund-review.json"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	at := strings.Index(src, `"name": "`+tool+`"`)
	i := strings.Index(src[at:], from)
	if at < 0 || i < 0 {
		t.Fatalf("test setup: no %s after tool %q", from, tool)
	}
	return src[:at+i] + to + src[at+i+len(from):]
}

// TestStricterDocumentIsAccepted: a document that asks for approval of a
// tool whose registry entry says requiresApproval false (note.add, a
// built-in) passes check (a warning, exit 0) and runs, and the run asks
// for that approval before the note is written; a document that leaves
// out the approval the registry requires (charge.refund) is refused by
// check and by run, at the tool's definition.
func TestStricterDocumentIsAccepted(t *testing.T) {
	t.Parallel()
	mock := stripemock.Start(t)
	rec := stripemock.Proxy(t, mock)
	e := newRTEnv(t, rtConfig{stripe: rec.URL, memory: true, transcripts: map[string]string{"rita": ritaTranscript()}})

	strict := e.write("strict.json", editTool(t, "note.add", `"requiresApproval": false`, `"requiresApproval": true`))
	code, ds := checkJSON(t, "--harness", e.harness, strict)
	if code != ExitOK || diag.Count(ds, diag.Error) != 0 {
		t.Fatalf("check of the stricter document: exit %d:\n%s", code, dump(ds))
	}
	if find(ds, "drift-requires-approval", "/tools/5/requiresApproval", diag.Warning, "note.add", "overstates") == nil {
		t.Errorf("want a drift-requires-approval warning at note.add, got:\n%s", dump(ds))
	}
	o := e.outcome(ExitWaiting, "run", "--input", rtRefundInput, strict)
	if o.Status != runtime.Waiting || len(o.Waiting) != 1 || o.Waiting[0].Kind != "call" || o.Waiting[0].Tool != "note.add" {
		t.Fatalf("run of the stricter document: %+v, want waiting for the note.add approval", o)
	}
	if n := countRows(t, e, "notes"); n != 0 {
		t.Fatalf("%d notes written before the approval the document asks for", n)
	}
	e.cli(ExitOK, "approve", o.Run, o.Waiting[0].ID)
	o = e.outcome(ExitWaiting, "resume", o.Run)
	if len(o.Waiting) != 1 || o.Waiting[0].ID != "approve_refund" {
		t.Fatalf("resume after the approval: %+v, want waiting at the approve_refund gate", o)
	}
	if n := countRows(t, e, "notes"); n != 1 {
		t.Fatalf("%d notes after the approval, want 1", n)
	}

	// Understating is refused, by check and by run.
	lax := e.write("lax.json", editTool(t, "charge.refund", `"requiresApproval": true`, `"requiresApproval": false`))
	code, ds = checkJSON(t, "--harness", e.harness, lax)
	if code != ExitProblems || find(ds, "drift-requires-approval", "/tools/7/requiresApproval", diag.Error, "charge.refund", "understates") == nil {
		t.Errorf("check of the document without the approval the registry requires: exit %d:\n%s", code, dump(ds))
	}
	_, stderr := e.cli(ExitProblems, "run", "--input", rtRefundInput, lax)
	if !strings.Contains(stderr, "drift-requires-approval") {
		t.Errorf("run of the understating document: %s", stderr)
	}
	if n := rtRefunds(rec); n != 0 {
		t.Errorf("Stripe was asked for %d refunds", n)
	}
}

// countRows counts the rows of a table of the run store.
func countRows(t *testing.T, e *rtEnv, table string) int {
	t.Helper()
	return int(teststore.Int(t, e.loadHarness(), `SELECT count(*) FROM `+table))
}
