package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/runtime"
)

// failing is a driver whose step fails with err after its calls.
type failing struct {
	calls scripted
	err   error
}

func (f failing) RunStep(ctx context.Context, in driver.StepInput, c driver.Caller) (jsontext.Value, error) {
	if _, err := f.calls.RunStep(ctx, in, c); err != nil {
		return nil, err
	}
	return nil, f.err
}

// TestResumeSaysWhenItVoidsAnApproval: a run waits for the approval of a
// launch; on resume the agent does not ask for the launch again, and the
// step ends (finished or failed) with the approval unused. The approval is
// void: it is recorded (approval.voided), resume says so on its progress
// output, naming the approval, the tool and why, and the launch never
// reaches the server. For an approval a person approved, an undecided
// one, and a step that fails instead of finishing.
func TestResumeSaysWhenItVoidsAnApproval(t *testing.T) {
	t.Parallel()
	launch := driver.Call{Name: "mcp.ctr.launch", Arguments: jsonOf(map[string]any{"target": "alpha"})}
	note := driver.Call{Name: "note.add", Arguments: jsonOf(map[string]any{"body": "did something else"})}
	for _, tc := range []struct {
		name    string
		approve bool
		then    driver.Driver
		want    runtime.Status
		by      string // what the line says of the decision
	}{
		{"approved, step finishes", true, scripted{"act": {note}}, runtime.Completed, "approved by test"},
		{"undecided, step finishes", false, scripted{"act": {note}}, runtime.Completed, "not decided"},
		{"approved, step fails", true, failing{scripted{"act": {note}}, errors.New("the model gave up")}, runtime.Failed, "approved by test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctr := startCtr(t, true)
			r := newRig(t, rigConfig{http: map[string]string{"ctr": ctr.URL}},
				buildDoc(t, "voided", agentStep("act", "ops", []string{"mcp.ctr.launch", "note.add"}, "")))
			ctx := context.Background()
			out, err := r.engineWith(0, map[string]driver.Driver{"ops": scripted{"act": {launch}}}, nil, nil).Start(ctx, nil)
			wantOutcome(t, "start", out, err, runtime.Waiting)
			apr := r.onlyApproval(out.Run)
			if tc.approve {
				r.mustDecide(out.Run, apr.ID, true)
			}
			before := len(r.progress.String())
			out, err = r.engineWith(0, map[string]driver.Driver{"ops": tc.then}, nil, nil).Resume(ctx, out.Run)
			wantOutcome(t, "resume", out, err, tc.want)
			said := r.progress.String()[before:]
			var line string
			for _, l := range strings.Split(said, "\n") {
				if strings.Contains(l, apr.ID) {
					line = l
				}
			}
			for _, want := range []string{"approval " + apr.ID, `"mcp.ctr.launch"`, tc.by, "void", "did not ask for the call again", "not run"} {
				if !strings.Contains(line, want) {
					t.Errorf("resume's progress does not say %q of the voided approval; it said:\n%s", want, said)
				}
			}
			voided := false
			for _, rec := range r.auditOf(out.Run) {
				var d struct {
					Approval string `json:"approval"`
				}
				_ = json.Unmarshal(rec.Data, &d)
				voided = voided || rec.Kind == string(runtime.KindApprovalVoided) && d.Approval == apr.ID
			}
			if !voided {
				t.Errorf("no approval.voided record of %s", apr.ID)
			}
			if n := ctr.runs("launch"); n != 0 {
				t.Errorf("the launch ran %d times", n)
			}
		})
	}
}
