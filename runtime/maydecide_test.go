package runtime_test

import (
	"context"
	"errors"
	"testing"

	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// mayDecideAgrees asks MayDecide whether v's person may approve id of run
// now, wants the answer want (nil; runtime.ErrNotDecider; or any other
// error, errOther), then has Decide approve it with v and wants it
// refused exactly when MayDecide erred, with the same kind of error.
func mayDecideAgrees(t *testing.T, st store.Store, run, id string, v runtime.Verdict, want error) {
	t.Helper()
	ctx := context.Background()
	v.Approve = true
	may := runtime.MayDecide(ctx, st, run, id, v)
	switch {
	case want == nil && may != nil:
		t.Fatalf("MayDecide(%s, %s) for %q: %v, want nil", run, id, v.By, may)
	case want == errOther && (may == nil || errors.Is(may, runtime.ErrNotDecider)):
		t.Fatalf("MayDecide(%s, %s) for %q: %v, want an error that is not ErrNotDecider", run, id, v.By, may)
	case want != nil && want != errOther && !errors.Is(may, want):
		t.Fatalf("MayDecide(%s, %s) for %q: %v, want %v", run, id, v.By, may, want)
	}
	_, dec := runtime.Decide(ctx, st, run, id, v)
	if (may == nil) != (dec == nil) || errors.Is(may, runtime.ErrNotDecider) != errors.Is(dec, runtime.ErrNotDecider) {
		t.Fatalf("%q approving %s of run %s: MayDecide said %v, Decide %v", v.By, id, run, may, dec)
	}
}

var errOther = errors.New("another error")

func finance(by string) runtime.Verdict {
	return runtime.Verdict{By: by, Verified: true, Groups: []string{"finance"}, Reason: "ok"}
}

// TestMayDecideDeciders: the call's approval needs one person of finance.
// carol (of ops only) and an unverified decider may not approve it, and
// Decide refuses them; alice may, and Decide takes her approval; then
// nothing waits under that id, for anyone.
func TestMayDecideDeciders(t *testing.T) {
	r, run, id := nofmRig(t, 1)
	mayDecideAgrees(t, r.st, run, id, runtime.Verdict{By: "carol", Verified: true, Groups: []string{"ops"}}, runtime.ErrNotDecider)
	mayDecideAgrees(t, r.st, run, id, runtime.Verdict{By: "operator"}, runtime.ErrNotDecider)
	mayDecideAgrees(t, r.st, run, id, runtime.Verdict{By: "alice", Groups: []string{"finance"}}, runtime.ErrNotDecider) // groups, but not verified
	mayDecideAgrees(t, r.st, run, "apr_0000000000000000", finance("alice"), errOther)
	mayDecideAgrees(t, r.st, run, id, finance("alice"), nil)
	a, err := r.st.GetApproval(context.Background(), id)
	if err != nil || a.Status != store.ApprovalApproved || a.DecidedBy != "alice" {
		t.Fatalf("approval %+v, %v", a, err)
	}
	mayDecideAgrees(t, r.st, run, id, finance("bob"), errOther)
}

// TestMayDecideNofM: the call needs two distinct people of finance.
// alice may approve it, and does; then she may not again (Decide refuses
// her too), and bob may, whose approval approves it.
func TestMayDecideNofM(t *testing.T) {
	r, run, id := nofmRig(t, 2)
	mayDecideAgrees(t, r.st, run, id, finance("alice"), nil)
	mayDecideAgrees(t, r.st, run, id, finance("alice"), runtime.ErrNotDecider)
	a, err := r.st.GetApproval(context.Background(), id)
	if err != nil || a.Status != store.ApprovalPending {
		t.Fatalf("after one of two approvals: %+v, %v", a, err)
	}
	mayDecideAgrees(t, r.st, run, id, finance("bob"), nil)
	if a, err = r.st.GetApproval(context.Background(), id); err != nil || a.Status != store.ApprovalApproved {
		t.Fatalf("after two approvals: %+v, %v", a, err)
	}
}

// startedBy starts a run of gate hold (no policy rule) whose run.requested
// record names sam, and returns the rig and the run.
func startedBy(t *testing.T, by string) (*rig, string) {
	t.Helper()
	doc := buildDoc(t, "selfgate", gateStep("hold", "write", ""),
		map[string]any{"id": "write", "kind": "agent", "agent": "rita", "purpose": "Write a note.", "allowedTools": []string{"note.add"}})
	r := newRig(t, rigConfig{}, doc)
	ctx := context.Background()
	sess := r.engine(0, map[string]string{"rita": `{"steps": {"write": [{"tool": "note.add", "arguments": {"body": "hello"}}]}}`}, nil, nil)
	run, err := sess.Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.Note(ctx, r.st, run, runtime.RunRequested{By: by, Via: "oidc"}, nil); err != nil {
		t.Fatal(err)
	}
	o, err := sess.Resume(ctx, run)
	wantOutcome(t, "start", o, err, runtime.Waiting)
	return r, run
}

// TestMayDecideSelfApproval: sam started the run, so he may not approve
// its gate, and Decide refuses him; with SelfApproval (serve.oidc's) he
// may, and does. A step id that is not a waiting gate is another error.
func TestMayDecideSelfApproval(t *testing.T) {
	r, run := startedBy(t, "sam")
	sam := runtime.Verdict{By: "sam", Verified: true}
	mayDecideAgrees(t, r.st, run, "hold", sam, runtime.ErrNotDecider)
	mayDecideAgrees(t, r.st, run, "write", sam, errOther)
	// Unverified, no rule names deciders: anyone holding the CLI decides.
	if err := runtime.MayDecide(context.Background(), r.st, run, "hold", runtime.Verdict{By: "sam"}); err != nil {
		t.Fatalf("an unverified decider of a gate no rule is about: %v", err)
	}
	sam.SelfApproval = true
	mayDecideAgrees(t, r.st, run, "hold", sam, nil)
	mayDecideAgrees(t, r.st, run, "hold", runtime.Verdict{By: "tess", Verified: true}, errOther) // decided already
}

// TestMayDecideOtherPerson: a person other than the starter may approve
// the gate; once the run has ended, nothing is to be decided.
func TestMayDecideOtherPerson(t *testing.T) {
	r, run := startedBy(t, "sam")
	mayDecideAgrees(t, r.st, run, "hold", runtime.Verdict{By: "tess", Verified: true}, nil)
	if err := runtime.Cancel(context.Background(), r.st, run, "tess", "done"); err != nil {
		t.Fatal(err)
	}
	mayDecideAgrees(t, r.st, run, "hold", runtime.Verdict{By: "uma", Verified: true}, errOther)
}
