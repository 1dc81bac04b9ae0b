package cli

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os/user"
	"slices"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store/engine"
)

// TestDecideErrorsNameTheNextStep: approve and deny word an unknown run
// or approval id as what to run next, never in the store's words.
func TestDecideErrorsNameTheNextStep(t *testing.T) {
	t.Parallel()
	e, doc := gatedEnv(t)
	o := e.outcome(ExitWaiting, "run", doc)
	for _, verb := range []string{"approve", "deny"} {
		_, stderr := e.cli(ExitProblems, verb, "run_nope", "confirm")
		if !strings.Contains(stderr, "run run_nope not found; 'openplaybook status --harness "+e.harness+"' lists runs") || strings.Contains(stderr, "store:") {
			t.Errorf("%s of an unknown run: %q", verb, stderr)
		}
		_, stderr = e.cli(ExitProblems, verb, o.Run, "apr_nope")
		if want := "run " + o.Run + " has no approval apr_nope; 'openplaybook status --harness " + e.harness + " " + o.Run + "' lists what it waits for"; !strings.Contains(stderr, want) || strings.Contains(stderr, "store:") {
			t.Errorf("%s of an unknown approval: %q, want %q", verb, stderr, want)
		}
	}
	for _, args := range [][]string{{"status", "run_nope"}, {"audit", "run_nope"}, {"resume", "run_nope"}} {
		if _, stderr := e.cli(ExitProblems, args...); !strings.Contains(stderr, "run run_nope not found; 'openplaybook status --harness "+e.harness+"' lists runs") {
			t.Errorf("%s of an unknown run: %q", args[0], stderr)
		}
	}
}

// TestDecideJSONAndDefaultBy: approve and deny print one object with
// --format json (or -f json); --by defaults to the OS user name.
func TestDecideJSONAndDefaultBy(t *testing.T) {
	t.Parallel()
	e, doc := gatedEnv(t)
	o := e.outcome(ExitWaiting, "run", doc)
	out, _ := e.cli(ExitOK, "approve", "-f", "json", "--reason", "looks right", o.Run, "confirm")
	var d map[string]any
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("approve -f json: %q (%v)", out, err)
	}
	want := "cli"
	if u, err := user.Current(); err == nil && u.Username != "" {
		want = u.Username
	}
	if d["run"] != o.Run || d["kind"] != "gate" || d["id"] != "confirm" || d["decision"] != "approved" || d["by"] != want ||
		d["reason"] != "looks right" || d["next"] != "openplaybook resume --harness "+e.harness+" "+o.Run || len(d) != 7 {
		t.Errorf("approve -f json: %v", d)
	}
	_, recs := e.auditJSON(o.Run)
	found := false
	for _, r := range recs {
		if r["kind"] == "gate.approved" && strings.Contains(mustJSON(t, r), `"by":"`+want+`"`) {
			found = true
		}
	}
	if !found {
		t.Errorf("no gate.approved record by %q: %v", want, recs)
	}

	// deny, text and json, on a second run.
	o2 := e.outcome(ExitWaiting, "run", doc)
	out, _ = e.cli(ExitOK, "deny", "--format", "json", "--by", "lou", o2.Run, "confirm")
	if err := json.Unmarshal([]byte(out), &d); err != nil || d["decision"] != "denied" || d["by"] != "lou" {
		t.Errorf("deny --format json: %q (%v)", out, err)
	}
	if o3 := e.outcome(ExitRejected, "resume", o2.Run); o3.Status != runtime.Rejected {
		t.Errorf("resume after deny: %+v", o3)
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUserNameFallback: without an OS user, $USER, then "cli".
func TestUserNameFallback(t *testing.T) {
	t.Parallel()
	nobody := func() (*user.User, error) { return nil, errors.New("no user") }
	ada := func() (*user.User, error) { return &user.User{Username: "ada"}, nil }
	env := func(k string) string { return map[string]string{"USER": "lou"}[k] }
	if n := userName(ada, env); n != "ada" {
		t.Errorf("with an OS user: %q", n)
	}
	if n := userName(nobody, env); n != "lou" {
		t.Errorf("without an OS user: %q, want $USER", n)
	}
	if n := userName(nobody, noEnv); n != "cli" {
		t.Errorf("without an OS user or $USER: %q", n)
	}
}

// TestRunInputFromStdin: run --input @- reads the input from standard
// input; a syntax error there is a usage error naming --input.
func TestRunInputFromStdin(t *testing.T) {
	t.Parallel()
	e, doc := gatedEnv(t)
	c := &CLI{Stdin: strings.NewReader(`{"customerId": `), Getenv: noEnv}
	code, _, stderr := runIn(c, "run", "--harness", e.harness, "--input", "@-", doc)
	if code != ExitUsage || !strings.Contains(stderr, "--input") {
		t.Errorf("run --input @- with bad JSON: exit %d, %q", code, stderr)
	}
	c = &CLI{Stdin: strings.NewReader(`{}`), Getenv: noEnv}
	if code, out, stderr := runIn(c, "run", "--harness", e.harness, "--input", "@-", "-f", "json", doc); code != ExitWaiting {
		t.Errorf("run --input @- {}: exit %d\n%s\n%s", code, out, stderr)
	}
}

// TestCompletion: the completion command writes each shell's script;
// --format values complete on every command with a format, and run ids
// (and, for approve, what the run waits for) from the harness's store.
func TestCompletion(t *testing.T) {
	t.Parallel()
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, stderr := run(t, nil, "completion", sh)
		if code != ExitOK || !strings.Contains(out, "openplaybook") {
			t.Errorf("completion %s: exit %d, %d bytes, %q", sh, code, len(out), stderr)
		}
	}
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}} {
		if code, out, stderr := run(t, nil, args...); code != ExitUsage || out != "" || !strings.Contains(stderr, "bash") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
	for cmd, want := range map[string]string{"validate": "sarif", "explain": "mermaid", "status": "json", "rules": "json", "version": "json", "approve": "json"} {
		_, out, _ := run(t, nil, "__complete", cmd, "--format", "")
		if !strings.Contains(out, want+"\n") || !strings.Contains(out, "text\n") {
			t.Errorf("__complete %s --format: %q", cmd, out)
		}
	}
	e, doc := gatedEnv(t)
	o := e.outcome(ExitWaiting, "run", doc)
	_, out := e.cliOut(t, "__complete", "status", "--harness", e.harness, "")
	if !strings.Contains(out, o.Run+"\tgated waiting") {
		t.Errorf("__complete status RUN: %q", out)
	}
	_, out = e.cliOut(t, "__complete", "approve", "--harness", e.harness, o.Run, "")
	if !strings.Contains(out, "confirm\tgate in step confirm") {
		t.Errorf("__complete approve RUN ID: %q", out)
	}
}

