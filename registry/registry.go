// Package registry holds what a runtime can actually call: a full tool
// definition (spec, "Embedded tool definitions") for every tool name,
// gathered from the built-in catalog, the connectors this project ships and
// the MCP servers a harness binds.
//
// A document's embedded definitions are checked against the registry
// (resolution and drift); the runtime dispatches calls through it.
package registry

import (
	"fmt"
	"slices"
	"sort"

	"github.com/openplaybook/openplaybook/playbook"
)

// Origin says where a registry entry came from.
type Origin struct {
	// Kind is "builtin", "connector" or "mcp".
	Kind string
	// Name is the connector's provider ("stripe") or the MCP server's
	// logical name ("memory"); "" for built-ins.
	Name string
}

// String renders the origin as "builtin", "connector stripe" or
// "mcp server memory".
func (o Origin) String() string {
	switch o.Kind {
	case "connector":
		return "connector " + o.Name
	case "mcp":
		return "mcp server " + o.Name
	}
	return o.Kind
}

// Entry is one tool the runtime can call.
type Entry struct {
	Definition playbook.Definition
	Origin     Origin
}

// Registry maps exact tool names (byte for byte) to entries. The zero
// value is not usable; call [New]. A Registry is not safe for concurrent
// mutation; lookups may run concurrently once it is filled.
type Registry struct {
	entries map[string]Entry
}

// New returns an empty registry.
func New() *Registry { return &Registry{entries: map[string]Entry{}} }

// Add registers a definition. It is an error to add a name twice (two
// sources claiming one name must never silently shadow each other).
func (r *Registry) Add(def playbook.Definition, origin Origin) error {
	if prev, dup := r.entries[def.Name]; dup {
		return fmt.Errorf("tool %q is defined twice: by %s and by %s", def.Name, prev.Origin, origin)
	}
	r.entries[def.Name] = Entry{Definition: def, Origin: origin}
	return nil
}

// Lookup returns the entry for name, compared byte for byte.
func (r *Registry) Lookup(name string) (Entry, bool) {
	e, ok := r.entries[name]
	return e, ok
}

// Has reports whether name is registered; it suits validate.Options.Registry.
func (r *Registry) Has(name string) bool {
	_, ok := r.entries[name]
	return ok
}

// Names returns every registered name, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.entries))
	for n := range r.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Len returns the number of registered tools.
func (r *Registry) Len() int { return len(r.entries) }

// Entries returns every entry whose origin matches kind and name ("" name
// matches any), sorted by tool name.
func (r *Registry) Entries(kind, name string) []Entry {
	var out []Entry
	for _, e := range r.entries {
		if e.Origin.Kind == kind && (name == "" || e.Origin.Name == name) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if a.Definition.Name < b.Definition.Name {
			return -1
		}
		if a.Definition.Name > b.Definition.Name {
			return 1
		}
		return 0
	})
	return out
}
