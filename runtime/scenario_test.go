package runtime_test

// Scenario tests, in the go-sdk's conformance style: each file of
// testdata/scenarios is a txtar archive holding what goes in (a playbook,
// the harness's settings, the agents' transcripts and a script of starts,
// decisions and resumes) and, in its "want" file, what must come out: the
// outcome of every script line, every call the run recorded (tool, state,
// refusal code), every audit record's kind, and what the built-ins actually
// wrote to the store (notes, today items), which is counted at the tool,
// not from the runtime's own records. Each start and resume also lists
// what the agent was answered, call by call.
//
//	go test ./runtime -run TestScenarios            # check
//	go test ./runtime -run TestScenarios -update    # rewrite the want files
//
// Files of a scenario:
//
//	playbook.json        the document; or
//	steps.json           its steps only: the document is built around them,
//	                     embedding the definitions of the tools they allow
//	config               optional, one setting a line: "memory" (bind npm
//	                     server-memory as "memory"), "stripe" (bind the
//	                     Stripe connector to stripe-mock behind a counting
//	                     proxy: the want file lists every request that
//	                     reached it), "maxToolCalls N",
//	                     "approvalExpiry DURATION"
//	policy.json          optional, the harness's "policy" section
//	transcript/AGENT.json  the transcript the agent AGENT replays
//	script               one command a line:
//	                       start [JSON input]
//	                       resume
//	                       approve|deny gate STEP
//	                       approve|deny call TOOL      (its pending approval)
//	                       approve|deny unknown TOOL   (an outcome-unknown call)
//	                       clock +DURATION             (advance the store's clock)
//	want                 the expected output

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

var updateScenarios = flag.Bool("update", false, "rewrite the want files of testdata/scenarios")

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenarios in testdata/scenarios")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) {
			t.Parallel()
			runScenario(t, f)
		})
	}
}

