// Package playbook holds the document model of OpenPlaybook 1.6 and its
// strict, positioned reader.
//
// Every value of the model keeps the [syntax.Node] it was read from, so a
// check can report the file, line, byte column and JSON Pointer of the
// exact token. Field names follow the specification ("Tools &
// capabilities") and docs/format.md exactly. A pointer field is nil when
// the member is absent or has the wrong JSON type (the reader reports the
// latter); checks for required members look at the object's Node.
//
// The model is static: it says what a document declares. What a runtime can
// actually call lives in the registry; what happens at run time lives in the
// runtime packages.
package playbook

import (
	"sync"

	"github.com/openplaybook/openplaybook/syntax"
)

// String is a JSON string value and where it was read.
type String struct {
	Value string
	Node  *syntax.Node
}

// Bool is a JSON boolean value and where it was read.
type Bool struct {
	Value bool
	Node  *syntax.Node
}

// StringList is a JSON array of strings. Items holds the string elements
// in order; elements of another type are reported by the reader (or, for
// allowedTools, by the allowed-tools-form rule) and left out.
type StringList struct {
	Items []*String
	Node  *syntax.Node
}

// Values returns the item values in order. It is nil-safe.
func (l *StringList) Values() []string {
	if l == nil {
		return nil
	}
	out := make([]string, len(l.Items))
	for i, s := range l.Items {
		out[i] = s.Value
	}
	return out
}

// Has reports whether value is one of the items, compared byte for byte.
func (l *StringList) Has(value string) bool {
	if l == nil {
		return false
	}
	for _, s := range l.Items {
		if s.Value == value {
			return true
		}
	}
	return false
}

// Document is one OpenPlaybook document: the envelope of docs/format.md.
type Document struct {
	// File is the name diagnostics use for the document ("-" for stdin).
	File string
	// Source is the text the document was read from. The tree (Root) and
	// the model's strings share its bytes (see [syntax.Parse]): it must
	// never be modified.
	Source []byte
	// Lines maps byte offsets of the source to lines and columns.
	Lines *syntax.Lines
	// Root is the whole parsed JSON tree; nil when nothing could be read.
	Root *syntax.Node
	// Truncated is true when a syntax error (or the size limit) ended the
	// read early: members, tools and steps may then be missing only
	// because they were never read, so checks for absence stay silent.
	Truncated bool

	// OpenPlaybook is the format version, "MAJOR.MINOR" (member
	// "openplaybook").
	OpenPlaybook *String
	Manifest     *Manifest
	// InputSchema is the JSON Schema (2020-12) of a run's input, or nil.
	InputSchema *syntax.Node
	Requires    *Requires
	// Tools are the embedded tool definitions, in document order.
	Tools []*Tool
	// Steps are the steps in document order; the first is the entry step.
	Steps []*Step

	// Indexes for ToolNamed and StepWithID, built on first use. Tools and
	// Steps must not change after that.
	indexOnce sync.Once
	toolIndex map[string]*Tool
	stepIndex map[string]*Step
}

// Manifest identifies the playbook.
type Manifest struct {
	Node        *syntax.Node
	ID          *String // slug
	Name        *String
	Version     *String // semantic version
	Description *String
	// RequiredConnectors lists the providers the playbook needs, each one
	// of [Providers].
	RequiredConnectors *StringList
}

// Requires is what a harness must satisfy before the playbook can run:
// names and purposes only, never credentials (spec: "The requires
// declaration").
type Requires struct {
	Node        *syntax.Node
	Connections []*Connection
	MCPServers  []*MCPServer
	Secrets     []*Secret
}

// Connection is one provider connection the harness must provide.
type Connection struct {
	Node         *syntax.Node
	Provider     *String // one of [Providers]
	AuthKind     *String // one of [AuthKinds]
	Scopes       *StringList
	Capabilities *StringList // embedded tool names used from this provider
}

// MCPServer is one MCP server the harness must provide, by logical name.
type MCPServer struct {
	Node         *syntax.Node
	Name         *String     // logical name, ^[a-z][a-z0-9_-]*$
	ToolNames    *StringList // the mcp.<name>.* tool names used
	Capabilities *StringList // reserved; empty today
}

// Secret is a named secret the playbook's bindings reference: a name and a
// purpose, never a value.
type Secret struct {
	Node    *syntax.Node
	Name    *String
	Purpose *String
}

// Tool is one embedded tool definition (spec: "Embedded tool
// definitions").
type Tool struct {
	Node        *syntax.Node
	Name        *String
	Source      *String // one of [Sources]
	Description *String
	Permissions *StringList
	// InputSchema and OutputSchema are JSON Schema objects.
	InputSchema  *syntax.Node
	OutputSchema *syntax.Node
	// HarnessInputSchema and HarnessOutputSchema may be any JSON value.
	HarnessInputSchema  *syntax.Node
	HarnessOutputSchema *syntax.Node
	DataScopeResources  *StringList
	DataScopeWrites     *StringList
	RequiresApproval    *Bool
	RiskClass           *String // one of [RiskClasses]
	SideEffecting       *Bool
	ConnectorType       *String // one of [Providers]
	Scope               *String // one of [Scopes]
}

// Step is one step of the playbook. Kind is "agent" or "gate" (see
// [StepKinds]); Agent and AllowedTools belong to agent steps, OnReject to
// gate steps, Next to both.
type Step struct {
	Node    *syntax.Node
	ID      *String
	Kind    *String
	Purpose *String
	Agent   *String
	// AllowedTools is the step's capability boundary: the only tool names
	// it may call.
	AllowedTools *StringList
	Next         *String
	OnReject     *String
}

// ToolNamed returns the first embedded tool called name (compared byte for
// byte), or nil. The first call indexes the tools; later calls are O(1).
func (d *Document) ToolNamed(name string) *Tool {
	d.indexOnce.Do(d.index)
	return d.toolIndex[name]
}

// StepWithID returns the first step with the given id, or nil. The first
// call indexes the steps; later calls are O(1).
func (d *Document) StepWithID(id string) *Step {
	d.indexOnce.Do(d.index)
	return d.stepIndex[id]
}

func (d *Document) index() {
	d.toolIndex = make(map[string]*Tool, len(d.Tools))
	for _, t := range d.Tools {
		if t.Name != nil {
			if _, dup := d.toolIndex[t.Name.Value]; !dup {
				d.toolIndex[t.Name.Value] = t
			}
		}
	}
	d.stepIndex = make(map[string]*Step, len(d.Steps))
	for _, s := range d.Steps {
		if s.ID != nil {
			if _, dup := d.stepIndex[s.ID.Value]; !dup {
				d.stepIndex[s.ID.Value] = s
			}
		}
	}
}

// Str returns the value of s, or "" when s is nil.
func Str(s *String) string {
	if s == nil {
		return ""
	}
	return s.Value
}

// IsTrue reports whether b is present and true.
func IsTrue(b *Bool) bool { return b != nil && b.Value }
