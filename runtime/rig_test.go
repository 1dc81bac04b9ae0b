package runtime_test

// The test rig: the runtime's environment built the way the CLI builds it
// (cmd/openplaybook/cli/runtime.go), from real parts only: a harness file written
// into t.TempDir() and loaded with harness.Load, preflight.Connect (the
// built-ins, the Stripe connector on stripe-mock behind a counting proxy,
// real MCP servers: npm server-memory over stdio, go-sdk servers over
// loopback streamable HTTP or stdio), validate and check of every document
// (an error fails the test), runtime.Import, a SQLite store in the temp
// directory seeded with examples/data/customers.json, and runtime.New
// with a Driver func returning transcript drivers built from transcripts
// the test writes.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/connector/stripe"
	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/transcript"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/internal/stripemock"
	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/preflight"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/sqlite"
	"github.com/openplaybook/openplaybook/validate"
)

// rigConfig says what the rig's harness binds.
type rigConfig struct {
	// memory binds npm server-memory as "memory" (stdio); memoryEnv adds
	// environment variables to it (values may hold ${secret:NAME}).
	memory    bool
	memoryEnv map[string]string
	// stripe binds the stripe connection to this base URL ("" none).
	stripe string
	// http binds streamable HTTP MCP servers by name to their URL.
	http map[string]string
	// serverExtra adds keys to a bound MCP server's harness entry, by
	// server name ({"callTimeout": "300ms"}).
	serverExtra map[string]map[string]any
	// stdio binds stdio MCP servers by name to a command with env.
	stdio map[string]stdioServer
	// secrets are the dotenv file's entries (the harness reads secrets
	// from that file only, never from the process environment).
	secrets map[string]string
	// maxToolCalls and approvalExpiry are the harness's runtime section
	// (zero: not given).
	maxToolCalls   int
	approvalExpiry string
	// policy is the harness's policy section (nil: none).
	policy any
}

type stdioServer struct {
	command string
	env     map[string]string
	cwd     string // "" gives none
}

// rig is a checked environment with its store.
type rig struct {
	t        *testing.T
	dir      string
	h        *harness.Harness
	env      *host.Host
	st       rigStore // the engine's own type (see sqlite)
	docs     []*playbook.Document
	progress *progressBuffer
}

// rigStore is what the tests use of the store beyond the contract: the
// built-ins' tables and the engine's clock. Both engines have them.
type rigStore interface {
	store.Store
	builtin.Data
	SetClock(now func() time.Time)
}

// sqlite returns the SQLite engine of the rig, for a test of the SQLite
// file itself (its raw rows, its commit faults), and skips the test on
// PostgreSQL (OPENPLAYBOOK_TEST_STORE=postgres).
func (r *rig) sqlite() *sqlite.Store {
	r.t.Helper()
	s, ok := r.st.(*sqlite.Store)
	if !ok {
		r.t.Skip("SQLite only: the test reads or writes the SQLite file, or injects an SQLite commit fault")
	}
	return s
}

// storeSection is the rig harness's store: the engine the run selects
// (internal/teststore), seeded with examples/data/customers.json.
func storeSection(t *testing.T) map[string]any {
	s := teststore.Section(t, "state/openplaybook.db")
	s["seed"] = filepath.Join(mcptest.RepoRoot(t), "examples", "data", "customers.json")
	return s
}

