package runtime_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
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
	st, err := store.Open(filepath.Join(dir, "runs.db"))
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
