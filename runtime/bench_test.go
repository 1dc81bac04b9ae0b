package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/sqlite"
	"github.com/openplaybook/openplaybook/validate"
)

// Tools of the benchmark document besides the built-in customer.get.
const (
	// benchTypical has a typical input schema: six properties, two
	// required, an enum, a pattern, bounds, an array and a format.
	benchTypical = "records.search"
	// benchAny accepts any object: {"type": "object",
	// "additionalProperties": true} (without additionalProperties, a
	// tool's inputSchema refuses undeclared arguments).
	benchAny = "records.touch"
)

const typicalSchema = `{"type": "object", "properties": {
  "customerId": {"type": "string", "description": "Customer id.", "pattern": "^cus_[A-Za-z0-9]+$"},
  "query": {"type": "string", "description": "Free text.", "minLength": 1, "maxLength": 200},
  "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
  "status": {"type": "string", "enum": ["open", "pending", "closed", "archived"]},
  "tags": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 20},
  "since": {"type": "string", "format": "date-time"}},
 "required": ["customerId", "query"], "additionalProperties": false}`

// typicalArgs is valid against typicalSchema and uses every property.
const typicalArgs = `{"customerId":"cus_8f3kQ2","query":"late invoice","limit":10,"status":"open","tags":["vip","emea"],"since":"2026-01-02T03:04:05Z"}`

// benchDefs returns the definitions the benchmark document embeds and the
// registry holds: the built-in customer.get as the catalog has it, and
// two tools of the benchmark's own.
func benchDefs() []playbook.Definition {
	var defs []playbook.Definition
	for _, d := range builtin.Definitions() {
		if d.Name == "customer.get" {
			defs = append(defs, d)
		}
	}
	f := false
	for _, t := range []struct{ name, in string }{{benchTypical, typicalSchema}, {benchAny, `{"type": "object", "additionalProperties": true}`}} {
		defs = append(defs, playbook.Definition{
			Name: t.name, Source: "primitive", Description: "A tool of the runtime benchmarks.",
			Permissions: []string{"records:read"}, InputSchema: jsontext.Value(t.in),
			OutputSchema:       jsontext.Value(`{"type": "object"}`),
			DataScopeResources: []string{"records"}, RequiresApproval: &f, RiskClass: "read", SideEffecting: &f,
		})
	}
	return defs
}

// benchImport reads, validates and imports the benchmark document: one
// agent step "work" (agent "bench") allowing the three tools of
// benchDefs, against a registry of the built-ins and the two others.
//
// With st, the built-ins run over st; the two other tools have no tool
// (the benchmarks call only customer.get).
func benchImport(tb testing.TB, st store.Store) *Imported {
	tb.Helper()
	defs := benchDefs()
	tools, err := json.Marshal(defs)
	if err != nil {
		tb.Fatal(err)
	}
	src := fmt.Appendf(nil, `{"openplaybook": "1.6",
 "manifest": {"id": "bench", "name": "Runtime benchmark", "version": "1.0.0", "description": "Calls tools in a loop.", "requiredConnectors": []},
 "inputSchema": {"type": "object", "properties": {"customerId": {"type": "string"}}},
 "requires": {"connections": [], "mcpServers": [], "secrets": []},
 "tools": %s,
 "steps": [{"id": "work", "kind": "agent", "agent": "bench", "purpose": "Call the tools.", "allowedTools": ["customer.get", %q, %q]}]}`,
		tools, benchTypical, benchAny)
	doc, ds := playbook.Read("bench.json", src, nil)
	reg := registry.New()
	var impls map[string]registry.Tool
	if st != nil {
		impls = builtin.Tools(st.(builtin.Data))
	}
	for _, d := range builtin.Definitions() {
		if err := reg.Add(d, registry.Origin{Kind: registry.Builtin}, impls[d.Name]); err != nil {
			tb.Fatal(err)
		}
	}
	for _, d := range defs[1:] {
		if err := reg.Add(d, registry.Origin{Kind: registry.Builtin}, nil); err != nil {
			tb.Fatal(err)
		}
	}
	ds = append(ds, validate.Document(doc, &validate.Options{Registry: reg.Has})...)
	for _, d := range ds {
		if d.Severity == diag.Error {
			tb.Fatalf("bench.json:%d:%d: %s [%s]", d.Line, d.Column, d.Message, d.Rule)
		}
	}
	im, err := Import(doc, reg)
	if err != nil {
		tb.Fatal(err)
	}
	return im
}

