package mcphost

import (
	"encoding/json"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openplaybook/openplaybook/playbook"
)

// Tool is one tool a server lists, with its definition in this project's
// terms.
type Tool struct {
	// Upstream is the tool as go-sdk decoded it, except that, where the
	// raw listing was read, its InputSchema and OutputSchema are the
	// server's JSON text (a [json.RawMessage], the same bytes as the
	// Definition's) instead of go-sdk's decoded map[string]any trees,
	// which are not kept. It is shared: do not modify it.
	Upstream *mcp.Tool
	// Name is the composed tool name, mcp.<server>.<upstream name>, with the
	// upstream name as is. When Problem is set it is not a valid tool name
	// and must not be offered as one.
	Name string
	// Definition is the tool's definition; its Name is Name. The package
	// documentation ("Definitions") says how MCP's annotations map.
	Definition playbook.Definition
	// Problem says why the tool cannot be used under Name, or is "":
	// the upstream name cannot round-trip as a tool name (it has characters
	// outside [A-Za-z0-9_.-], empty segments, or the composed name is
	// longer than 128 bytes), the server lists the name twice, or go-sdk
	// refused the tool's listing. Such a tool is reported, never renamed
	// and never dropped.
	Problem string
}

// wireTool is the part of a listed tool read from the raw tools/list
// result. Members are matched exactly (case-sensitively); a duplicate
// member makes the tool's raw form unreadable, and it is then mapped
// from go-sdk's decoding alone.
type wireTool struct {
	Name         string                    `json:"name"`
	InputSchema  jsontext.Value            `json:"inputSchema,omitzero"`
	OutputSchema jsontext.Value            `json:"outputSchema,omitzero"`
	Annotations  map[string]jsontext.Value `json:"annotations,omitzero"`
}

// wirePage is a raw tools/list result.
type wirePage struct {
	Tools []jsontext.Value `json:"tools"`
}

// hints are the annotations this package reads. nil is "not said".
type hints struct {
	readOnly    *bool
	destructive *bool
}

// hintsFromWire reads readOnlyHint and destructiveHint from a raw
// annotations object: a member that is absent, null or not a boolean is
// not said.
func hintsFromWire(ann map[string]jsontext.Value) hints {
	get := func(k string) *bool {
		v, ok := ann[k]
		if !ok {
			return nil
		}
		var b bool
		if v.Kind() != 't' && v.Kind() != 'f' {
			return nil
		}
		if err := jsonv2.Unmarshal(v, &b); err != nil {
			return nil
		}
		return &b
	}
	return hints{readOnly: get("readOnlyHint"), destructive: get("destructiveHint")}
}

// hintsFromUpstream reads the annotations go-sdk decoded, for a tool whose
// raw listing was not available. ReadOnlyHint is a plain bool there, so
// only true is known; false may have been absent and stays unknown.
func hintsFromUpstream(t *mcp.Tool) hints {
	if t.Annotations == nil {
		return hints{}
	}
	var h hints
	if t.Annotations.ReadOnlyHint {
		v := true
		h.readOnly = &v
	}
	if d := t.Annotations.DestructiveHint; d != nil {
		v := *d
		h.destructive = &v
	}
	return h
}

// definition maps a listed MCP tool to a [playbook.Definition] named
// name, as the package documentation says ("Definitions"). w is the tool's
// raw listing, or nil when only go-sdk's decoding is at hand: then an
// annotation's false readOnlyHint may have been absent, and stays unknown.
func definition(name string, up *mcp.Tool, w *wireTool) playbook.Definition {
	d := playbook.Definition{
		Name:        name,
		Source:      "mcp",
		Description: up.Description,
		// MCP has no permissions concept: nil is "the server does not
		// say" (package drift), never "none".
	}
	var h hints
	if w != nil {
		// w is this listing's own decoding (nothing else holds its
		// bytes): the definition and [rawSchemas] share them.
		d.InputSchema = nonNull(w.InputSchema)
		d.OutputSchema = nonNull(w.OutputSchema)
		h = hintsFromWire(w.Annotations)
	} else {
		d.InputSchema = marshalSchema(up.InputSchema)
		d.OutputSchema = marshalSchema(up.OutputSchema)
		h = hintsFromUpstream(up)
	}
	yes, no := true, false
	switch {
	case isTrue(h.readOnly) && isTrue(h.destructive):
		d.SideEffecting = &yes
	case isTrue(h.readOnly):
		d.RiskClass = "read"
		d.SideEffecting = &no
	case h.readOnly != nil, isTrue(h.destructive):
		d.SideEffecting = &yes
	}
	return d
}

func isTrue(b *bool) bool { return b != nil && *b }

// nonNull is v, or nil when v is absent or null.
func nonNull(v jsontext.Value) jsontext.Value {
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	return v
}

// rawSchemas returns a copy of up whose InputSchema and OutputSchema are
// w's raw text, where w has them, instead of go-sdk's decoded trees: a
// listing of thousands of tools then keeps each schema once, as bytes (a
// decoded tree costs about ten times its text). A schema w lacks (absent,
// or null) is left as go-sdk decoded it. The bytes are shared with the
// definition ([definition]); neither is ever modified.
func rawSchemas(up *mcp.Tool, w *wireTool) *mcp.Tool {
	if w == nil {
		return up
	}
	c := *up
	if v := nonNull(w.InputSchema); v != nil {
		c.InputSchema = json.RawMessage(v)
	}
	if v := nonNull(w.OutputSchema); v != nil {
		c.OutputSchema = json.RawMessage(v)
	}
	return &c
}

func marshalSchema(s any) jsontext.Value {
	if s == nil {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil || string(b) == "null" {
		return nil
	}
	return jsontext.Value(b)
}
