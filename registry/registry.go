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
// value is not usable; call [New] or [Over]. A Registry is not safe for
// concurrent mutation; lookups may run concurrently once it is filled.
//
// A registry made by [Over] reads through to a shared base registry (the
// compiled-in catalogue, one per process) instead of copying it: only its
// own entries and the tools [Registry.Bind] gives base entries are its
// own. Every definition it returns is a copy ([playbook.Definition.Clone]),
// so a caller that changes what it got changes nobody else's view.
type Registry struct {
	base    *Registry
	entries map[string]Entry
	tools   map[string]Tool // base entries' tools, bound by [Registry.Bind]
}

// New returns an empty registry.
func New() *Registry { return &Registry{entries: map[string]Entry{}} }

// Over returns an empty registry layered over base: it has every entry of
// base (with no tool until [Registry.Bind] gives one) and the entries
// added to it. base must not change afterwards (it is shared, read-only,
// by every registry over it); a nil base is [New].
func Over(base *Registry) *Registry {
	return &Registry{base: base, entries: map[string]Entry{}}
}

// Add registers a definition with the tool that executes it (nil: none).
// It is an error to add a name twice, or a name the base has (two sources
// claiming one name must never silently shadow each other).
func (r *Registry) Add(def playbook.Definition, origin Origin, tool Tool) error {
	if prev, dup := r.entry(def.Name); dup {
		return fmt.Errorf("tool %q is defined twice: by %s and by %s", def.Name, prev.Origin, origin)
	}
	r.entries[def.Name] = Entry{Definition: def, Origin: origin, Tool: tool}
	return nil
}

// Bind gives the base entry name the tool that executes it (a connector's
// connection, the built-ins over a store). It is an error when the base
// has no entry name.
func (r *Registry) Bind(name string, tool Tool) error {
	if r.base == nil {
		return fmt.Errorf("tool %q: no base registry to bind it in", name)
	}
	if _, ok := r.base.entry(name); !ok {
		return fmt.Errorf("tool %q is not in the base registry", name)
	}
	if r.tools == nil {
		r.tools = map[string]Tool{}
	}
	r.tools[name] = tool
	return nil
}

// entry is the entry of name, its definition shared (not copied).
func (r *Registry) entry(name string) (Entry, bool) {
	if e, ok := r.entries[name]; ok {
		return e, true
	}
	if r.base == nil {
		return Entry{}, false
	}
	e, ok := r.base.entry(name)
	if ok {
		e.Tool = r.tools[name]
	}
	return e, ok
}

// Lookup returns the entry for name, compared byte for byte; its
// Definition is the caller's own copy.
func (r *Registry) Lookup(name string) (Entry, bool) {
	e, ok := r.entry(name)
	e.Definition = e.Definition.Clone()
	return e, ok
}

// Has reports whether name is registered; it suits validate.Options.Registry.
func (r *Registry) Has(name string) bool {
	_, ok := r.entry(name)
	return ok
}

// Names returns every registered name, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, r.Len())
	for n := range r.entries {
		names = append(names, n)
	}
	if r.base != nil {
		names = append(names, r.base.Names()...)
	}
	slices.Sort(names)
	return names
}

// Len returns the number of registered tools.
func (r *Registry) Len() int {
	n := len(r.entries)
	if r.base != nil {
		n += r.base.Len()
	}
	return n
}

// Entries returns every entry whose origin matches kind and name ("" name
// matches any), sorted by tool name; each Definition is the caller's own
// copy.
func (r *Registry) Entries(kind OriginKind, name string) []Entry {
	var out []Entry
	for _, n := range r.Names() {
		e, _ := r.Lookup(n)
		if e.Origin.Kind == kind && (name == "" || e.Origin.Name == name) {
			out = append(out, e)
		}
	}
	return out
}