// cliOut runs args as they are (no --harness added) and returns the exit
// code and stdout.
func (e *rtEnv) cliOut(t *testing.T, args ...string) (int, string) {
	code, out, _ := runIn(&CLI{Getenv: noEnv}, args...)
	return code, out
}

// TestRunJSONErrorShape: run and resume with --format json print, on every
// failure that is not a usage error, one object {run, status: "error",
// error} (run "" when no run exists), never an outcome with an empty or
// undocumented status: a resume refused by the run lock (another process
// executes the run), an unknown run, a document that does not pass check.
// A usage error (exit 2) prints nothing on standard output.
func TestRunJSONErrorShape(t *testing.T) {
	t.Parallel()
	e, doc := gatedEnv(t)
	o := e.outcome(ExitWaiting, "run", doc)

	// Another process holds the run: its lock is taken here, through a
	// descriptor of the database of its own.
	h, _, err := harness.Load(e.harness)
	if err != nil {
		t.Fatal(err)
	}
	st, err := engine.Open(context.Background(), h, nil)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := st.LockRun(o.Run)
	if err != nil {
		t.Fatal(err)
	}
	bad := e.write("bad.json", string(rtDoc(t, "bad",
		map[string]any{"id": "work", "kind": "agent", "agent": "clerk", "purpose": "Call what is not there.", "allowedTools": []string{"no.such_tool"}},
	)))
	for _, tc := range []struct {
		args      []string
		run, want string
	}{
		{[]string{"resume", o.Run}, o.Run, "being executed by another process"},
		{[]string{"resume", "run_nosuchrun"}, "run_nosuchrun", "run run_nosuchrun not found"},
		{[]string{"run", bad}, "", "does not pass check"},
	} {
		stdout, stderr := e.cli(ExitProblems, append(tc.args, "-f", "json")...)
		var got map[string]any
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Errorf("%v -f json: stdout %q is not one JSON object: %v", tc.args, stdout, err)
			continue
		}
		keys := slices.Sorted(maps.Keys(got))
		if !slices.Equal(keys, []string{"error", "run", "status"}) || got["status"] != "error" || got["run"] != tc.run ||
			!strings.Contains(got["error"].(string), tc.want) {
			t.Errorf("%v -f json: %v, want {run: %q, status: error, error: ...%s...}", tc.args, got, tc.run, tc.want)
		}
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: stderr %q does not say %q", tc.args, stderr, tc.want)
		}
	}
	unlock()
	st.Close()
	// The lock released, the same resume goes on: a waiting outcome.
	if got := e.outcome(ExitWaiting, "resume", o.Run); got.Run != o.Run || got.Status != runtime.Waiting {
		t.Errorf("resume after the lock: %+v", got)
	}
	// Usage: nothing on standard output.
	if stdout, _ := e.cli(ExitUsage, "run", "--input", "{", "-f", "json", doc); stdout != "" {
		t.Errorf("usage error printed %q", stdout)
	}
}
