package sqlite

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

type approvalFixture struct {
	s     *Store
	run   string
	clock *time.Time
}

func newApprovalFixture(t *testing.T) *approvalFixture {
	s := openTest(t)
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { return clock })
	run, _ := newRun(t, s)
	return &approvalFixture{s: s, run: run, clock: &clock}
}

func (f *approvalFixture) create(t *testing.T, tool, args string, expires time.Time) store.Approval {
	t.Helper()
	var a store.Approval
	mustTx(t, f.s, func(tx store.Tx) error {
		var err error
		a, err = tx.CreateApproval(store.Approval{Run: f.run, Step: "work", Tool: tool, DefDigest: digest("def:" + tool),
			ArgsDigest: digest(args), Reason: "requiresApproval", Expires: expires})
		return err
	})
	return a
}

func (f *approvalFixture) decide(t *testing.T, id string, approve bool) (store.Approval, error) {
	t.Helper()
	var a store.Approval
	err := f.s.Tx(bg, func(tx store.Tx) error {
		var err error
		a, err = tx.DecideApproval(id, approve, "checked", "ana")
		return err
	})
	return a, err
}

func (f *approvalFixture) consume(t *testing.T, step, tool, def, args string) bool {
	t.Helper()
	var ok bool
	mustTx(t, f.s, func(tx store.Tx) error {
		var err error
		_, ok, err = tx.ConsumeApproval(f.run, step, tool, def, args)
		return err
	})
	return ok
}

func TestApprovalDefaults(t *testing.T) {
	f := newApprovalFixture(t)
	a := f.create(t, "gmail.send", `{"to":"a@b"}`, time.Time{})
	if !strings.HasPrefix(a.ID, "apr_") || a.Kind != store.KindCall || a.Status != store.ApprovalPending ||
		!a.Expires.Equal(f.clock.Add(24*time.Hour)) {
		t.Errorf("approval = %+v", a)
	}
	got, err := f.s.GetApproval(bg, a.ID)
	if err != nil || got.Expires != a.Expires || got.Created != a.Created || got.Tool != a.Tool {
		t.Errorf("GetApproval = %+v, %v\nwant %+v", got, err, a)
	}
}

func TestConsumeApprovalOnce(t *testing.T) {
	f := newApprovalFixture(t)
	const tool, args = "stripe.refund", `{"amount":500,"charge":"ch_1"}`
	def := digest("def:" + tool)
	for round := range 20 {
		a := f.create(t, tool, args, time.Time{})
		if f.consume(t, "work", tool, def, digest(args)) {
			t.Fatal("a pending approval was consumed")
		}
		if _, err := f.decide(t, a.ID, true); err != nil {
			t.Fatal(err)
		}
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := f.s.Tx(bg, func(tx store.Tx) error {
					got, ok, err := tx.ConsumeApproval(f.run, "work", tool, def, digest(args))
					if ok {
						wins.Add(1)
						if got.ID != a.ID || got.Status != store.ApprovalUsed || got.Used.IsZero() {
							t.Errorf("consumed %+v", got)
						}
					}
					return err
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d of 8 concurrent ConsumeApproval calls won, want exactly 1", round, n)
		}
	}
	if f.consume(t, "work", tool, def, digest(args)) {
		t.Error("consumed after all were used")
	}
}

func TestConsumeApprovalMatchesExactly(t *testing.T) {
	f := newApprovalFixture(t)
	const tool, args = "stripe.refund", `{"amount":500}`
	def := digest("def:" + tool)
	a := f.create(t, tool, args, time.Time{})
	if _, err := f.decide(t, a.ID, true); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string][4]string{
		"other arguments":  {"work", tool, def, digest(`{"amount":5000}`)},
		"other definition": {"work", tool, digest("def:changed"), digest(args)},
		"other step":       {"other", tool, def, digest(args)},
		"other tool":       {"work", "stripe.refunds", def, digest(args)},
		"NUL suffix":       {"work", tool + "\x00", def, digest(args)},
		"case":             {"work", "Stripe.refund", def, digest(args)},
	} {
		if f.consume(t, c[0], c[1], c[2], c[3]) {
			t.Errorf("%s: consumed", name)
		}
	}
	var otherRun bool
	mustTx(t, f.s, func(tx store.Tx) error {
		var err error
		_, otherRun, err = tx.ConsumeApproval("run_ffffffffffffffff", "work", tool, def, digest(args))
		return err
	})
	if otherRun {
		t.Error("other run: consumed")
	}
	if !f.consume(t, "work", tool, def, digest(args)) {
		t.Error("the exact call was not let through")
	}
}