// TestBenchDecisions keeps the decision benchmarks honest: each measures
// the outcome its name says.
func TestBenchDecisions(t *testing.T) {
	im := benchImport(t, nil)
	for _, c := range []struct {
		name, args string
		code       Code
	}{
		{"records.delete", `{"id":"rec_1"}`, CodeNotAllowed},
		{benchAny, `{"id":"rec_1"}`, ""},
		{benchTypical, typicalArgs, ""},
		{benchTypical, `{"customerId":"cus_8f3kQ2","query":"x","status":"lost"}`, CodeInvalidArguments},
		{benchTypical, `{"customerId":"8f3kQ2","query":"x"}`, CodeInvalidArguments},
		{"customer.get", `{"customerId":"c1"}`, ""},
	} {
		d := im.Decide("work", c.name, []byte(c.args))
		if d.Code != c.code || d.Allowed != (c.code == "") {
			t.Errorf("Decide(%s, %s) = %q %v (%s), want %q", c.name, c.args, d.Code, d.Allowed, d.Reason, c.code)
		}
	}
	if im.tools[benchTypical].input == nil {
		t.Fatal("the typical tool's input schema was not compiled")
	}
}

// BenchmarkDecideRefuse measures the refusal of a tool not on the step's
// allowedTools: the exact-match set lookup, the reason and the digest of
// the arguments. Target (BENCHMARKS.md): under 1µs.
//
//	go test ./runtime -run '^$' -bench Decide -benchmem
func BenchmarkDecideRefuse(b *testing.B) {
	im := benchImport(b, nil)
	args := []byte(`{"id":"rec_1"}`)
	b.ReportAllocs()
	for b.Loop() {
		if d := im.Decide("work", "records.delete", args); d.Code != CodeNotAllowed {
			b.Fatal(d.Code)
		}
	}
}

// BenchmarkDecideAllowNoSchema measures allowing a call without schema
// work: the allow-list, the registry resolution (made at import), the
// canonical form of the arguments and their digest. "type-object" is a
// tool whose inputSchema is {"type": "object", "additionalProperties":
// true} (compiled, so the validator still runs once over the arguments); "no-schema" takes the
// compiled schema away, leaving the decision path alone. Target: under
// 1µs.
func BenchmarkDecideAllowNoSchema(b *testing.B) {
	args := []byte(`{"id":"rec_1","note":"checked"}`)
	for _, name := range []string{"type-object", "no-schema"} {
		b.Run(name, func(b *testing.B) {
			im := benchImport(b, nil)
			if name == "no-schema" {
				im.tools[benchAny].input = nil
			}
			b.ReportAllocs()
			for b.Loop() {
				if d := im.Decide("work", benchAny, args); !d.Allowed {
					b.Fatal(d.Reason)
				}
			}
		})
	}
}

// BenchmarkDecideTypicalSchema measures allowing a call whose arguments
// are checked against a typical inputSchema (six properties, required,
// enum, pattern, bounds, array, format). Target: under 20µs. "invalid"
// is a refused call (an enum and a pattern violated), which also
// renders the reason.
func BenchmarkDecideTypicalSchema(b *testing.B) {
	im := benchImport(b, nil)
	for _, c := range []struct{ name, args string }{
		{"valid", typicalArgs},
		{"invalid", `{"customerId":"8f3kQ2","query":"late invoice","limit":10,"status":"lost","tags":["vip"]}`},
	} {
		args := []byte(c.args)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d := im.Decide("work", benchTypical, args); d.Allowed != (c.name == "valid") {
					b.Fatal(d.Reason)
				}
			}
		})
	}
}

// loopDriver makes the number of customer.get calls its context says
// (callsKey), each through the runtime's Caller, and stops at the first
// error or refusal.
type loopDriver struct{}

type callsKey struct{}

func (loopDriver) RunStep(ctx context.Context, in driver.StepInput, c driver.Caller) (jsontext.Value, error) {
	n := ctx.Value(callsKey{}).(int)
	call := driver.Call{Name: "customer.get", Arguments: jsontext.Value(`{"customerId":"c1"}`)}
	for i := range n {
		r, err := c.Call(ctx, call)
		if err != nil {
			return nil, err
		}
		if r.Error != "" {
			return nil, fmt.Errorf("call %d: %s", i, r.Error)
		}
	}
	return jsontext.Value(`"done"`), nil
}

