package storetest

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openplaybook/openplaybook/store"

	"github.com/openplaybook/openplaybook/audit"
)

// hostileNames are tool names as an agent might send them: every one must
// come back byte for byte, and only the exact bytes match an approval.
var hostileNames = []string{
	"customer.get",
	"",
	"customer.get\x00stripe.refund",
	"\x00",
	"a\x00",
	"tab\there\nnewline\rcr\x1b[31mred\x7f",
	`quote"s 'and' back\slash`,
	"'; DROP TABLE audit; --",
	"%_like_wildcards%",
	"customer\u2024get",
	"emoji 🙂 and \u202eright-to-left",
	"invalid utf-8 \xff\xfe\xc3",
	"\xed\xa0\x80 lone surrogate bytes",
	strings.Repeat("long.", 4000),
}

func testToolNamesRoundTrip(t *testing.T, open Opener) {
	s := open(t)
	run, attempt := newRun(t, s)
	ids := make([]string, len(hostileNames))
	mustTx(t, s, func(tx store.Tx) error {
		for i, name := range hostileNames {
			c, err := tx.StartCall(store.Call{CallKey: store.CallKey{Run: run, Step: "work", Attempt: attempt}, Tool: name,
				ArgsDigest: "x", Decision: store.DecisionRefused, Reason: "not in allowedTools"})
			if err != nil {
				return err
			}
			if utf8.ValidString(name) { // audit.Seal refuses invalid UTF-8: see TestAuditToolNames
				if _, err := tx.Append(audit.Record{Run: run, Kind: "call.refused", Step: "work", Tool: c.Tool}); err != nil {
					return err
				}
			}
			a, err := tx.CreateApproval(store.Approval{Run: run, Step: "work", Tool: name, DefDigest: "d", ArgsDigest: "x"})
			if err != nil {
				return err
			}
			ids[i] = a.ID
			if _, err := tx.DecideApproval(a.ID, true, "", "ana"); err != nil {
				return err
			}
		}
		return nil
	})
	calls, err := s.Calls(bg, run, store.CallFilter{})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := s.Audit(bg, run)
	if err != nil {
		t.Fatal(err)
	}
	toolsInAudit := map[string]bool{}
	for _, r := range recs {
		toolsInAudit[r.Tool] = true
	}
	for i, name := range hostileNames {
		if calls[i].Tool != name {
			t.Errorf("call tool = %q, want %q", calls[i].Tool, name)
		}
		a, err := s.GetApproval(bg, ids[i])
		if err != nil || a.Tool != name {
			t.Errorf("approval tool = %q, want %q (%v)", a.Tool, name, err)
		}
		if !toolsInAudit[name] && utf8.ValidString(name) {
			t.Errorf("audit lacks tool %q", name)
		}
	}
	if probs, _ := s.VerifyAudit(bg, run); len(probs) != 0 {
		t.Errorf("VerifyAudit = %v", probs)
	}
	d, err := s.Dump(bg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(d, []byte("tool=customer.get\x00stripe.refund")) {
		t.Error("the dump lost the bytes after NUL")
	}
	// Each approval lets through its own name only: consume in reverse so
	// that a prefix never shadows a longer name.
	for i := len(hostileNames) - 1; i >= 0; i-- {
		name := hostileNames[i]
		mustTx(t, s, func(tx store.Tx) error {
			a, ok, err := tx.ConsumeApproval(run, "work", name, "d", "x")
			if err != nil {
				return err
			}
			if !ok || a.ID != ids[i] {
				t.Errorf("consume %q = %v %q, want %q", name, ok, a.ID, ids[i])
			}
			return nil
		})
	}
}

// TestAuditToolNames: names with control characters and NUL are valid
// JSON strings and seal; invalid UTF-8 does not (the runtime must record
// such names in another form, for example hex).
func testAuditToolNames(t *testing.T, open Opener) {
	s := open(t)
	run, _ := newRun(t, s)
	for _, name := range hostileNames {
		err := s.Tx(bg, func(tx store.Tx) error {
			_, err := tx.Append(audit.Record{Run: run, Kind: "call.refused", Step: "work", Tool: name})
			return err
		})
		if (err != nil) != !utf8.ValidString(name) {
			t.Errorf("append tool %q: %v", name, err)
		}
	}
	if probs, _ := s.VerifyAudit(bg, run); len(probs) != 0 {
		t.Errorf("VerifyAudit = %v", probs)
	}
}
