package runtime_test

import (
	"context"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/runtime"
)

// A model driver's usage reaches the audit log as model.usage records,
// one per turn, and status sums them per step attempt and per run.
func TestModelUsage(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigConfig{}, buildDoc(t, "usage",
		agentStep("first", "model", []string{"customer.get"}, "second"),
		agentStep("second", "model", []string{"customer.get"}, "")))
	ctx := context.Background()
	m := &modelish{turn: func(run int, in driver.StepInput, c driver.Caller) (jsontext.Value, error) {
		rec, ok := c.(driver.UsageRecorder)
		if !ok {
			t.Fatalf("the runtime's Caller %T is not a driver.UsageRecorder", c)
		}
		turns := []driver.Usage{{Provider: "anthropic", Model: "claude-x", Turn: 1, InputTokens: 1200, OutputTokens: 30, CachedInputTokens: 1000, CacheWriteTokens: 150}}
		if in.StepID == "first" {
			turns = append(turns, driver.Usage{Provider: "anthropic", Model: "claude-x", Turn: 2, InputTokens: 1300, OutputTokens: 20, CachedInputTokens: 1150})
		}
		for _, u := range turns {
			if err := rec.RecordUsage(ctx, u); err != nil {
				return nil, err
			}
		}
		if _, err := c.Call(ctx, driver.Call{Name: "customer.get", Arguments: []byte(`{"customerId":"cus_ada"}`)}); err != nil {
			return nil, err
		}
		return jsontext.Value(`"done"`), nil
	}}
	out, err := r.engineWith(0, map[string]driver.Driver{"model": m}, nil, nil).Start(ctx, nil)
	if err != nil || out.Status != runtime.Completed {
		t.Fatalf("run: %+v %v", out, err)
	}
	recs, err := r.st.Audit(ctx, out.Run)
	if err != nil {
		t.Fatal(err)
	}
	var got []runtime.ModelUsage
	for _, rec := range recs {
		if rec.Kind == string(runtime.KindModelUsage) {
			var u runtime.ModelUsage
			if err := json.Unmarshal(rec.Data, &u); err != nil {
				t.Fatalf("model.usage data %s: %v", rec.Data, err)
			}
			if rec.Step == "" {
				t.Errorf("model.usage record without its step: %+v", rec)
			}
			got = append(got, u)
		}
	}
	want := []runtime.ModelUsage{
		{Attempt: 1, Provider: "anthropic", Model: "claude-x", Turn: 1, InputTokens: 1200, OutputTokens: 30, CachedInputTokens: 1000, CacheWriteTokens: 150},
		{Attempt: 1, Provider: "anthropic", Model: "claude-x", Turn: 2, InputTokens: 1300, OutputTokens: 20, CachedInputTokens: 1150},
		{Attempt: 1, Provider: "anthropic", Model: "claude-x", Turn: 1, InputTokens: 1200, OutputTokens: 30, CachedInputTokens: 1000, CacheWriteTokens: 150},
	}
	if len(got) != len(want) {
		t.Fatalf("model.usage records %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	run, err := r.st.GetRun(ctx, out.Run)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := runtime.StatusOf(ctx, r.st, run, true)
	if err != nil {
		t.Fatal(err)
	}
	first := runtime.Usage{Turns: 2, InputTokens: 2500, OutputTokens: 50, CachedInputTokens: 2150, CacheWriteTokens: 150}
	second := runtime.Usage{Turns: 1, InputTokens: 1200, OutputTokens: 30, CachedInputTokens: 1000, CacheWriteTokens: 150}
	total := runtime.Usage{Turns: 3, InputTokens: 3700, OutputTokens: 80, CachedInputTokens: 3150, CacheWriteTokens: 300}
	if len(rs.Steps) != 2 || rs.Steps[0].Usage == nil || *rs.Steps[0].Usage != first || rs.Steps[1].Usage == nil || *rs.Steps[1].Usage != second {
		t.Errorf("steps %+v, want usage %+v and %+v", rs.Steps, first, second)
	}
	if rs.Usage == nil || *rs.Usage != total {
		t.Errorf("run usage %+v, want %+v", rs.Usage, total)
	}
	b, _ := json.Marshal(rs)
	var raw struct {
		Usage map[string]int64 `json:"usage"`
	}
	if err := json.Unmarshal(b, &raw); err != nil || raw.Usage["inputTokens"] != 3700 || raw.Usage["cachedInputTokens"] != 3150 {
		t.Errorf("status JSON %s", b)
	}
	// Without steps (the list of runs) no usage is read.
	if rs, _ := runtime.StatusOf(ctx, r.st, run, false); rs.Usage != nil {
		t.Errorf("usage without steps: %+v", rs.Usage)
	}
}
