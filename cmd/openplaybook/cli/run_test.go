package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store/engine"
)

// The run commands (run, approve, deny, resume, status, audit, today)
// driven through CLI.Main as a person would, each command a fresh "process"
// (a new CLI value: the engine, the store and the MCP servers are built
// again), against the real parts: the built-ins over SQLite in a temporary
// directory, server-memory over stdio and the Stripe connector on
// stripe-mock.

// Secret values of these tests: the Stripe key (stripe-mock accepts any
// sk_test_ key) and an environment secret of server-memory. Neither may
// appear in anything a command prints or the store holds.
const (
	runStripeSecret = "sk_test_4eC39HqLyjWDarjtT1zdp7dcSECRETVALUE"
	runMemorySecret = "memory-Token-Qx7Lw2SECRET"
)

// rtEnv is a harness in a temporary directory and everything the commands
// printed so far.
type rtEnv struct {
	t       *testing.T
	dir     string
	harness string
	printed bytes.Buffer
}

// rtConfig says what the harness binds.
type rtConfig struct {
	stripe         string            // the stripe connection's base URL; "" none
	memory         bool              // server-memory, with Ada Lovelace in its graph
	transcripts    map[string]string // agent name to transcript JSON
	agents         map[string]any    // more agent bindings, by name
	servers        map[string]any    // more MCP server bindings, by name
	maxToolCalls   int
	approvalExpiry string
}

func newRTEnv(t *testing.T, cfg rtConfig) *rtEnv {
	t.Helper()
	e := &rtEnv{t: t, dir: t.TempDir()}
	root := mcptest.RepoRoot(t)
	servers := map[string]any{}
	if cfg.memory {
		m := mcptest.MemoryServer(t, "memory")
		graph := filepath.Join(e.dir, "memory.jsonl")
		e.write("memory.jsonl", `{"type":"entity","name":"Ada Lovelace","entityType":"customer","observations":["Reported CSV export timeouts."]}`+"\n")
		servers["memory"] = map[string]any{"command": m.Command, "args": m.Args, "timeout": "20s",
			"env": map[string]any{"MEMORY_FILE_PATH": graph, "MEMORY_API_TOKEN": "${secret:MEMORY_TOKEN}"}}
	}
	for name, b := range cfg.servers {
		servers[name] = b
	}
	agents := map[string]any{}
	for name, tr := range cfg.transcripts {
		e.write(name+".json", tr)
		agents[name] = map[string]any{"driver": "transcript", "transcript": name + ".json"}
	}
	for name, b := range cfg.agents {
		agents[name] = b
	}
	h := map[string]any{
		"mcpServers": servers,
		"secrets":    map[string]any{"env": false, "dotenv": []any{"secrets.env"}},
		"agents":     agents,
		"store":      teststore.Section(t, "state/openplaybook.db"),
	}
	h["store"].(map[string]any)["seed"] = filepath.Join(root, "examples", "data", "customers.json")
	if cfg.stripe != "" {
		h["connections"] = map[string]any{"stripe": map[string]any{"authKind": "api_token", "secrets": map[string]any{"apiKey": "STRIPE_API_KEY"}, "baseURL": cfg.stripe}}
	}
	rt := map[string]any{}
	if cfg.maxToolCalls > 0 {
		rt["maxToolCalls"] = cfg.maxToolCalls
	}
	if cfg.approvalExpiry != "" {
		rt["approvalExpiry"] = cfg.approvalExpiry
	}
	if len(rt) > 0 {
		h["runtime"] = rt
	}
	e.write("secrets.env", "STRIPE_API_KEY="+runStripeSecret+"\nMEMORY_TOKEN="+runMemorySecret+"\n")
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	e.harness = e.write("harness.json", string(b))
	return e
}

