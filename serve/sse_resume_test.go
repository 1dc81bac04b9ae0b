package serve_test

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestEventsResumeFromLastEventID: a run's status events carry its audit
// sequence as id; a client that reconnects with an older Last-Event-ID
// is sent a status event at once (with the current sequence), one with
// the current id, or one that is not a number, is sent nothing extra.
func TestEventsResumeFromLastEventID(t *testing.T) {
	r := newRig(t, "")
	ctx := context.Background()
	c := r.api(operatorToken)
	run, ds, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	rec, err := r.st.GetRun(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	head := strconv.FormatInt(rec.AuditSeq, 10)
	if rec.AuditSeq < 2 {
		t.Fatalf("the run's audit sequence is %d; want a few records", rec.AuditSeq)
	}

	behind, stop := c.eventsSince("/api/v1/runs/"+run+"/events", strconv.FormatInt(rec.AuditSeq-1, 10))
	defer stop()
	select {
	case ev := <-behind:
		if ev.name != "status" || ev.id != head {
			t.Errorf("reconnecting one record behind: first event %+v; want status with id %s", ev, head)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reconnecting one record behind: no status event")
	}

	for _, last := range []string{head, "not-a-number"} {
		current, stop := c.eventsSince("/api/v1/runs/"+run+"/events", last)
		select {
		case ev := <-current:
			t.Errorf("reconnecting with Last-Event-ID %q (head %s): sent %+v; want nothing until the run moves", last, head, ev)
		case <-time.After(500 * time.Millisecond):
		}
		stop()
	}
}
