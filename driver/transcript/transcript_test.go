package transcript_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/drivertest"
	"github.com/openplaybook/openplaybook/driver/transcript"
)

const sample = `{
  "steps": {
    "triage": [
      {"tool": "customer.get", "arguments": {"id": "cus_1"}},
      {"tool": "customer.get ", "arguments": {"id": "cus_1"}},
      {"tool": "customer\u2024get", "arguments": {}},
      {"tool": "customer__get", "arguments": {}},
      {"tool": "customer.GET", "arguments": {}},
      {"tool": "customer.get\u0000", "arguments": {}},
      {"tool": "charge.refund", "arguments": {"charge": "ch_1", "amount": 1e400}},
      {"tool": "", "arguments": null},
      {"tool": "customer.get", "arguments": [1, "two", {"three": 3}]}
    ],
    "notify": []
  }
}`

func TestParseAndReplay(t *testing.T) {
	tr, err := transcript.Parse("t.json", []byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.StepIDs(); strings.Join(got, ",") != "triage,notify" {
		t.Errorf("StepIDs = %q", got)
	}
	entries := tr.Calls("triage")
	if len(entries) != 9 {
		t.Fatalf("%d entries", len(entries))
	}
	if e := entries[1]; e.Pointer != "/steps/triage/1" || e.Line != 5 || e.Column != 7 {
		t.Errorf("entry 1 at %s %d:%d", e.Pointer, e.Line, e.Column)
	}

	caller := &drivertest.Caller{Allowed: []string{"customer.get"}}
	out, err := transcript.New(tr).RunStep(context.Background(), driver.StepInput{StepID: "triage"}, caller)
	if err != nil {
		t.Fatal(err)
	}
	wantNames := []string{"customer.get", "customer.get ", "customer\u2024get", "customer__get", "customer.GET", "customer.get\x00", "charge.refund", "", "customer.get"}
	wantArgs := []string{`{"id": "cus_1"}`, `{"id": "cus_1"}`, `{}`, `{}`, `{}`, `{}`, `{"charge": "ch_1", "amount": 1e400}`, `null`, `[1, "two", {"three": 3}]`}
	calls := caller.Calls()
	if len(calls) != len(wantNames) {
		t.Fatalf("%d calls, want %d", len(calls), len(wantNames))
	}
	for i, c := range calls {
		if c.Name != wantNames[i] {
			t.Errorf("call %d: name %q, want %q (byte for byte)", i, c.Name, wantNames[i])
		}
		if string(c.Arguments) != wantArgs[i] {
			t.Errorf("call %d: arguments %s, want %s (as written)", i, c.Arguments, wantArgs[i])
		}
	}
	want := `[{"tool":"customer.get","result":{"ok":true}},` +
		`{"tool":"customer.get ","error":"tool \"customer.get \" is not allowed in this step"},` +
		`{"tool":"customer․get","error":"tool \"customer․get\" is not allowed in this step"},` +
		`{"tool":"customer__get","error":"tool \"customer__get\" is not allowed in this step"},` +
		`{"tool":"customer.GET","error":"tool \"customer.GET\" is not allowed in this step"},` +
		`{"tool":"customer.get\u0000","error":"tool \"customer.get\\x00\" is not allowed in this step"},` +
		`{"tool":"charge.refund","error":"tool \"charge.refund\" is not allowed in this step"},` +
		`{"tool":"","error":"tool \"\" is not allowed in this step"},` +
		`{"tool":"customer.get","result":{"ok":true}}]`
	if string(out) != want {
		t.Errorf("output\n%s\nwant\n%s", out, want)
	}
	if !jsontext.Value(out).IsValid() {
		t.Errorf("output is not valid JSON")
	}

	// A step with an empty list, and one with no entry, make no calls.
	for _, step := range []string{"notify", "absent"} {
		caller := &drivertest.Caller{}
		out, err := transcript.New(tr).RunStep(context.Background(), driver.StepInput{StepID: step}, caller)
		if err != nil || string(out) != "[]" || len(caller.Calls()) != 0 {
			t.Errorf("step %q: %s, %v, %d calls", step, out, err, len(caller.Calls()))
		}
	}
}

func TestCallerErrorStopsTheStep(t *testing.T) {
	tr, err := transcript.Parse("t.json", []byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	for _, stop := range []error{driver.ErrSuspended, driver.ErrCallLimit} {
		caller := &drivertest.Caller{Allowed: []string{"customer.get"}, Err: stop, ErrAt: 2}
		out, err := transcript.New(tr).RunStep(context.Background(), driver.StepInput{StepID: "triage"}, caller)
		if err != stop || out != nil {
			t.Errorf("RunStep = %s, %v; want %v unchanged", out, err, stop)
		}
		if n := len(caller.Calls()); n != 2 {
			t.Errorf("%d calls after the error, want 2", n)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	caller := &drivertest.Caller{}
	if _, err := transcript.New(tr).RunStep(ctx, driver.StepInput{StepID: "triage"}, caller); !errors.Is(err, context.Canceled) || len(caller.Calls()) != 0 {
		t.Errorf("cancelled: %v, %d calls", err, len(caller.Calls()))
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"not an object", `[]`, `t.json:1:1: (the document): a transcript must be a JSON object {"steps": {...}}, not a list`},
		{"a string", `"steps"`, `t.json:1:1: (the document): a transcript must be a JSON object`},
		{"empty", ``, `t.json:1:1: (the document): unexpected EOF`},
		{"no steps", `{}`, `t.json:1:1: (the document): missing member "steps"`},
		{"unknown top member", `{"steps": {}, "output": {}}`, `t.json:1:15: /output: unknown member "output"; a transcript has only "steps"`},
		{"member case", `{"Steps": {}}`, `unknown member "Steps"`},
		{"unknown call member", "{\"steps\": {\"a\": [\n  {\"tool\": \"x\", \"arguments\": {}, \"note\": \"hi\"}]}}", `t.json:2:34: /steps/a/0/note: unknown member "note"; a call has only "tool" and "arguments"`},
		{"tool case", `{"steps": {"a": [{"Tool": "x", "arguments": {}}]}}`, `/steps/a/0/Tool: unknown member "Tool"`},
		{"duplicate step", `{"steps": {"a": [], "a": []}}`, `t.json:1:21: /steps/a: member "a" given twice; a name appears at most once in an object`},
		{"duplicate tool", `{"steps": {"a": [{"tool": "x", "tool": "y", "arguments": {}}]}}`, `t.json:1:32: /steps/a/0/tool: member "tool" given twice`},
		{"duplicate by escape", `{"steps": {"a": [{"tool": "x", "t\u006fol": "y", "arguments": {}}]}}`, `/steps/a/0/tool: member "tool" given twice`},
		{"duplicate in arguments", `{"steps": {"a": [{"tool": "x", "arguments": {"id": 1, "id": 2}}]}}`, `/steps/a/0/arguments/id: member "id" given twice`},
		{"duplicate steps", `{"steps": {}, "steps": {}}`, `/steps: member "steps" given twice`},
		{"steps not an object", `{"steps": []}`, `/steps: "steps" must be an object from step id to a list of calls, not a list`},
		{"entry not a list", `{"steps": {"a": {"tool": "x"}}}`, `/steps/a: a step's entry must be a list of calls, not an object`},
		{"call not an object", `{"steps": {"a": ["customer.get"]}}`, `/steps/a/0: a call must be an object {"tool": ..., "arguments": ...}, not a string`},
		{"tool not a string", `{"steps": {"a": [{"tool": 1, "arguments": {}}]}}`, `/steps/a/0/tool: "tool" must be a string, not a number`},
		{"tool null", `{"steps": {"a": [{"tool": null, "arguments": {}}]}}`, `/steps/a/0: missing member "tool"`},
		{"missing tool", `{"steps": {"a": [{"arguments": {}}]}}`, `t.json:1:18: /steps/a/0: missing member "tool"`},
		{"missing arguments", `{"steps": {"a": [{"tool": "x"}]}}`, `t.json:1:18: /steps/a/0: missing member "arguments" (the call's arguments; {} for none)`},
		{"trailing comma", `{"steps": {"a": [],}}`, `t.json:1:19:`},
		{"trailing data", `{"steps": {}} {}`, `t.json:1:15:`},
		{"invalid utf-8", "{\"steps\": {\"a\": [{\"tool\": \"x\xff\", \"arguments\": {}}]}}", `invalid UTF-8`},
		{"lone surrogate", `{"steps": {"a": [{"tool": "x\ud800", "arguments": {}}]}}`, `/steps/a/0/tool:`},
		{"comment", "{\"steps\": {} // c\n}", `t.json:1:14:`},
	}
	for _, tc := range tests {
		_, err := transcript.Parse("t.json", []byte(tc.src))
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %s", tc.name, err, tc.want)
		}
		if !strings.HasPrefix(err.Error(), "transcript: t.json:") {
			t.Errorf("%s: %v does not name the file", tc.name, err)
		}
	}
}

func TestLoadAndFromSettings(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "transcripts", "refund-review"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "transcripts", "refund-review", "lou.json")
	if err := os.WriteFile(path, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := transcript.Load(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("Load(missing) = %v", err)
	}
	if got := transcript.PathFor("transcripts/{playbook}/lou.json", "refund-review"); got != "transcripts/refund-review/lou.json" {
		t.Errorf("PathFor = %q", got)
	}
	setup := &driver.Setup{
		PlaybookID: "refund-review",
		Path:       func(p string) string { return filepath.Join(dir, p) },
	}
	d, err := transcript.FromSettings(map[string]any{"transcript": "transcripts/{playbook}/lou.json"}, setup)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(d.Transcript().Calls("triage")); n != 9 {
		t.Errorf("%d calls", n)
	}

	for _, tc := range []struct {
		settings map[string]any
		setup    *driver.Setup
		want     string
	}{
		{map[string]any{}, setup, `transcript driver: setting "transcript" is required`},
		{map[string]any{"transcript": ""}, setup, `setting "transcript" must not be empty`},
		{map[string]any{"transcript": 3}, setup, `setting "transcript" must be a string`},
		{map[string]any{"transcript": "x.json", "transcipt": "y"}, setup, `unknown setting "transcipt" (did you mean "transcript"?); the settings of driver "transcript" are "transcript"`},
		{map[string]any{"transcript": "transcripts/{playbook}/lou.json"}, nil, `holds "{playbook}", and no playbook was named`},
		{map[string]any{"transcript": "${secret:DIR}/lou.json"}, setup, `setting "transcript" holds a ${secret:NAME} reference, and no secrets were given`},
		{map[string]any{"transcript": "nope.json"}, setup, `nope.json: no such file`},
	} {
		_, err := transcript.FromSettings(tc.settings, tc.setup)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromSettings(%v) = %v, want %q", tc.settings, err, tc.want)
		}
	}
	if err := transcript.CheckSettings(map[string]any{"transcript": "x/{playbook}.json"}); err != nil {
		t.Errorf("CheckSettings: %v", err)
	}

	// A secret in the path is expanded, and never shown in an error.
	setup.Expand = func(s string) (string, error) {
		return strings.ReplaceAll(s, "${secret:DIR}", "s3cr3t-dir"), nil
	}
	_, err = transcript.FromSettings(map[string]any{"transcript": "${secret:DIR}/lou.json"}, setup)
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("secret path: %v", err)
	}
}