// loadHarness reads the env's harness file.
func (e *rtEnv) loadHarness() *harness.Harness {
	e.t.Helper()
	h, _, err := harness.Load(e.harness)
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

func (e *rtEnv) write(name, data string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// cli runs one command with --harness, as a new process would, and fails
// the test unless it exits with want.
func (e *rtEnv) cli(want int, args ...string) (stdout, stderr string) {
	e.t.Helper()
	var out, errb bytes.Buffer
	c := &CLI{Stdout: &out, Stderr: &errb, Version: "v0.0.0-test"}
	full := append([]string{args[0], "--harness", e.harness}, args[1:]...)
	code := c.Main(full)
	e.printed.Write(out.Bytes())
	e.printed.Write(errb.Bytes())
	if code != want {
		e.t.Fatalf("openplaybook %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(full, " "), code, want, out.String(), errb.String())
	}
	return out.String(), errb.String()
}

// outcome runs run or resume with --format json and returns the outcome.
func (e *rtEnv) outcome(want int, args ...string) runtime.Outcome {
	e.t.Helper()
	stdout, _ := e.cli(want, append(args, "--format", "json")...)
	var o runtime.Outcome
	if err := json.Unmarshal([]byte(stdout), &o); err != nil {
		e.t.Fatalf("%s --format json printed %q: %v", args[0], stdout, err)
	}
	return o
}

// auditJSON returns `audit --verify --format json RUN`.
func (e *rtEnv) auditJSON(run string) (verified bool, records []map[string]any) {
	e.t.Helper()
	stdout, _ := e.cli(ExitOK, "audit", "--verify", "--format", "json", run)
	var a struct {
		Verified bool             `json:"verified"`
		Records  []map[string]any `json:"records"`
	}
	if err := json.Unmarshal([]byte(stdout), &a); err != nil {
		e.t.Fatalf("audit --format json: %v\n%s", err, stdout)
	}
	return a.Verified, a.Records
}

func rtHasRecord(recs []map[string]any, kind, tool string) bool {
	for _, r := range recs {
		if r["kind"] == kind && (tool == "" || r["tool"] == tool) {
			return true
		}
	}
	return false
}

func rtExample(t *testing.T, name string) string {
	return filepath.Join(mcptest.RepoRoot(t), "examples", name)
}

// rtTranscript builds a transcript from step id to calls {tool, arguments}.
func rtTranscript(steps map[string][]map[string]any) string {
	b, err := json.Marshal(map[string]any{"steps": steps})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func rtCall(tool string, args map[string]any) map[string]any {
	return map[string]any{"tool": tool, "arguments": args}
}

// rtRefunds counts the refunds Stripe was asked for.
func rtRefunds(rec *stripemock.Recorder) int {
	n := 0
	for _, r := range rec.Requests() {
		if r.Method == "POST" && r.Path == "/v1/refunds" {
			n++
		}
	}
	return n
}

// ritaTranscript is examples/transcripts/rita.json with secrets in the
// agent's arguments, and a refused look-alike name in review.
func ritaTranscript() string {
	both := "stripe " + runStripeSecret + " memory " + runMemorySecret
	return rtTranscript(map[string][]map[string]any{
		"review": {
			rtCall("customer.get", map[string]any{"customerId": "cus_ada"}),
			rtCall("customer\u2024get", map[string]any{"customerId": "cus_ada"}),
			rtCall("billing_customer.get", map[string]any{"customerId": "cus_StripeAda"}),
			rtCall("charge.history", map[string]any{"customerId": "cus_StripeAda", "limit": 10}),
			rtCall("invoice.list", map[string]any{"customerId": "cus_StripeAda", "status": "paid"}),
			rtCall("mcp.memory.search_nodes", map[string]any{"query": runMemorySecret}),
			rtCall("note.add", map[string]any{"customerId": "cus_ada", "body": "Reviewed. " + both, "tags": []string{"refund", runStripeSecret}}),
		},
		"refund": {
			rtCall("charge.refund", map[string]any{"chargeId": "ch_duplicate", "reason": "duplicate"}),
			rtCall("note.add", map[string]any{"customerId": "cus_ada", "body": "Refunded. " + both, "tags": []string{"refund"}}),
			rtCall("mcp.memory.add_observations", map[string]any{"observations": []any{map[string]any{"entityName": "Ada Lovelace", "contents": []string{"Refunded. " + both}}}}),
		},
		"decline": {
			rtCall("note.add", map[string]any{"customerId": "cus_ada", "body": "Declined. " + both, "tags": []string{"refund"}}),
			rtCall("today.surface", map[string]any{"title": "Answer Ada by hand", "summary": "Declined. " + both, "priority": "high", "customerId": "cus_ada",
				"link": "https://example.com/refunds?token=" + url.QueryEscape(runMemorySecret)}),
		},
	})
}

const rtRefundInput = `{"customerId":"cus_ada","chargeId":"ch_duplicate","message":"I was charged twice."}`

// TestRunRefundReviewCLI runs refund-review through the commands on
// stripe-mock (shared by the subtests), each subtest a person deciding
// differently.
func TestRunRefundReviewCLI(t *testing.T) {
	t.Parallel()
	mock := stripemock.Start(t)

	// Approve the gate and the refund: exit 3, 3, then 0; the refund is
	// sent once; the audit chain verifies; no secret is printed or stored.
	t.Run("approve", func(t *testing.T) {
		t.Parallel()
		rec := stripemock.Proxy(t, mock)
		e := newRTEnv(t, rtConfig{stripe: rec.URL, memory: true, transcripts: map[string]string{"rita": ritaTranscript()}})
		doc := rtExample(t, "refund-review.json")
		o := e.outcome(ExitWaiting, "run", "--input", rtRefundInput, doc)
		if o.Status != runtime.Waiting || len(o.Waiting) != 1 || o.Waiting[0].ID != "approve_refund" {
			t.Fatalf("run: %+v, want waiting at approve_refund", o)
		}
		run := o.Run
		e.cli(ExitOK, "approve", "--reason", "duplicate confirmed", run, "approve_refund")
		o = e.outcome(ExitWaiting, "resume", run)
		if len(o.Waiting) != 1 || o.Waiting[0].Kind != "call" || o.Waiting[0].Tool != "charge.refund" {
			t.Fatalf("resume: %+v, want waiting for the charge.refund approval", o)
		}
		apr := o.Waiting[0].ID
		if status, _ := e.cli(ExitOK, "status", "--format", "json", run); !strings.Contains(status, apr) {
			t.Errorf("status does not list %s:\n%s", apr, status)
		}
		if n := rtRefunds(rec); n != 0 {
			t.Fatalf("Stripe was asked for %d refunds before the approval", n)
		}
		e.cli(ExitOK, "approve", run, apr)
		if _, stderr := e.cli(ExitProblems, "deny", run, apr); !strings.Contains(stderr, "approval "+apr+" is approved; only a pending approval can be decided; 'openplaybook status --harness "+e.harness+" "+run+"'") ||
			strings.Contains(stderr, "store:") {
			t.Errorf("denying an approved request: %q", stderr)
		}
		stdout, stderr := e.cli(ExitOK, "resume", run)
		if !strings.Contains(stdout, "completed") {
			t.Errorf("resume printed %q", stdout)
		}
		if !strings.Contains(stderr, `refused "customer\u2024get"`) && !strings.Contains(e.printed.String(), `refused "customer\u2024get"`) {
			t.Errorf("the refusal of the look-alike is not shown escaped:\n%s", e.printed.String())
		}
		e.cli(ExitOK, "resume", run) // a completed run: nothing runs again
		if n := rtRefunds(rec); n != 1 {
			t.Errorf("Stripe was asked for %d refunds, want 1", n)
		}
		verified, recs := e.auditJSON(run)
		if !verified {
			t.Errorf("the audit chain does not verify")
		}
		for _, k := range []string{"call.refused", "approval.approved", "gate.approved", "run.completed"} {
			if !rtHasRecord(recs, k, "") {
				t.Errorf("the audit log has no %s", k)
			}
		}
		if !rtHasRecord(recs, "call.refused", "customer\u2024get") {
			t.Errorf("the audit log does not name the refused look-alike as received")
		}
		e.cli(ExitOK, "today", "--all")
		e.noSecrets()
	})

	// Deny the refund: it never reaches Stripe, the agent is told and goes
	// on, and the run completes (exit 0).
	t.Run("deny", func(t *testing.T) {
		t.Parallel()
		rec := stripemock.Proxy(t, mock)
		e := newRTEnv(t, rtConfig{stripe: rec.URL, memory: true, transcripts: map[string]string{"rita": ritaTranscript()}})
		o := e.outcome(ExitWaiting, "run", "--input", rtRefundInput, rtExample(t, "refund-review.json"))
		run := o.Run
		e.cli(ExitOK, "approve", run, "approve_refund")
		o = e.outcome(ExitWaiting, "resume", run)
		e.cli(ExitOK, "deny", "--reason", "not a duplicate", run, o.Waiting[0].ID)
		e.outcome(ExitOK, "resume", run)
		if n := rtRefunds(rec); n != 0 {
			t.Errorf("Stripe was asked for %d refunds after the denial", n)
		}
		_, recs := e.auditJSON(run)
		if !rtHasRecord(recs, "call.refused", "charge.refund") || !rtHasRecord(recs, "approval.denied", "charge.refund") {
			t.Errorf("the audit log has no denial of charge.refund")
		}
		e.noSecrets()
	})

	// Reject the gate: the run follows onReject (decline), which puts an
	// item on Today; nothing is refunded.
	t.Run("reject", func(t *testing.T) {
		t.Parallel()
		rec := stripemock.Proxy(t, mock)
		e := newRTEnv(t, rtConfig{stripe: rec.URL, memory: true, transcripts: map[string]string{"rita": ritaTranscript()}})
		o := e.outcome(ExitWaiting, "run", "--input", rtRefundInput, rtExample(t, "refund-review.json"))
		e.cli(ExitOK, "deny", o.Run, "approve_refund")
		e.outcome(ExitOK, "resume", o.Run)
		if today, _ := e.cli(ExitOK, "today"); !strings.Contains(today, "Answer Ada by hand") {
			t.Errorf("today after the decline:\n%s", today)
		}
		if n := rtRefunds(rec); n != 0 {
			t.Errorf("Stripe was asked for %d refunds after the rejection", n)
		}
		e.noSecrets()
	})

	// An approval request nobody decided in time cannot be approved (exit
	// 1), and on resume the refund is refused, never sent.
	t.Run("expired", func(t *testing.T) {
		t.Parallel()
		rec := stripemock.Proxy(t, mock)
		e := newRTEnv(t, rtConfig{stripe: rec.URL, memory: true, approvalExpiry: "1ms", transcripts: map[string]string{"rita": ritaTranscript()}})
		o := e.outcome(ExitWaiting, "run", "--input", rtRefundInput, rtExample(t, "refund-review.json"))
		run := o.Run
		e.cli(ExitOK, "approve", run, "approve_refund")
		// The request has expired by the time resume lists what the run
		// waits for, so its id is only in the progress output.
		_, progress := e.cli(ExitWaiting, "resume", run)
		_, after, ok := strings.Cut(progress, "waiting for approval ")
		apr, _, _ := strings.Cut(after, " ")
		if !ok || !strings.HasPrefix(apr, "apr_") {
			t.Fatalf("no approval id in the progress output:\n%s", progress)
		}
		_, stderr := e.cli(ExitProblems, "approve", run, apr)
		if !strings.Contains(stderr, "expired") || strings.Contains(stderr, "store:") || !strings.Contains(stderr, "'openplaybook status --harness "+e.harness+" "+run+"'") {
			t.Errorf("approving an expired request: %q", stderr)
		}
		e.outcome(ExitOK, "resume", run)
		if n := rtRefunds(rec); n != 0 {
			t.Errorf("Stripe was asked for %d refunds after the request expired", n)
		}
		_, recs := e.auditJSON(run)
		if !rtHasRecord(recs, "call.refused", "charge.refund") {
			t.Errorf("the audit log has no refusal of the expired charge.refund")
		}
	})
}

// noSecrets fails the test when anything printed, or any file of the
// store's directory, holds a secret value (as is, JSON-escaped or
// URL-escaped).
func (e *rtEnv) noSecrets() {
	e.t.Helper()
	var forms []string
	for _, v := range []string{runStripeSecret, runMemorySecret} {
		j, _ := json.Marshal(v)
		forms = append(forms, v, string(j[1:len(j)-1]), url.QueryEscape(v))
	}
	look := func(what string, b []byte) {
		for _, f := range forms {
			if bytes.Contains(b, []byte(f)) {
				e.t.Errorf("%s holds the secret value %q", what, f)
				return
			}
		}
	}
	look("the commands' output", e.printed.Bytes())
	if h := e.loadHarness(); h.Store.Postgres != nil {
		// Every row the database holds, as the store dumps it.
		st, err := engine.Open(context.Background(), h, nil)
		if err != nil {
			e.t.Fatal(err)
		}
		defer st.Close()
		dump, err := st.Dump(context.Background())
		if err != nil || len(dump) == 0 {
			e.t.Fatalf("the store's dump: %v", err)
		}
		look("the store's dump", dump)
		return
	}
	state := filepath.Join(e.dir, "state")
	ents, err := os.ReadDir(state)
	if err != nil || len(ents) == 0 {
		e.t.Fatalf("the store's directory: %v", err)
	}
	err = filepath.WalkDir(state, func(p string, ent os.DirEntry, err error) error {
		if err != nil || ent.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		look(ent.Name(), b)
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// rtDoc is a document of built-ins only: the given steps, embedding
// note.add and customer.get as the examples define them.
func rtDoc(t *testing.T, id string, steps ...map[string]any) []byte {
	t.Helper()
	src, err := os.ReadFile(rtExample(t, "support-triage.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ex struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(src, &ex); err != nil {
		t.Fatal(err)
	}
	var tools []any
	for _, tl := range ex.Tools {
		if n := tl["name"]; n == "note.add" || n == "customer.get" {
			tools = append(tools, tl)
		}
	}
	doc := map[string]any{
		"openplaybook": "1.6",
		"manifest":     map[string]any{"id": id, "name": id, "version": "1.0.0", "description": "A test playbook.", "requiredConnectors": []string{}},
		"requires":     map[string]any{"connections": []any{}, "mcpServers": []any{}, "secrets": []any{}},
		"tools":        tools,
		"steps":        steps,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newGatedEnv is a harness and a playbook whose gate "confirm" comes
// before the step "write", which adds a note.
func newGatedEnv(t *testing.T) (*rtEnv, string) {
	t.Helper()
	e := newRTEnv(t, rtConfig{transcripts: map[string]string{"clerk": rtTranscript(map[string][]map[string]any{
		"write": {rtCall("note.add", map[string]any{"body": "after the gate"})},
	})}})
	doc := e.write("doc.json", string(rtDoc(t, "gated",
		map[string]any{"id": "confirm", "kind": "gate", "purpose": "A person confirms.", "next": "write"},
		map[string]any{"id": "write", "kind": "agent", "agent": "clerk", "purpose": "Write a note.", "allowedTools": []string{"note.add"}},
	)))
	return e, doc
}

// TestRunGateRejectedExitCode: a gate without onReject that a person
// rejects ends the run rejected: resume exits 4, and keeps exiting 4.
func TestRunGateRejectedExitCode(t *testing.T) {
	t.Parallel()
	e, doc := newGatedEnv(t)
	o := e.outcome(ExitWaiting, "run", doc)
	e.cli(ExitOK, "deny", "--reason", "not now", o.Run, "confirm")
	o = e.outcome(ExitRejected, "resume", o.Run)
	if o.Status != runtime.Rejected || !strings.Contains(o.Reason, "confirm") || !strings.Contains(o.Reason, "not now") {
		t.Errorf("resume: %+v", o)
	}
	e.cli(ExitRejected, "resume", o.Run)
	status, _ := e.cli(ExitOK, "status", "--format", "json", o.Run)
	if !strings.Contains(status, `"rejected"`) {
		t.Errorf("status: %s", status)
	}
	_, recs := e.auditJSON(o.Run)
	if !rtHasRecord(recs, "run.rejected", "") || rtHasRecord(recs, "call.started", "") {
		t.Errorf("the audit log of a run rejected before any call: %v", recs)
	}
}

// TestRunCallLimitExitCode: a step making more calls than maxToolCalls
// fails the run: exit 1.
func TestRunCallLimitExitCode(t *testing.T) {
	t.Parallel()
	var calls []map[string]any
	for i := range 4 {
		calls = append(calls, rtCall("note.add", map[string]any{"body": fmt.Sprintf("note %d", i)}))
	}
	e := newRTEnv(t, rtConfig{maxToolCalls: 2, transcripts: map[string]string{"clerk": rtTranscript(map[string][]map[string]any{"write": calls})}})
	doc := e.write("doc.json", string(rtDoc(t, "looping",
		map[string]any{"id": "write", "kind": "agent", "agent": "clerk", "purpose": "Write notes.", "allowedTools": []string{"note.add"}},
	)))
	o := e.outcome(ExitProblems, "run", doc)
	if o.Status != runtime.Failed || !strings.Contains(o.Reason, "limit") {
		t.Errorf("run: %+v", o)
	}
	_, recs := e.auditJSON(o.Run)
	n := 0
	for _, r := range recs {
		if r["kind"] == "call.succeeded" {
			n++
		}
	}
	if n != 2 || !rtHasRecord(recs, "step.call-limit", "note.add") {
		t.Errorf("%d calls succeeded, want 2, then step.call-limit", n)
	}
}

// TestRunResumeAfterDriftCLI: a run waits at a gate; meanwhile its MCP
// server is updated and a tool the next step uses turns destructive
// (mcphost/testdata/changing, variant b). Resume, a new process, checks
// the document against the live server again: the drift is an error, the
// run is not resumed (exit 1) and the tool is never called.
func TestRunResumeAfterDriftCLI(t *testing.T) {
	t.Parallel()
	bin := mcptest.BuildChangingServer(t)
	probe := map[string]any{
		"name": "mcp.chg.probe", "source": "mcp", "description": "Reads a widget's status (variant a).", "permissions": []string{},
		"riskClass": "read", "sideEffecting": false, "requiresApproval": false,
		"inputSchema":  json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
		"outputSchema": json.RawMessage(`{"type":"object","properties":{"status":{"type":"string"}}}`),
	}
	var doc map[string]any
	if err := json.Unmarshal(rtDoc(t, "drift",
		map[string]any{"id": "hold", "kind": "gate", "purpose": "A person confirms.", "next": "probe"},
		map[string]any{"id": "probe", "kind": "agent", "agent": "dana", "purpose": "Probe the widget.", "allowedTools": []string{"mcp.chg.probe"}},
	), &doc); err != nil {
		t.Fatal(err)
	}
	doc["tools"] = append(doc["tools"].([]any), probe)
	doc["requires"].(map[string]any)["mcpServers"] = []any{map[string]any{"name": "chg", "toolNames": []string{"mcp.chg.probe"}, "capabilities": []string{}}}
	src, _ := json.MarshalIndent(doc, "", "  ")
	binding := func(variant string) map[string]any {
		return map[string]any{"chg": map[string]any{"command": bin, "env": map[string]any{"VARIANT": variant}}}
	}
	tr := map[string]string{"dana": rtTranscript(map[string][]map[string]any{"probe": {rtCall("mcp.chg.probe", map[string]any{"id": "w1", "force": true})}})}
	e := newRTEnv(t, rtConfig{servers: binding("a"), transcripts: tr})
	path := e.write("doc.json", string(src))
	o := e.outcome(ExitWaiting, "run", path)
	e.cli(ExitOK, "approve", o.Run, "hold")

	// The server is updated: the same binding, now variant b. That is an
	// edit of the harness file, so resume accepts the change (else it
	// refuses the other harness before it looks at the server).
	var h map[string]any
	if err := json.Unmarshal([]byte(mustReadFile(t, e.harness)), &h); err != nil {
		t.Fatal(err)
	}
	h["mcpServers"].(map[string]any)["chg"] = binding("b")["chg"]
	hb, _ := json.Marshal(h)
	e.write("harness.json", string(hb))
	_, stderr := e.cli(ExitProblems, "resume", "--accept-harness-change", o.Run)
	if !strings.Contains(stderr, "nothing was run") || !strings.Contains(stderr, "[drift-") {
		t.Errorf("resume after the drift printed:\n%s", stderr)
	}
	_, recs := e.auditJSON(o.Run)
	for _, r := range recs {
		if r["step"] == "probe" {
			t.Errorf("the step after the gate was run after the drift: %v", r)
		}
	}
	if status, _ := e.cli(ExitOK, "status", "--format", "json", o.Run); !strings.Contains(status, `"waiting"`) {
		t.Errorf("the run is no longer waiting:\n%s", status)
	}
}

func mustReadFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAuditVerifyReconcilesRows: `audit --verify` fails when a row of the
// store disagrees with the chain: here a gate another process flipped to
// approved with plain SQL, which resume refuses to follow.
func TestAuditVerifyReconcilesRows(t *testing.T) {
	t.Parallel()
	e, doc := newGatedEnv(t)
	o := e.outcome(ExitWaiting, "run", doc)
	e.cli(ExitOK, "audit", "--verify", o.Run)
	teststore.Exec(t, e.loadHarness(), `UPDATE gates SET status = 'approved', decided_by = 'mallory' WHERE run = ?`, o.Run)
	stdout, _ := e.cli(ExitProblems, "audit", "--verify", o.Run)
	if !strings.Contains(stdout, `TAMPERED: the store disagrees with the audit log: gates row gate "confirm" attempt 1: column status is "approved" in the store, but audit record 3 (gate.waiting) says "waiting"`) {
		t.Errorf("audit --verify printed:\n%s", stdout)
	}
	// In JSON, each problem carries the seq of the record that disagrees.
	stdout, _ = e.cli(ExitProblems, "audit", "--verify", "--format", "json", o.Run)
	if !strings.Contains(stdout, `"seq": 3`) || !strings.Contains(stdout, "column decided_by") {
		t.Errorf("audit --verify --format json printed:\n%s", stdout)
	}
	_, stderr := e.cli(ExitProblems, "resume", o.Run)
	if !strings.Contains(stderr, "the store was altered") {
		t.Errorf("resume after the flip: %s", stderr)
	}
}

// TestResumeWithChangedHarness: resume refuses a harness file other than
// the one the run was started with; --accept-harness-change goes on and
// the audit log records the change.
func TestResumeWithChangedHarness(t *testing.T) {
	t.Parallel()
	e, doc := newGatedEnv(t)
	o := e.outcome(ExitWaiting, "run", doc)
	e.cli(ExitOK, "approve", o.Run, "confirm")
	h, err := os.ReadFile(e.harness)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.harness, append(h, "\n\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr := e.cli(ExitProblems, "resume", o.Run)
	if !strings.Contains(stderr, "last run with another harness") || !strings.Contains(stderr, "--accept-harness-change") {
		t.Fatalf("resume with a changed harness: %s", stderr)
	}
	o = e.outcome(ExitOK, "resume", "--accept-harness-change", o.Run)
	if o.Status != runtime.Completed {
		t.Fatalf("resume accepting the change: %+v", o)
	}
	if _, recs := e.auditJSON(o.Run); !rtHasRecord(recs, "run.harness-changed", "") {
		t.Errorf("the accepted change is not in the audit log: %v", recs)
	}
}
