package registry

import (
	"context"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/openplaybook/openplaybook/playbook"
)

func TestAddLookupExact(t *testing.T) {
	r := New()
	if err := r.Add(playbook.Definition{Name: "customer.get"}, Origin{Kind: Builtin}, nil); err != nil {
		t.Fatal(err)
	}
	for _, probe := range []string{"Customer.get", "customer.get ", "customer\u2024get", "customer.ge", ""} {
		if r.Has(probe) {
			t.Errorf("Has(%q) = true; lookups must be byte for byte", probe)
		}
	}
	if !r.Has("customer.get") {
		t.Error("exact name not found")
	}
	err := r.Add(playbook.Definition{Name: "customer.get"}, Origin{Kind: Connector, Name: "stripe"}, nil)
	if err == nil || !strings.Contains(err.Error(), "connector stripe") {
		t.Errorf("duplicate add: %v", err)
	}
}

// TestOver: a registry over a shared base has the base's entries with
// the tools it binds only, refuses a name the base has, and never
// changes the base or another registry over it.
func TestOver(t *testing.T) {
	base := New()
	if err := base.Add(playbook.Definition{Name: "a.b", Permissions: []string{"p"}}, Origin{Kind: Connector, Name: "x"}, nil); err != nil {
		t.Fatal(err)
	}
	r1, r2 := Over(base), Over(base)
	var tool Tool = stubTool{}
	if err := r1.Bind("a.b", tool); err != nil {
		t.Fatal(err)
	}
	if err := r1.Bind("c.d", tool); err == nil {
		t.Fatal("Bind of a name the base does not have: no error")
	}
	if err := r1.Add(playbook.Definition{Name: "a.b"}, Origin{Kind: MCP, Name: "m"}, nil); err == nil {
		t.Fatal("Add of a name the base has: no error")
	}
	if e, _ := r1.Lookup("a.b"); e.Tool == nil {
		t.Fatal("r1 lost the tool it bound")
	}
	if e, _ := r2.Lookup("a.b"); e.Tool != nil {
		t.Fatal("r2 sees r1's tool")
	}
	e, _ := r1.Lookup("a.b")
	e.Definition.Permissions[0] = "mutated"
	if e, _ := r2.Lookup("a.b"); e.Definition.Permissions[0] != "p" {
		t.Fatal("changing r1's copy changed r2's view")
	}
	if !r2.Has("a.b") || r2.Len() != 1 || len(r2.Entries(Connector, "x")) != 1 {
		t.Fatalf("r2: Has %v, Len %d", r2.Has("a.b"), r2.Len())
	}
}

type stubTool struct{}

func (stubTool) Call(context.Context, jsontext.Value) (Result, error) { return Result{}, nil }