func TestApprovalExpired(t *testing.T) {
	f := newApprovalFixture(t)
	const tool, args = "gmail.send", `{}`
	def := digest("def:" + tool)
	approved := f.create(t, tool, args, f.clock.Add(time.Hour))
	if _, err := f.decide(t, approved.ID, true); err != nil {
		t.Fatal(err)
	}
	pending := f.create(t, tool, args, f.clock.Add(time.Hour))
	*f.clock = f.clock.Add(time.Hour) // expiry is exclusive: at the expiry time it is expired
	if f.consume(t, "work", tool, def, digest(args)) {
		t.Error("an expired approval was consumed")
	}
	if _, err := f.decide(t, pending.ID, true); !errors.Is(err, store.ErrExpired) {
		t.Errorf("deciding an expired approval: %v", err)
	}
	if p, _ := f.s.PendingApprovals(bg, f.run); len(p) != 0 {
		t.Errorf("pending = %+v", p)
	}
	var expired []store.Approval
	mustTx(t, f.s, func(tx store.Tx) error {
		var err error
		expired, err = tx.ExpireApprovals(f.run)
		return err
	})
	if len(expired) != 2 || expired[0].Status != store.ApprovalExpired || expired[1].Status != store.ApprovalExpired {
		t.Errorf("expired = %+v", expired)
	}
	if _, err := f.decide(t, pending.ID, true); !errors.Is(err, store.ErrState) {
		t.Errorf("deciding an expired approval: %v", err)
	}
}

func TestApprovalDenied(t *testing.T) {
	f := newApprovalFixture(t)
	const tool, args = "gmail.send", `{}`
	a := f.create(t, tool, args, time.Time{})
	got, err := f.decide(t, a.ID, false)
	if err != nil || got.Status != store.ApprovalDenied || got.DecidedBy != "ana" || got.Reason != "checked" {
		t.Fatalf("deny = %+v, %v", got, err)
	}
	if f.consume(t, "work", tool, digest("def:"+tool), digest(args)) {
		t.Error("a denied approval was consumed")
	}
	if _, err := f.decide(t, a.ID, true); !errors.Is(err, store.ErrState) {
		t.Errorf("approving a denied approval: %v", err)
	}
	if _, err := f.decide(t, "apr_nope", true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deciding a missing approval: %v", err)
	}
	all, _ := f.s.Approvals(bg, f.run)
	if len(all) != 1 || all[0].Status != store.ApprovalDenied {
		t.Errorf("approvals = %+v", all)
	}
}

func TestApprovalForWaitingCall(t *testing.T) {
	s := openTest(t)
	run, attempt := newRun(t, s)
	var c store.Call
	var a store.Approval
	mustTx(t, s, func(tx store.Tx) error {
		var err error
		c, err = tx.StartCall(store.Call{CallKey: store.CallKey{Run: run, Step: "work", Attempt: attempt}, Tool: "gmail.send",
			DefDigest: "d", ArgsDigest: "x", Decision: store.DecisionWaiting, SideEffecting: true})
		if err != nil {
			return err
		}
		a, err = tx.CreateApproval(store.Approval{Run: run, Step: "work", Tool: c.Tool, DefDigest: "d", ArgsDigest: "x", Call: &c.CallKey})
		return err
	})
	got, _ := s.GetApproval(bg, a.ID)
	if got.Call == nil || *got.Call != c.CallKey {
		t.Errorf("approval call = %v, want %v", got.Call, c.CallKey)
	}
	err := s.Tx(bg, func(tx store.Tx) error {
		k := c.CallKey
		k.Index = 7
		_, err := tx.CreateApproval(store.Approval{Run: run, Step: "work", Tool: c.Tool, Call: &k})
		return err
	})
	if err == nil {
		t.Error("an approval for a call that does not exist was stored")
	}
}
