package registry

import (
	"fmt"
	"io"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/playbook"
)

// SnapshotVersion is the version of the snapshot format [Registry.WriteSnapshot]
// writes and [ReadSnapshot] reads.
const SnapshotVersion = 1

// Snapshot is the JSON form of a registry: what a runtime offers, as a
// file that can be diffed, kept in review and given to `check` instead of
// a live harness (the idea of OPA's capabilities files). Tools are sorted
// by name; each definition is the spec's embedded definition object.
type Snapshot struct {
	Version int             `json:"openplaybookRegistry"`
	Tools   []SnapshotEntry `json:"tools"`
}

// SnapshotEntry is one tool of a [Snapshot].
type SnapshotEntry struct {
	Origin     Origin              `json:"origin"`
	Definition playbook.Definition `json:"definition"`
}

// Snapshot returns the registry's definitions and origins, sorted by name.
func (r *Registry) Snapshot() Snapshot {
	s := Snapshot{Version: SnapshotVersion, Tools: []SnapshotEntry{}}
	for _, n := range r.Names() {
		e, _ := r.Lookup(n)
		s.Tools = append(s.Tools, SnapshotEntry{Origin: e.Origin, Definition: e.Definition})
	}
	return s
}

// WriteSnapshot writes the registry as an indented JSON [Snapshot].
// Tools are not written: a registry read back has definitions only.
func (r *Registry) WriteSnapshot(w io.Writer) error {
	b, err := json.Marshal(r.Snapshot(), jsontext.WithIndent("  "), json.Deterministic(true))
	if err != nil {
		return fmt.Errorf("registry: encoding the snapshot: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadSnapshot reads a JSON [Snapshot] into a registry whose entries have
// no [Tool]. Unknown members, duplicate members, an unknown version, an
// origin kind other than builtin, connector or mcp, and a name given twice
// are errors.
func ReadSnapshot(rd io.Reader) (*Registry, error) {
	var s Snapshot
	if err := json.UnmarshalRead(rd, &s, json.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("registry: reading the snapshot: %w", err)
	}
	if s.Version != SnapshotVersion {
		return nil, fmt.Errorf("registry: snapshot version %d: this build reads version %d", s.Version, SnapshotVersion)
	}
	r := New()
	for i, e := range s.Tools {
		switch e.Origin.Kind {
		case Builtin, Connector, MCP:
		default:
			return nil, fmt.Errorf("registry: snapshot /tools/%d/origin/kind is %q; want builtin, connector or mcp", i, e.Origin.Kind)
		}
		if e.Definition.Name == "" {
			return nil, fmt.Errorf("registry: snapshot /tools/%d/definition has no name", i)
		}
		if err := r.Add(e.Definition, e.Origin, nil); err != nil {
			return nil, fmt.Errorf("registry: snapshot /tools/%d: %w", i, err)
		}
	}
	return r, nil
}
