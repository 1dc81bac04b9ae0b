package runtime_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/preflight"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store/sqlite"
)

// upper is a registry.Tool: what package host builds for a built-in, a
// connector or an MCP server's tool.
type upper struct{ calls *int }

func (u upper) Call(ctx context.Context, args jsontext.Value) (registry.Result, error) {
	*u.calls++
	return registry.Result{Content: jsontext.Value(`{"text":"HELLO"}`)}, nil
}

// twoCalls is an agent: it asks for a tool that is not on its step's
// allowedTools, then for the one that is.
type twoCalls struct{}

func (twoCalls) RunStep(ctx context.Context, in driver.StepInput, c driver.Caller) (jsontext.Value, error) {
	for _, name := range []string{"text.delete", "text.upper"} {
		r, err := c.Call(ctx, driver.Call{Name: name, Arguments: jsontext.Value(`{"text":"hello"}`)})
		if err != nil {
			return nil, err
		}
		if r.Error != "" {
			fmt.Println("refused:", r.Error)
		} else {
			fmt.Println("result:", string(r.Content))
		}
	}
	return jsontext.Value(`"done"`), nil
}

const exampleDoc = `{
  "openplaybook": "1.6",
  "manifest": {"id": "shout", "name": "Shout", "version": "1.0.0", "description": "Upper-cases a text.", "requiredConnectors": []},
  "requires": {"connections": [], "mcpServers": [], "secrets": []},
  "tools": [{
    "name": "text.upper", "source": "primitive", "description": "Upper-cases a text.", "permissions": [],
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "outputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "riskClass": "read", "sideEffecting": false, "requiresApproval": false
  }],
  "steps": [{"id": "shout", "kind": "agent", "agent": "shouter", "purpose": "Upper-case the text.", "allowedTools": ["text.upper"]}]
}`

// A Session runs a document against a registry and a store. Every call
// the agent makes goes through the step's Caller: the call outside
// allowedTools is refused and never reaches a tool.
func ExampleSession() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "openplaybook-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(filepath.Join(dir, "runs.db"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	calls := 0
	reg := registry.New()
	def := playbook.Definition{Name: "text.upper", Source: "primitive", Description: "Upper-cases a text.", Permissions: []string{},
		InputSchema:  jsontext.Value(`{"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}`),
		OutputSchema: jsontext.Value(`{"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}`),
		RiskClass:    "read", SideEffecting: new(bool), RequiresApproval: new(bool)}
	if err := reg.Add(def, registry.Origin{Kind: registry.Builtin}, upper{&calls}); err != nil {
		fmt.Println(err)
		return
	}

	doc, _ := playbook.Read("shout.json", []byte(exampleDoc), nil)
	sess, ds, err := runtime.Open(ctx, runtime.SessionOptions{
		Document: doc, Registry: reg, Store: st,
		Driver: func(agent string) (driver.Driver, error) { return twoCalls{}, nil },
	})
	if err != nil {
		fmt.Println(err, ds)
		return
	}
	out, err := sess.Start(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("run:", out.Status, "- the tool ran", calls, "time")
	// Output:
	// refused: tool "text.delete" is not allowed in step "shout": it is not on the step's allowedTools (text.upper); the call was refused and not run
	// result: {"text":"HELLO"}
	// run: completed - the tool ran 1 time
}

// The real path, as `openplaybook run` takes it (package launch does the
// same for every front end): a harness file read with harness.Load, the
// store it names opened and seeded with host.OpenStore, its registry and
// drivers connected with host.Connect, and a Session opened over them
// whose Check is the preflight `openplaybook check` runs. The agent replays
// a transcript (the transcript driver): a call outside the step's
// allowedTools is refused and never runs; the other two run, and their
// effect is in the store.
func ExampleOpen_harness() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "openplaybook-example")
	defer os.RemoveAll(dir)
	seed, _ := filepath.Abs(filepath.Join("..", "examples", "data", "customers.json"))
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			fmt.Println(err)
		}
		return p
	}
	hpath := write("harness.yaml", `agents:
  clerk: {driver: transcript, transcript: clerk.json}
store:
  sqlite: state/runs.db
  seed: `+seed+`
`)
	write("clerk.json", `{"steps": {"note": [
  {"tool": "note.delete", "arguments": {"customerId": "cus_ada"}},
  {"tool": "customer.get", "arguments": {"customerId": "cus_ada"}},
  {"tool": "note.add", "arguments": {"customerId": "cus_ada", "body": "Called back about the CSV export."}}
]}}`)

	// The document embeds the built-ins' own definitions (what pin writes).
	var tools []string
	for _, d := range builtin.Definitions() {
		if d.Name == "customer.get" || d.Name == "note.add" {
			b, _ := json.Marshal(d)
			tools = append(tools, string(b))
		}
	}
	src := []byte(`{
  "openplaybook": "1.6",
  "manifest": {"id": "call-back", "name": "Call back", "version": "1.0.0", "description": "Notes a call back.", "requiredConnectors": []},
  "requires": {"connections": [], "mcpServers": [], "secrets": []},
  "tools": [` + strings.Join(tools, ",") + `],
  "steps": [{"id": "note", "kind": "agent", "agent": "clerk", "purpose": "Note the call back on the customer.", "allowedTools": ["customer.get", "note.add"]}]
}`)

	h, ds, err := harness.Load(hpath)
	if err != nil || diag.Count(ds, diag.Error) > 0 {
		fmt.Println(err, ds)
		return
	}
	st, err := host.OpenStore(ctx, h)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	doc, rds := playbook.Read("call-back.json", src, nil)
	hst := host.Connect(ctx, h, []*playbook.Document{doc}, &host.Options{Store: st})
	defer hst.Close()
	sess, ds, err := runtime.Open(ctx, runtime.SessionOptions{
		Document: doc, Registry: hst.Registry, Store: st,
		Driver: hst.Drivers("call-back"),
		Check: func(ctx context.Context, doc *playbook.Document) []diag.Diagnostic {
			return append(append(rds, hst.Diagnostics...), preflight.Check(ctx, hst, doc)...)
		},
		HarnessPath: h.Path,
		Redact:      hst.Secrets.Redact,
	})
	if err != nil {
		fmt.Println(err, ds)
		return
	}
	out, err := sess.Start(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("run:", out.Status)
	recs, _ := st.Audit(ctx, out.Run)
	for _, r := range recs {
		if strings.HasPrefix(r.Kind, "call.") {
			fmt.Println(r.Kind, r.Tool)
		}
	}
	notes, _ := st.(builtin.Data).ListNotes(ctx, "cus_ada", "", 10)
	for _, n := range notes {
		fmt.Println("note:", n.Body)
	}
	// Output:
	// run: completed
	// call.refused note.delete
	// call.started customer.get
	// call.succeeded customer.get
	// call.started note.add
	// call.succeeded note.add
	// note: Called back about the CSV export.
}