// newRig writes the harness, connects what docs need, checks each document
// as `openplaybook run` does (any error-level diagnostic fails the test),
// and opens the seeded store.
func newRig(t *testing.T, cfg rigConfig, docs ...[]byte) *rig {
	t.Helper()
	dir := t.TempDir()
	servers := map[string]any{}
	if cfg.memory {
		m := mcptest.MemoryServer(t, "memory")
		env := map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "memory.jsonl")}
		for k, v := range cfg.memoryEnv {
			env[k] = v
		}
		servers["memory"] = map[string]any{"command": m.Command, "args": m.Args, "env": env, "timeout": "20s"}
	}
	for name, u := range cfg.http {
		servers[name] = map[string]any{"url": u}
	}
	for name, s := range cfg.stdio {
		servers[name] = map[string]any{"command": s.command, "env": s.env}
		if s.cwd != "" {
			servers[name].(map[string]any)["cwd"] = s.cwd
		}
	}
	for name, extra := range cfg.serverExtra {
		for k, v := range extra {
			servers[name].(map[string]any)[k] = v
		}
	}
	h := map[string]any{
		"mcpServers": servers,
		"secrets":    map[string]any{"env": false, "dotenv": []any{"secrets.env"}},
		"store":      storeSection(t),
		"agents":     agentsOf(t, docs),
	}
	if cfg.stripe != "" {
		h["connections"] = map[string]any{"stripe": map[string]any{
			"authKind": "api_token", "secrets": map[string]any{"apiKey": "STRIPE_API_KEY"}, "baseURL": cfg.stripe,
		}}
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
	if cfg.policy != nil {
		h["policy"] = cfg.policy
	}
	var dotenv strings.Builder
	for k, v := range cfg.secrets {
		fmt.Fprintf(&dotenv, "%s=%s\n", k, v)
	}
	writeRigFile(t, filepath.Join(dir, "secrets.env"), []byte(dotenv.String()))
	writeAgentFiles(t, dir, h["agents"].(map[string]any))
	hb, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	hpath := filepath.Join(dir, "harness.json")
	writeRigFile(t, hpath, hb)
	hh, hds, err := harness.Load(hpath)
	if err != nil {
		t.Fatal(err)
	}
	if diag.Count(hds, diag.Error) > 0 {
		t.Fatalf("the test harness has errors: %v\n%s", hds, hb)
	}

	r := &rig{t: t, dir: dir, h: hh, progress: &progressBuffer{}}
	for i, src := range docs {
		doc, _ := playbook.Read(fmt.Sprintf("doc%d.json", i), src, nil)
		r.docs = append(r.docs, doc)
	}
	ctx := context.Background()
	st, err := host.OpenStore(ctx, hh)
	if err != nil {
		t.Fatal(err)
	}
	r.st = st.(rigStore)
	t.Cleanup(func() { r.st.Close() })
	r.env = host.Connect(ctx, hh, r.docs, &host.Options{Store: r.st})
	t.Cleanup(r.env.Close)
	if diag.Count(r.env.Diagnostics, diag.Error) > 0 {
		t.Fatalf("connecting the harness: %v", r.env.Diagnostics)
	}
	for i, doc := range r.docs {
		_, ds := playbook.Read(doc.File, docs[i], nil)
		ds = append(ds, validate.Document(doc, &validate.Options{Registry: r.env.Registry.Has})...)
		ds = append(ds, preflight.Check(ctx, r.env, doc)...)
		if diag.Count(ds, diag.Error) > 0 {
			var b strings.Builder
			for _, d := range ds {
				if d.Severity >= diag.Error {
					fmt.Fprintf(&b, "  %s:%d:%d: %s [%s]\n", d.File, d.Line, d.Column, d.Message, d.Rule)
				}
			}
			t.Fatalf("document %d does not pass check against the test harness:\n%s\n%s", i, b.String(), docs[i])
		}
	}
	return r
}

// agentsOf binds every agent the documents name to the transcript driver
// (the rig's Driver func supplies the transcripts themselves).
func agentsOf(t *testing.T, docs [][]byte) map[string]any {
	t.Helper()
	agents := map[string]any{}
	for _, src := range docs {
		var d struct {
			Steps []struct {
				Agent string `json:"agent"`
			} `json:"steps"`
		}
		if err := json.Unmarshal(src, &d); err != nil {
			t.Fatal(err)
		}
		for _, s := range d.Steps {
			if s.Agent != "" {
				agents[s.Agent] = map[string]any{"driver": "transcript", "transcript": s.Agent + ".json"}
			}
		}
	}
	return agents
}

// writeAgentFiles writes an empty transcript for each agent binding, so
// that the preflight's driver check finds the file; the engine's drivers
// replay the transcripts each test gives.
func writeAgentFiles(t *testing.T, dir string, agents map[string]any) {
	t.Helper()
	for name := range agents {
		writeRigFile(t, filepath.Join(dir, name+".json"), []byte(`{"steps": {}}`))
	}
}

// engine imports document i and returns an engine whose drivers replay
// the transcripts given (agent name to transcript JSON), each seen through
// a recorder that keeps what the agent was answered. A fresh engine is
// what a new process (`openplaybook resume`) would build.
func (r *rig) engine(i int, transcripts map[string]string, seen *agentLog, opt func(*runtime.SessionOptions)) *runtime.Session {
	r.t.Helper()
	drivers := map[string]driver.Driver{}
	for agent, src := range transcripts {
		tr, err := transcript.Parse(agent+".json", []byte(src))
		if err != nil {
			r.t.Fatalf("transcript of %s: %v", agent, err)
		}
		drivers[agent] = transcript.New(tr)
	}
	return r.engineWith(i, drivers, seen, opt)
}

