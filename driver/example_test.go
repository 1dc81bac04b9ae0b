package driver_test

import (
	"context"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/transcript"
)

// allowList is a custom driver.Caller: it answers calls to the names it
// holds and refuses the rest, as the runtime's Caller does (without its
// store, approvals or audit log). A Caller like it tests a driver alone.
type allowList map[string]jsontext.Value

func (a allowList) Call(ctx context.Context, c driver.Call) (driver.Result, error) {
	r, ok := a[c.Name]
	if !ok {
		return driver.Result{Error: fmt.Sprintf("tool %q is not allowed", c.Name)}, nil
	}
	return driver.Result{Content: r}, nil
}

// A driver makes every tool call through the Caller it is given; here the
// transcript driver replays two recorded calls against a custom Caller.
func ExampleCaller() {
	tr, err := transcript.Parse("agent.json", []byte(`{"steps": {"look": [
		{"tool": "customer.get", "arguments": {"customerId": "cus_ada"}},
		{"tool": "customer.delete", "arguments": {"customerId": "cus_ada"}}
	]}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	caller := allowList{"customer.get": jsontext.Value(`{"name":"Ada"}`)}
	out, err := transcript.New(tr).RunStep(context.Background(), driver.StepInput{StepID: "look"}, printing{caller})
	fmt.Println(string(out), err)
	// Output:
	// customer.get -> {"name":"Ada"}
	// customer.delete -> error: tool "customer.delete" is not allowed
	// [{"tool":"customer.get","result":{"name":"Ada"}},{"tool":"customer.delete","error":"tool \"customer.delete\" is not allowed"}] <nil>
}

// printing shows each call and its answer.
type printing struct{ next driver.Caller }

func (p printing) Call(ctx context.Context, c driver.Call) (driver.Result, error) {
	r, err := p.next.Call(ctx, c)
	if r.Error != "" {
		fmt.Printf("%s -> error: %s\n", c.Name, r.Error)
	} else {
		fmt.Printf("%s -> %s\n", c.Name, r.Content)
	}
	return r, err
}