// The example transcripts follow the contract.
func TestExampleTranscripts(t *testing.T) {
	files, _ := filepath.Glob("../../examples/transcripts/*.json")
	for _, f := range files {
		tr, err := transcript.Load(f)
		if err != nil {
			t.Error(err)
			continue
		}
		if len(tr.StepIDs()) == 0 {
			t.Errorf("%s: no steps", f)
		}
	}
}

// TestSteps: each step id with the position of its name (the opening
// quote), the pointer of its list, and its number of calls, in file order,
// however the file is laid out and whatever the id holds.
func TestSteps(t *testing.T) {
	src := "{\"steps\":{\"a/b~c\":[],\n" +
		"  \"r\\u00e9sum\\u00e9\" :\n" +
		"\t[{\"tool\": \"x\", \"arguments\": {}}, {\"tool\": \"y\", \"arguments\": {\"k\": \"[\"}}],\n" +
		"  \"z\": [{\"tool\": \"\\\"quoted\\\"\", \"arguments\": []}]}}"
	tr, err := transcript.Parse("t.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []transcript.Step{
		{ID: "a/b~c", Pointer: "/steps/a~1b~0c", Line: 1, Column: 11, Calls: 0},
		{ID: "résumé", Pointer: "/steps/résumé", Line: 2, Column: 3, Calls: 2},
		{ID: "z", Pointer: "/steps/z", Line: 4, Column: 3, Calls: 1},
	}
	got := tr.Steps()
	if len(got) != len(want) {
		t.Fatalf("Steps = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