// engineWith is engine with drivers given.
func (r *rig) engineWith(i int, drivers map[string]driver.Driver, seen *agentLog, opt func(*runtime.SessionOptions)) *runtime.Session {
	r.t.Helper()
	o := runtime.SessionOptions{
		Document:       r.docs[i],
		Registry:       r.env.Registry,
		Store:          r.st,
		Redact:         r.env.Secrets.Redact,
		HarnessPath:    r.h.Path,
		Progress:       r.progress,
		MaxToolCalls:   r.h.Runtime.MaxToolCalls,
		ApprovalExpiry: r.h.Runtime.ApprovalExpiry,
		Policy:         r.h.Policy,
		Driver: func(agent string) (driver.Driver, error) {
			d, ok := drivers[agent]
			if !ok {
				return nil, fmt.Errorf("the test binds no agent %q", agent)
			}
			if seen != nil {
				d = recordingDriver{d: d, log: seen}
			}
			return d, nil
		},
	}
	if opt != nil {
		opt(&o)
	}
	sess, ds, err := runtime.Open(context.Background(), o)
	if err != nil {
		r.t.Fatalf("opening document %d: %v %v", i, err, ds)
	}
	return sess
}

// calls returns a run's calls in order.
func (r *rig) calls(run string) []store.Call {
	r.t.Helper()
	cs, err := r.st.Calls(context.Background(), run, store.CallFilter{})
	if err != nil {
		r.t.Fatal(err)
	}
	return cs
}

// auditOf returns a run's audit records after checking that the chain
// verifies.
func (r *rig) auditOf(run string) []audit.Record {
	r.t.Helper()
	ctx := context.Background()
	probs, err := r.st.VerifyAudit(ctx, run)
	if err != nil {
		r.t.Fatal(err)
	}
	if len(probs) > 0 {
		r.t.Errorf("the audit chain of %s does not verify: %v", run, probs)
	}
	recs, err := r.st.Audit(ctx, run)
	if err != nil {
		r.t.Fatal(err)
	}
	return recs
}

// pending returns what a run waits for.
func (r *rig) pending(run string) []runtime.Pending {
	r.t.Helper()
	p, err := runtime.Pendings(context.Background(), r.st, run)
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

// decide approves or denies a gate (a step id) or an approval (apr_...)
// as `openplaybook approve|deny` does, through runtime.Decide.
func (r *rig) decide(run, id string, approve bool, reason string) error {
	_, err := runtime.Decide(context.Background(), r.st, run, id, runtime.Verdict{Approve: approve, Reason: reason, By: "test"})
	return err
}

// mustDecide is decide failing the test on an error.
func (r *rig) mustDecide(run, id string, approve bool) {
	r.t.Helper()
	if err := r.decide(run, id, approve, "decided by the test"); err != nil {
		r.t.Fatalf("deciding %s of %s: %v", id, run, err)
	}
}

// onlyApproval returns the id of the one pending approval of a run.
func (r *rig) onlyApproval(run string) runtime.Pending {
	r.t.Helper()
	var out []runtime.Pending
	for _, p := range r.pending(run) {
		if p.Kind == string(store.KindCall) {
			out = append(out, p)
		}
	}
	if len(out) != 1 {
		r.t.Fatalf("run %s waits for %d call approvals, want 1: %+v", run, len(out), r.pending(run))
	}
	return out[0]
}

func jsonOf(v any) jsontext.Value {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func writeRigFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantOutcome fails the test unless out has status want and err is nil.
func wantOutcome(t *testing.T, what string, out runtime.Outcome, err error, want runtime.Status) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: error %v (outcome %+v)", what, err, out)
	}
	if out.Status != want {
		t.Fatalf("%s: status %s (%s), want %s", what, out.Status, out.Reason, want)
	}
}

// --- what the agent saw -------------------------------------------------

// agentLog keeps every call an agent made through the runtime's Caller and
// what it was answered.
type agentLog struct {
	mu      sync.Mutex
	calls   []seenCall
	offered map[string][]string // step id to the tool names the driver was offered
}

type seenCall struct {
	Step string
	Name string
	Args jsontext.Value
	Res  driver.Result
	Err  error
}

func (l *agentLog) all() []seenCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// of returns the calls made in step.
func (l *agentLog) of(step string) []seenCall {
	var out []seenCall
	for _, c := range l.all() {
		if c.Step == step {
			out = append(out, c)
		}
	}
	return out
}

type recordingDriver struct {
	d   driver.Driver
	log *agentLog
}

