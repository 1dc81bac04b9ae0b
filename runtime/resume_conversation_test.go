package runtime_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/runtime"
)

// modelish is a driver that is not deterministic, as a model is: each run
// of the step is a function of what the step already made (in.Made).
type modelish struct {
	mu   sync.Mutex
	runs [][]driver.MadeCall
	turn func(run int, in driver.StepInput, c driver.Caller) (jsontext.Value, error)
}

func (m *modelish) RunStep(ctx context.Context, in driver.StepInput, c driver.Caller) (jsontext.Value, error) {
	m.mu.Lock()
	m.runs = append(m.runs, in.Made)
	n := len(m.runs)
	m.mu.Unlock()
	return m.turn(n, in, c)
}

// TestResumedStepGivesTheCallsMade: a resumed step is given the calls its
// attempt already made with their results, and a new side-effecting call
// to a tool that already ran (a model rewording an executed call) waits
// for a person instead of running a second time; approved, it runs once.
func TestResumedStepGivesTheCallsMade(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{}, buildDoc(t, "resumed", agentStep("act", "model", []string{"note.add", "customer.get"}, "")))
	ctx := context.Background()
	m := &modelish{turn: func(run int, in driver.StepInput, c driver.Caller) (jsontext.Value, error) {
		switch run {
		case 1:
			if _, err := c.Call(ctx, driver.Call{Name: "note.add", Arguments: []byte(`{"customerId":"cus_ada","body":"refund promised"}`)}); err != nil {
				return nil, err
			}
			if _, err := c.Call(ctx, driver.Call{Name: "customer.get", Arguments: []byte(`{"customerId":"cus_ada"}`)}); err != nil {
				return nil, err
			}
			return nil, driver.ErrAwaitAgent // the process stops here, say
		default:
			// Asked again, the model rewords the note it already added.
			res, err := c.Call(ctx, driver.Call{Name: "note.add", Arguments: []byte(`{"customerId":"cus_ada","body":"Refund promised."}`)})
			if err != nil {
				return nil, err
			}
			return jsontext.Value(`"` + strings.ReplaceAll(res.Error, `"`, `'`) + `"`), nil
		}
	}}
	sess := r.engineWith(0, map[string]driver.Driver{"model": m}, nil, nil)
	out, err := sess.Start(ctx, nil)
	if err != nil || out.Status != runtime.Waiting {
		t.Fatalf("start: %+v %v", out, err)
	}
	out, err = sess.Resume(ctx, out.Run)
	if err != nil || out.Status != runtime.Waiting || len(out.Waiting) != 1 || out.Waiting[0].Kind != "call" || !strings.Contains(out.Waiting[0].Summary, "resumed") {
		t.Fatalf("resume: %+v %v", out, err)
	}
	made := m.runs[1]
	if len(made) != 2 || made[0].Name != "note.add" || !strings.Contains(string(made[0].Result.Content), "refund promised") || made[1].Name != "customer.get" || !strings.Contains(string(made[1].Result.Content), "Ada") {
		t.Fatalf("the resumed step was given %+v", made)
	}
	if ns, _ := r.st.ListNotes(ctx, "cus_ada", "", 10); len(ns) != 1 {
		t.Fatalf("%d notes: the reworded call ran", len(ns))
	}
	r.mustDecide(out.Run, out.Waiting[0].ID, true)
	out, err = sess.Resume(ctx, out.Run)
	if err != nil || out.Status != runtime.Completed {
		t.Fatalf("after approval: %+v %v", out, err)
	}
	if ns, _ := r.st.ListNotes(ctx, "cus_ada", "", 10); len(ns) != 2 {
		t.Fatalf("%d notes after the approval, want 2", len(ns))
	}
}