func runScenario(t *testing.T, path string) {
	ar, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range ar.Files {
		if _, dup := files[f.Name]; dup {
			t.Fatalf("%s: file %s given twice", path, f.Name)
		}
		files[f.Name] = f.Data
	}
	var cfg rigConfig
	var stripeRec *stripemock.Recorder
	for i, line := range lines(files["config"]) {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "memory":
			cfg.memory = true
		case "stripe":
			cfg.stripe, stripeRec = stripeMock(t)
			cfg.secrets = map[string]string{"STRIPE_API_KEY": "sk_test_scenario"}
		case "maxToolCalls":
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: config line %d: %v", path, i+1, err)
			}
			cfg.maxToolCalls = n
		case "approvalExpiry":
			cfg.approvalExpiry = v
		default:
			t.Fatalf("%s: config line %d: unknown setting %q", path, i+1, k)
		}
	}
	if pj := files["policy.json"]; pj != nil {
		if err := json.Unmarshal(pj, &cfg.policy); err != nil {
			t.Fatalf("%s: policy.json: %v", path, err)
		}
	}
	doc := files["playbook.json"]
	if doc == nil {
		var steps []map[string]any
		if err := json.Unmarshal(files["steps.json"], &steps); err != nil {
			t.Fatalf("%s: steps.json: %v (a scenario needs playbook.json or steps.json)", path, err)
		}
		for _, s := range steps {
			if tl, ok := s["allowedTools"].([]any); ok {
				names := []string{}
				for _, n := range tl {
					names = append(names, n.(string))
				}
				s["allowedTools"] = names
			}
		}
		doc = buildDoc(t, strings.TrimSuffix(filepath.Base(path), ".txtar"), steps...)
	}
	transcripts := map[string]string{}
	for name, data := range files {
		if agent, ok := strings.CutPrefix(name, "transcript/"); ok {
			transcripts[strings.TrimSuffix(agent, ".json")] = string(data)
		}
	}
	r := newRig(t, cfg, doc)
	ctx := context.Background()
	var clock time.Duration
	r.st.SetClock(func() time.Time { return time.Now().Add(clock) })

	var out bytes.Buffer
	var run string
	for i, line := range lines(files["script"]) {
		words := strings.Fields(line)
		fmt.Fprintf(&out, "> %s\n", line)
		switch words[0] {
		case "start", "resume":
			var o runtime.Outcome
			var err error
			seen := &agentLog{}
			if words[0] == "start" {
				o, err = r.engine(0, transcripts, seen, nil).Start(ctx, []byte(strings.TrimSpace(strings.TrimPrefix(line, "start"))))
				run = o.Run
			} else {
				o, err = r.engine(0, transcripts, seen, nil).Resume(ctx, run)
			}
			// What the agent was answered, call by call.
			for _, c := range seen.all() {
				answer := string(c.Res.Content)
				switch {
				case c.Err != nil:
					answer = "stop: " + c.Err.Error()
				case c.Res.Error != "":
					answer = "error: " + c.Res.Error
				}
				fmt.Fprintf(&out, "  %s %s -> %s\n", c.Step, strconv.QuoteToASCII(c.Name), clip(answer, 200))
			}
			if err != nil {
				fmt.Fprintf(&out, "error: %v\n", err)
			}
			fmt.Fprintf(&out, "%s\n", o.Status)
			for _, p := range o.Waiting {
				fmt.Fprintf(&out, "  waiting %s %s %s\n", p.Kind, p.Step, p.Tool)
			}
		case "approve", "deny":
			// approve call TOOL [by SUBJECT [GROUP,...]]: "by" decides as a
			// verified person (serve with serve.oidc), else as the CLI does.
			v := runtime.Verdict{Approve: words[0] == "approve", Reason: "the scenario says so", By: "scenario"}
			if len(words) >= 5 && words[3] == "by" {
				v.By, v.Verified = words[4], true
				if len(words) == 6 {
					v.Groups = strings.Split(words[5], ",")
				}
				words = words[:3]
			}
			if len(words) != 3 {
				t.Fatalf("%s: script line %d: want %s gate|call|unknown NAME [by SUBJECT [GROUPS]]", path, i+1, words[0])
			}
			id := words[2]
			if words[1] != "gate" {
				kind := map[string]string{"call": string(store.KindCall), "unknown": string(store.KindOutcomeUnknown)}[words[1]]
				id = ""
				for _, p := range r.pending(run) {
					if p.Kind == kind && p.Tool == words[2] {
						id = p.ID
						break
					}
				}
			}
			if id == "" {
				fmt.Fprintf(&out, "nothing to %s\n", words[0])
				continue
			}
			d, err := runtime.Decide(ctx, r.st, run, id, v)
			if err != nil {
				fmt.Fprintf(&out, "error: %v\n", err)
			} else {
				fmt.Fprintf(&out, "%s decided\n", d.Kind)
			}
		case "clock":
			d, err := time.ParseDuration(strings.TrimPrefix(words[1], "+"))
			if err != nil {
				t.Fatalf("%s: script line %d: %v", path, i+1, err)
			}
			clock += d
		default:
			t.Fatalf("%s: script line %d: unknown command %q", path, i+1, words[0])
		}
	}
	if run == "" {
		t.Fatalf("%s: the script started no run", path)
	}
	out.WriteString("calls:\n")
	for _, c := range r.calls(run) {
		fmt.Fprintf(&out, "  %s#%d.%d %s %s", c.Step, c.Attempt, c.Index, strconv.QuoteToASCII(c.Tool), c.State)
		if c.Code != "" {
			fmt.Fprintf(&out, " %s", c.Code)
		}
		out.WriteString("\n")
	}
	out.WriteString("audit:\n")
	for _, rec := range r.auditOf(run) {
		line := "  " + rec.Kind + " " + rec.Step
		if rec.Tool != "" {
			line += " " + strconv.QuoteToASCII(rec.Tool)
		}
		line += decisionNote(rec.Data)
		out.WriteString(line + "\n")
	}
	notes, err := r.st.ListNotes(ctx, "", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	out.WriteString("notes:\n")
	slices.Reverse(notes) // oldest first
	for _, n := range notes {
		fmt.Fprintf(&out, "  %s: %s\n", n.Step, n.Body)
	}
	items, err := r.st.ListToday(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	out.WriteString("today:\n")
	for _, it := range items {
		fmt.Fprintf(&out, "  %s: %s\n", it.Step, it.Title)
	}
	if stripeRec != nil {
		out.WriteString("stripe:\n")
		for _, q := range stripeRec.Requests() {
			fmt.Fprintf(&out, "  %s %s\n", q.Method, q.Path)
		}
	}
	// Run ids are random: the output names the run RUN; other ids and
	// times are masked too.
	got := strings.ReplaceAll(out.String(), run, "RUN")
	got = volatile.ReplaceAllStringFunc(got, func(m string) string {
		if i := strings.IndexByte(m, '_'); i > 0 && !strings.ContainsRune(m, ':') {
			return m[:i+1] + "ID"
		}
		return "TIME"
	})
	got = strings.ReplaceAll(got, " \n", "\n")

	if *updateScenarios {
		var kept []txtar.File
		for _, f := range ar.Files {
			if f.Name != "want" {
				kept = append(kept, f)
			}
		}
		ar.Files = append(kept, txtar.File{Name: "want", Data: []byte(got)})
		if err := os.WriteFile(path, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want := string(files["want"]); got != want {
		t.Errorf("%s: the outcome differs from its want file (-update rewrites it):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// volatile matches what differs between two runs of a scenario: ids of
// notes, today items, approvals and Stripe objects, and timestamps.
var volatile = regexp.MustCompile(`\b[a-z]{2,5}_[0-9A-Za-z]{14,}\b|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

// clip cuts s to at most n bytes for the want file.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// lines returns the non-blank lines of b that are not comments (#).
func lines(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// decisionNote is what the want file shows of a decision record a
// policy rule is about: who, the rules, N of M.
func decisionNote(data []byte) string {
	var d struct {
		By        string   `json:"by"`
		Rules     []string `json:"rules"`
		Count     int      `json:"count"`
		Needed    int      `json:"needed"`
		Approvers []string `json:"approvers"`
		Policy    *struct {
			Rules     []string `json:"rules"`
			Approvals int      `json:"approvals"`
			Refused   string   `json:"refused"`
		} `json:"policy"`
	}
	if len(data) == 0 || json.Unmarshal(data, &d) != nil {
		return ""
	}
	if d.Policy != nil {
		s := fmt.Sprintf(" policy=%s approvals=%d", strings.Join(d.Policy.Rules, ","), d.Policy.Approvals)
		if d.Policy.Refused != "" {
			s += " refused"
		}
		return s
	}
	if len(d.Rules) == 0 {
		return ""
	}
	s := fmt.Sprintf(" by=%s rules=%s", d.By, strings.Join(d.Rules, ","))
	if d.Needed > 0 {
		s += fmt.Sprintf(" %d/%d", d.Count, d.Needed)
	}
	if len(d.Approvers) > 0 {
		s += " approvers=" + strings.Join(d.Approvers, ",")
	}
	return s
}