func (r recordingDriver) RunStep(ctx context.Context, in driver.StepInput, c driver.Caller) (jsontext.Value, error) {
	r.log.mu.Lock()
	if r.log.offered == nil {
		r.log.offered = map[string][]string{}
	}
	names := []string{}
	for _, tl := range in.Tools {
		names = append(names, tl.Name)
	}
	r.log.offered[in.StepID] = names
	r.log.mu.Unlock()
	return r.d.RunStep(ctx, in, recordingCaller{c: c, step: in.StepID, log: r.log})
}

// tools returns the tool names the driver of step was offered.
func (l *agentLog) tools(step string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.offered[step]
}

type recordingCaller struct {
	c    driver.Caller
	step string
	log  *agentLog
}

func (r recordingCaller) Call(ctx context.Context, call driver.Call) (driver.Result, error) {
	res, err := r.c.Call(ctx, call)
	r.log.mu.Lock()
	r.log.calls = append(r.log.calls, seenCall{Step: r.step, Name: call.Name, Args: slices.Clone(call.Arguments), Res: res, Err: err})
	r.log.mu.Unlock()
	return res, err
}

// scripted is a driver that makes exactly the calls given, bytes and all:
// what a model could send that a transcript file cannot hold (a name that
// is not valid UTF-8, arguments that are not JSON). Its output is a JSON
// array of the errors it was answered.
type scripted map[string][]driver.Call

func (s scripted) RunStep(ctx context.Context, in driver.StepInput, c driver.Caller) (jsontext.Value, error) {
	var out []string
	for _, call := range s[in.StepID] {
		res, err := c.Call(ctx, call)
		if err != nil {
			return nil, err
		}
		out = append(out, res.Error)
	}
	return jsonOf(out), nil
}

// progressBuffer is a bytes.Buffer safe for concurrent writes.
type progressBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *progressBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *progressBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// --- stripe-mock ----------------------------------------------------------

// stripeShared is the one stripe-mock of the package's tests, started the
// first time a test asks (stripeMock). It is not tied to a test's cleanup,
// which would end it with that test; it dies with the test binary.
var stripeShared struct {
	once sync.Once
	url  string
	err  error
	cmd  *exec.Cmd
}

// stripeMock returns the base URL of a recording proxy, for this test
// only, in front of the package's shared stripe-mock, and the proxy, which
// counts the requests that reached "Stripe". Without stripe-mock the test is skipped,
// unless CI is set: then it fails.
func stripeMock(t *testing.T) (baseURL string, rec *stripemock.Recorder) {
	t.Helper()
	if !stripeShareable {
		rec = stripemock.Proxy(t, stripemock.Start(t))
		return rec.URL, rec
	}
	stripeShared.once.Do(startSharedStripe)
	if stripeShared.err != nil {
		if ciIsSet() {
			t.Fatalf("stripe-mock: %v (CI is set, so this fails instead of skipping)", stripeShared.err)
		}
		t.Skipf("stripe-mock: %v", stripeShared.err)
	}
	rec = stripemock.Proxy(t, stripeShared.url)
	return rec.URL, rec
}

func ciIsSet() bool {
	v := os.Getenv("CI")
	if v == "" {
		return false
	}
	if b, err := strconv.ParseBool(v); err == nil {
		return b
	}
	return true
}