// benchEngine opens a store in a temporary directory (synchronous=FULL,
// group commit on: the defaults), seeds customer c1 and returns an engine
// whose agent "bench" is a loopDriver.
func benchEngine(b *testing.B, maxCalls int) (*Session, store.Store) {
	b.Helper()
	s, err := sqlite.OpenWith(filepath.Join(b.TempDir(), "bench.db"), &sqlite.Options{Synchronous: "FULL"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.SeedCustomers(context.Background(), []store.Customer{{ID: "c1", Name: "Ada Lovelace", Email: "ada@example.com", Company: "Analytical", Plan: "pro"}}); err != nil {
		b.Fatal(err)
	}
	e := newSession(benchImport(b, s), SessionOptions{
		Store:        s,
		MaxToolCalls: maxCalls,
		Driver:       func(string) (driver.Driver, error) { return loopDriver{}, nil },
	})
	return e, s
}

// startRun runs the benchmark document once with n calls and checks it
// completed.
func startRun(b *testing.B, e *Session, n int) string {
	ctx := context.WithValue(context.Background(), callsKey{}, n)
	out, err := e.Start(ctx, jsontext.Value(`{"customerId":"c1"}`))
	if err != nil {
		b.Error(err)
		return ""
	}
	if out.Status != Completed {
		b.Errorf("run %s: %s: %s", out.Run, out.Status, out.Reason)
	}
	return out.Run
}

// BenchmarkAuditedCallPath measures audited calls through the whole
// decision path on SQLite with durable commits (synchronous=FULL): a run
// whose one agent step makes b.N calls to the built-in read tool
// customer.get through the Caller: Decide, the StartCall transaction
// (call row and audit record), the read from the store, the output
// schema check and the FinishCall transaction (outcome and audit
// record). The run's own transactions (create, step start and finish,
// complete) are included; with thousands of calls they do not show.
// Target (BENCHMARKS.md): at least 2,000 calls/s.
//
// "serial" is one run, each call waiting for its two commits; "runs=8"
// and "runs=32" are that many runs at once, each its own goroutine with
// its share of the b.N calls, whose transactions the store's group commit
// can share.
//
//	go test ./runtime -run '^$' -bench AuditedCallPath -benchmem
func BenchmarkAuditedCallPath(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		e, s := benchEngine(b, b.N+1)
		b.ReportAllocs()
		b.ResetTimer()
		run := startRun(b, e, b.N)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		checkCalls(b, s, run, b.N)
	})
	for _, runs := range []int{8, 32} {
		b.Run(fmt.Sprintf("runs=%d", runs), func(b *testing.B) { benchConcurrentRuns(b, runs) })
	}
}

// benchConcurrentRuns runs the benchmark document runs times at once, each
// run in its own goroutine with its share of b.N calls.
func benchConcurrentRuns(b *testing.B, runs int) {
	e, s := benchEngine(b, b.N+1)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	ids := make([]string, runs)
	for i := range runs {
		n := b.N / runs
		if i < b.N%runs {
			n++
		}
		wg.Go(func() { ids[i] = startRun(b, e, n) })
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	total := 0
	for _, id := range ids {
		calls, err := s.Calls(context.Background(), id, store.CallFilter{})
		if err != nil {
			b.Fatal(err)
		}
		total += len(calls)
	}
	if total != b.N {
		b.Fatalf("%d calls recorded, want %d", total, b.N)
	}
}

// checkCalls verifies the run recorded n succeeded calls and an intact
// audit chain, so the benchmark measured what it says.
func checkCalls(b *testing.B, s store.Store, run string, n int) {
	b.Helper()
	ctx := context.Background()
	calls, err := s.Calls(ctx, run, store.CallFilter{})
	if err != nil {
		b.Fatal(err)
	}
	if len(calls) != n {
		b.Fatalf("%d calls recorded, want %d", len(calls), n)
	}
	for _, c := range calls {
		if c.State != store.CallSucceeded {
			b.Fatalf("call %d: %s %s", c.Index, c.State, c.Error)
		}
	}
	if n <= 1000 { // verifying re-hashes the whole chain
		probs, err := s.VerifyAudit(ctx, run)
		if err != nil || len(probs) > 0 {
			b.Fatalf("audit: %v %v", err, probs)
		}
	}
}

// BenchmarkSchemaLibraryTypical is the peer of BenchmarkDecideTypicalSchema:
// the schema library alone (santhosh-tekuri/jsonschema/v6) decoding the
// same arguments and validating them against the same schema, compiled
// with format assertions as the runtime compiles it. Target
// (BENCHMARKS.md): the decision with a typical schema at most 1.5x this.
//
//	go test ./runtime -run '^$' -bench 'DecideTypicalSchema|SchemaLibraryTypical' -count 3
func BenchmarkSchemaLibraryTypical(b *testing.B) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(typicalSchema))
	if err != nil {
		b.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("typical.json", doc); err != nil {
		b.Fatal(err)
	}
	sch, err := c.Compile("typical.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, args string }{
		{"valid", typicalArgs},
		{"invalid", `{"customerId":"8f3kQ2","query":"late invoice","limit":10,"status":"lost","tags":["vip"]}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v, err := jsonschema.UnmarshalJSON(strings.NewReader(tc.args))
				if err != nil {
					b.Fatal(err)
				}
				if err := sch.Validate(v); (err == nil) != (tc.name == "valid") {
					b.Fatal(err)
				}
			}
		})
	}
}
