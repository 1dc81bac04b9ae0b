// Package registry holds what a runtime can actually call: a full tool
// definition (spec, "Embedded tool definitions") for every tool name,
// gathered from the built-in catalog, the connectors this project ships and
// the MCP servers a harness binds, each with the [Tool] that executes it.
//
// A document's embedded definitions are checked against the registry
// (resolution and drift); the runtime executes allowed calls through the
// entries' tools and never names a provider itself. A new built-in,
// connector or MCP transport is a new [Tool] implementation registered
// here; package runtime does not change.
package registry

import (
	"fmt"
	"slices"
	"strings"

	"github.com/openplaybook/openplaybook/playbook"
)

// OriginKind is the family a registry entry comes from.
type OriginKind string

// The three families of the spec's "Tools & capabilities": built-in tools
// over the runtime's primitives, connector tools of a provider, and MCP
// tools of a server the harness binds.
const (
	Builtin   OriginKind = "builtin"
	Connector OriginKind = "connector"
	MCP       OriginKind = "mcp"
)

// Origin says where a registry entry came from.
type Origin struct {
	// Kind is [Builtin], [Connector] or [MCP].
	Kind OriginKind `json:"kind"`
	// Name is the connector's provider ("stripe") or the MCP server's
	// logical name ("memory"); "" for built-ins.
	Name string `json:"name,omitempty"`
}

// String renders the origin as "builtin", "connector stripe" or
// "mcp server memory".
func (o Origin) String() string {
	switch o.Kind {
	case Connector:
		return "connector " + o.Name
	case MCP:
		return "mcp server " + o.Name
	}
	return string(o.Kind)
}

// Binding names what serves the entry: "builtin", "connector:stripe" or
// "mcp:memory". An approval is bound to it, so a call approved for one
// server is never run on another.
func (o Origin) Binding() string {
	if o.Name == "" {
		return string(o.Kind)
	}
	return string(o.Kind) + ":" + o.Name
}

// Entry is one tool the runtime can call.
type Entry struct {
	Definition playbook.Definition
	Origin     Origin
	// Tool executes calls; nil when the definition is known but nothing
	// is connected to run it (a connector without a connection, a
	// registry read from a snapshot, built-ins without a store). The
	// runtime refuses calls to such an entry.
	Tool Tool
}

// Registry maps exact tool names (byte for byte) to entries. The zero
// value is not usable; call [New]. A Registry is not safe for concurrent
// mutation; lookups may run concurrently once it is filled.
type Registry struct {
	entries map[string]Entry
}

// New returns an empty registry.
func New() *Registry { return &Registry{entries: map[string]Entry{}} }

// Add registers a definition with the tool that executes it (nil: none).
// It is an error to add a name twice (two sources claiming one name must
// never silently shadow each other).
func (r *Registry) Add(def playbook.Definition, origin Origin, tool Tool) error {
	if prev, dup := r.entries[def.Name]; dup {
		return fmt.Errorf("tool %q is defined twice: by %s and by %s", def.Name, prev.Origin, origin)
	}
	r.entries[def.Name] = Entry{Definition: def, Origin: origin, Tool: tool}
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
	slices.Sort(names)
	return names
}

// Len returns the number of registered tools.
func (r *Registry) Len() int { return len(r.entries) }

// Entries returns every entry whose origin matches kind and name ("" name
// matches any), sorted by tool name.
func (r *Registry) Entries(kind OriginKind, name string) []Entry {
	var out []Entry
	for _, e := range r.entries {
		if e.Origin.Kind == kind && (name == "" || e.Origin.Name == name) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Definition.Name, b.Definition.Name) })
	return out
}
