package runtime_test

import (
	"context"
	"errors"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// enqueuedCtx is a context that runs fn once a store's Tx has handed its
// function to the writer: Tx asks for Done only after that. It lets a
// test put two transactions into one group commit without sleeping.
type enqueuedCtx struct {
	context.Context
	once sync.Once
	fn   func()
}

func (c *enqueuedCtx) Done() <-chan struct{} {
	if calledFromStoreTx() {
		c.once.Do(c.fn)
	}
	return c.Context.Done()
}

// calledFromStoreTx reports whether a store engine's Store.Tx is on the
// stack.
func calledFromStoreTx() bool {
	pcs := make([]uintptr, 32)
	frames := goruntime.CallersFrames(pcs[:goruntime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, "/store") && strings.HasSuffix(f.Function, ".(*Store).Tx") {
			return true
		}
		if !more {
			return false
		}
	}
}

// batchDriver calls mcp.ctr.launch once. Armed (on the resume), it first
// holds the store's writer, has runtime.Decide approve the call's
// approval, and asks for the call again only once that decision is
// queued, so both are committed in one group commit, the decision first.
type batchDriver struct {
	st      store.Store
	run     *string
	approve *string
	seen    *[]error // the Call's error, then Decide's
}

func (b batchDriver) RunStep(ctx context.Context, in driver.StepInput, c driver.Caller) (jsontext.Value, error) {
	launch := driver.Call{Name: "mcp.ctr.launch", Arguments: jsonOf(map[string]any{"target": "alpha"})}
	if *b.approve == "" {
		if _, err := c.Call(ctx, launch); err != nil {
			return nil, err
		}
		return jsonOf("launched"), nil
	}
	started, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free()
	held := b.st.Queue(context.Background(), func(store.Tx) error {
		close(started)
		select { // the safety valve only: the test releases it long before
		case <-release:
		case <-time.After(time.Minute):
		}
		return nil
	})
	<-started
	queued := make(chan struct{})
	decided := make(chan error, 1)
	go func() {
		dctx := &enqueuedCtx{Context: context.Background(), fn: func() { close(queued) }}
		_, err := runtime.Decide(dctx, b.st, *b.run, *b.approve, runtime.Verdict{Approve: true, Reason: "in the same commit", By: "test"})
		decided <- err
	}()
	select {
	case <-queued:
	case err := <-decided:
		free()
		return nil, errors.Join(errors.New("Decide returned before its transaction was queued"), err)
	}
	res, err := c.Call(&enqueuedCtx{Context: ctx, fn: free}, launch)
	free()
	*b.seen = append(*b.seen, err, <-decided, held.Wait())
	if err != nil {
		return nil, err
	}
	if res.Error != "" {
		return nil, errors.New(res.Error)
	}
	return jsonOf("launched"), nil
}

// TestApprovalDecidedInTheSameCommit: a person's approval committed in
// the same group commit as the agent asking for the approved call again
// lets the call run once. The approval path reads the run's approvals and
// verified chain inside that transaction; read through the store, it saw
// the approval consumed but not its approval.approved record (a
// batch-mate's write, not yet committed) and failed the step as "the
// store was altered".
func TestApprovalDecidedInTheSameCommit(t *testing.T) {
	t.Parallel()
	// PostgreSQL commits each Tx on its own, concurrently: there is no
	// shared commit to put both in (store/storetest holds what a Tx's
	// reads see on every engine).
	teststore.SQLiteOnly(t, "it needs a group commit holding two transactions")
	r := newApprovalsRig(t)
	ctx := context.Background()
	var run, approve string
	var seen []error
	drv := map[string]driver.Driver{"ops": batchDriver{st: r.st, run: &run, approve: &approve, seen: &seen}}

	out, err := r.engineWith(0, drv, nil, nil).Start(ctx, nil)
	wantOutcome(t, "start", out, err, runtime.Waiting)
	run = out.Run
	approve = r.onlyApproval(run).ID

	out, err = r.engineWith(0, drv, nil, nil).Resume(ctx, run)
	if len(seen) != 3 {
		t.Fatalf("the driver saw %v, want the call's, Decide's and the holder's errors", seen)
	}
	if seen[0] != nil || seen[1] != nil || seen[2] != nil {
		t.Fatalf("call: %v; Decide: %v; holder: %v; want no errors", seen[0], seen[1], seen[2])
	}
	wantOutcome(t, "resume", out, err, runtime.Waiting)
	if len(out.Waiting) != 1 || out.Waiting[0].ID != "hold" {
		t.Fatalf("waits for %+v, want the gate hold", out.Waiting)
	}
	if n := r.ctr.runs("launch"); n != 1 {
		t.Fatalf("the server ran launch %d times, want 1", n)
	}
	started := 0
	for _, rec := range r.auditOf(run) {
		if rec.Kind == "call.started" && strings.Contains(string(rec.Data), approve) {
			started++
		}
	}
	if started != 1 {
		t.Errorf("the audit log has %d call.started records on %s, want 1", started, approve)
	}
}
