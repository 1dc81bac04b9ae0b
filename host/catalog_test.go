package host

import (
	"testing"

	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/registry"
)

// TestCatalogueSharedImmutable: two hosts read one shared catalogue
// (issue 20: never cloned per run), and what one gets from its registry
// is its own copy: changing every slice, schema byte and pointer of it
// leaves the other host's view (and the catalogue) as it was.
func TestCatalogueSharedImmutable(t *testing.T) {
	a, b := Offline(&harness.Harness{}), Offline(&harness.Harness{})
	base, _ := catalogue()
	if a.Registry.Len() != base.Len() || base.Len() == 0 {
		t.Fatalf("host registry has %d tools, the catalogue %d", a.Registry.Len(), base.Len())
	}
	checked := 0
	for _, kind := range []registry.OriginKind{registry.Builtin, registry.Connector} {
		for _, e := range a.Registry.Entries(kind, "") {
			name := e.Definition.Name
			want, _ := b.Registry.Lookup(name)
			wantJSON := string(want.Definition.InputSchema)
			got, _ := a.Registry.Lookup(name)
			d := got.Definition
			for i := range d.Permissions {
				d.Permissions[i] = "mutated"
			}
			for i := range d.InputSchema {
				d.InputSchema[i] = ' '
			}
			if d.SideEffecting != nil {
				*d.SideEffecting = !*d.SideEffecting
			}
			if d.RequiresApproval != nil {
				*d.RequiresApproval = !*d.RequiresApproval
			}
			other, _ := b.Registry.Lookup(name)
			if string(other.Definition.InputSchema) != wantJSON || len(want.Definition.Permissions) > 0 && other.Definition.Permissions[0] == "mutated" ||
				!sameBool(other.Definition.SideEffecting, want.Definition.SideEffecting) || !sameBool(other.Definition.RequiresApproval, want.Definition.RequiresApproval) {
				t.Fatalf("%s: changing host a's copy changed host b's view", name)
			}
			checked++
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d definitions, want the whole catalogue", checked)
	}
}

func sameBool(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