// startSharedStripe starts stripe-mock on loopback ports the system
// chooses (both listeners: see package stripemock) and waits until it
// answers. The process dies with the test binary (see stripeProcAttr).
func startSharedStripe() {
	bin, err := stripemock.Binary()
	if err != nil {
		stripeShared.err = err
		return
	}
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PORT=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	stripeProcAttr(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		stripeShared.err = err
		return
	}
	if err := cmd.Start(); err != nil {
		stripeShared.err = err
		return
	}
	stripeShared.cmd = cmd
	addr := make(chan string, 1)
	go func() {
		var buf []byte
		tmp := make([]byte, 4096)
		sent := false
		for {
			n, err := out.Read(tmp)
			buf = append(buf, tmp[:n]...)
			if !sent {
				const prefix = "Listening for HTTP at address: "
				if i := bytes.Index(buf, []byte(prefix)); i >= 0 {
					rest := buf[i+len(prefix):]
					if j := bytes.IndexByte(rest, '\n'); j >= 0 {
						addr <- strings.TrimSpace(string(rest[:j]))
						sent = true
						buf = nil
					}
				}
			} else {
				buf = buf[:0]
			}
			if err != nil {
				if !sent {
					close(addr)
				}
				return
			}
		}
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			stripeShared.err = fmt.Errorf("stripe-mock exited before listening")
			return
		}
		stripeShared.url = "http://" + a
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		stripeShared.err = fmt.Errorf("stripe-mock did not listen within 30s")
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(stripeShared.url + "/v1/balance")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			stripeShared.err = fmt.Errorf("stripe-mock at %s does not answer: %v", stripeShared.url, err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// --- documents ------------------------------------------------------------

// toolLibrary holds every tool definition a test document may embed, by
// name: the built-in and Stripe definitions of the bundled examples, and
// the definitions of the test servers' tools.
func toolLibrary(t *testing.T) map[string]map[string]any {
	t.Helper()
	lib := map[string]map[string]any{}
	for _, f := range []string{"refund-review.json", "support-triage.json"} {
		src, err := os.ReadFile(filepath.Join(mcptest.RepoRoot(t), "examples", f))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Tools []map[string]any `json:"tools"`
		}
		if err := json.Unmarshal(src, &doc); err != nil {
			t.Fatal(err)
		}
		for _, tl := range doc.Tools {
			lib[tl["name"].(string)] = tl
		}
	}
	for name, def := range testServerDefs() {
		lib[name] = def
	}
	// The Stripe connector's tools no example above embeds (charge.get).
	for _, d := range stripe.Definitions() {
		if _, ok := lib[d.Name]; ok {
			continue
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		lib[d.Name] = m
	}
	return lib
}

// gate and agent build steps.
func agentStep(id, agent string, tools []string, next string) map[string]any {
	s := map[string]any{"id": id, "kind": "agent", "agent": agent, "purpose": "Step " + id + " of a test playbook.", "allowedTools": tools}
	if tools == nil {
		s["allowedTools"] = []string{}
	}
	if next != "" {
		s["next"] = next
	}
	return s
}

func gateStep(id, next, onReject string) map[string]any {
	s := map[string]any{"id": id, "kind": "gate", "purpose": "A person decides at " + id + "."}
	if next != "" {
		s["next"] = next
	}
	if onReject != "" {
		s["onReject"] = onReject
	}
	return s
}

// buildDoc returns a 1.6 document with the steps given, embedding the
// definition of every tool a step allows and declaring what they require.
func buildDoc(t *testing.T, id string, steps ...map[string]any) []byte {
	t.Helper()
	lib := toolLibrary(t)
	var names []string
	for _, s := range steps {
		if tl, ok := s["allowedTools"].([]string); ok {
			for _, n := range tl {
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
	}
	var tools []any
	var stripeCaps []string
	mcpTools := map[string][]string{}
	var servers []string
	for _, n := range names {
		def, ok := lib[n]
		if !ok {
			t.Fatalf("buildDoc: no definition of %q in the test library", n)
		}
		tools = append(tools, def)
		if def["source"] == "connector" {
			stripeCaps = append(stripeCaps, n)
		}
		if server, _, ok := playbook.MCPParts(n); ok {
			if _, seen := mcpTools[server]; !seen {
				servers = append(servers, server)
			}
			mcpTools[server] = append(mcpTools[server], n)
		}
	}
	requires := map[string]any{"connections": []any{}, "mcpServers": []any{}, "secrets": []any{}}
	connectors := []string{}
	if len(stripeCaps) > 0 {
		connectors = []string{"stripe"}
		requires["connections"] = []any{map[string]any{"provider": "stripe", "authKind": "api_token", "scopes": []string{}, "capabilities": stripeCaps}}
		requires["secrets"] = []any{map[string]any{"name": "STRIPE_API_KEY", "purpose": "auth for the Stripe connection"}}
	}
	var ms []any
	for _, s := range servers {
		ms = append(ms, map[string]any{"name": s, "toolNames": mcpTools[s], "capabilities": []string{}})
	}
	if ms != nil {
		requires["mcpServers"] = ms
	}
	if tools == nil {
		tools = []any{}
	}
	doc := map[string]any{
		"openplaybook": "1.6",
		"manifest": map[string]any{
			"id": id, "name": "Test " + id, "version": "1.0.0",
			"description": "A playbook the runtime's tests run.", "requiredConnectors": connectors,
		},
		"requires": requires,
		"tools":    tools,
		"steps":    steps,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// transcriptOf builds a transcript: step id to calls, each a tool name and
// its arguments (any JSON value, written as Go values).
func transcriptOf(steps map[string][]tcall) string {
	m := map[string]any{}
	for step, calls := range steps {
		var list []any
		for _, c := range calls {
			list = append(list, map[string]any{"tool": c.tool, "arguments": c.args})
		}
		if list == nil {
			list = []any{}
		}
		m[step] = list
	}
	b, err := json.Marshal(map[string]any{"steps": m})
	if err != nil {
		panic(err)
	}
	return string(b)
}

type tcall struct {
	tool string
	args any
}
