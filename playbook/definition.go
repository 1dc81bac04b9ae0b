package playbook

import (
	"slices"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/openplaybook/openplaybook/syntax"
)

// Definition is a tool definition as a plain value, in the shape of the
// spec's "Embedded tool definitions": what a document embeds and what a
// registry holds, so the two can be compared (drift) and one written into
// the other (pin). Unlike [Tool] it carries no positions.
//
// Unknown is represented, never guessed: RiskClass "" and nil
// SideEffecting / RequiresApproval mean the definition does not say (an
// MCP server whose annotations are silent, for example).
//
// Schemas are kept as raw JSON text (jsontext.Value) so that member order
// and number spelling survive a round trip; nil means absent. The JSON
// encoding uses the spec's member names and omits absent members.
type Definition struct {
	Name                string         `json:"name"`
	Source              string         `json:"source"`
	Description         string         `json:"description"`
	Permissions         []string       `json:"permissions"`
	InputSchema         jsontext.Value `json:"inputSchema,omitempty"`
	OutputSchema        jsontext.Value `json:"outputSchema,omitempty"`
	HarnessInputSchema  jsontext.Value `json:"harnessInputSchema,omitempty"`
	HarnessOutputSchema jsontext.Value `json:"harnessOutputSchema,omitempty"`
	DataScopeResources  []string       `json:"dataScopeResources,omitempty"`
	DataScopeWrites     []string       `json:"dataScopeWrites,omitempty"`
	RequiresApproval    *bool          `json:"requiresApproval,omitempty"`
	RiskClass           string         `json:"riskClass,omitempty"`
	SideEffecting       *bool          `json:"sideEffecting,omitempty"`
	ConnectorType       string         `json:"connectorType,omitempty"`
	Scope               string         `json:"scope,omitempty"`
}

// Clone returns a deep copy of d: no slice, schema or pointer of the copy
// shares memory with d, so changing one never changes the other (a
// registry hands out clones of the definitions it shares between runs).
func (d Definition) Clone() Definition {
	d.Permissions = slices.Clone(d.Permissions)
	d.DataScopeResources = slices.Clone(d.DataScopeResources)
	d.DataScopeWrites = slices.Clone(d.DataScopeWrites)
	d.InputSchema, d.OutputSchema = d.InputSchema.Clone(), d.OutputSchema.Clone()
	d.HarnessInputSchema, d.HarnessOutputSchema = d.HarnessInputSchema.Clone(), d.HarnessOutputSchema.Clone()
	if d.RequiresApproval != nil {
		v := *d.RequiresApproval
		d.RequiresApproval = &v
	}
	if d.SideEffecting != nil {
		v := *d.SideEffecting
		d.SideEffecting = &v
	}
	return d
}

// Definition returns the embedded tool as a plain [Definition]. src must
// be the source text the document was read from (schemas are sliced from
// it verbatim). Members that are absent or of the wrong type are left at
// their zero value.
func (t *Tool) Definition(src []byte) Definition {
	d := Definition{
		Name:                Str(t.Name),
		Source:              Str(t.Source),
		Description:         Str(t.Description),
		Permissions:         t.Permissions.Values(),
		InputSchema:         rawOf(t.InputSchema, src),
		OutputSchema:        rawOf(t.OutputSchema, src),
		HarnessInputSchema:  rawOf(t.HarnessInputSchema, src),
		HarnessOutputSchema: rawOf(t.HarnessOutputSchema, src),
		DataScopeResources:  t.DataScopeResources.Values(),
		DataScopeWrites:     t.DataScopeWrites.Values(),
		RiskClass:           Str(t.RiskClass),
		ConnectorType:       Str(t.ConnectorType),
		Scope:               Str(t.Scope),
	}
	if t.RequiresApproval != nil {
		v := t.RequiresApproval.Value
		d.RequiresApproval = &v
	}
	if t.SideEffecting != nil {
		v := t.SideEffecting.Value
		d.SideEffecting = &v
	}
	return d
}

func rawOf(n *syntax.Node, src []byte) jsontext.Value {
	if n == nil || n.End <= n.Offset || int(n.End) > len(src) {
		return nil
	}
	return jsontext.Value(append([]byte(nil), src[n.Offset:n.End]...))
}
