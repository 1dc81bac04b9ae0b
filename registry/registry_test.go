package registry

import (
	"strings"
	"testing"

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
