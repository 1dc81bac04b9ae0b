package mcphost

import (
	"bytes"
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

// rawSchemas returns up with its InputSchema and OutputSchema as w's raw
// text, where w has them, instead of go-sdk's decoded trees: a listing of
// thousands of tools then keeps each schema once, as bytes (a decoded
// tree costs about ten times its text). up itself is returned when its
// schemas already are that text ([keepRawSchemas]), and w then shares
// their bytes, so that the definition ([definition]) holds the same
// copy; otherwise a copy of up. A schema w lacks (absent, or null) is
// left as go-sdk decoded it. Neither the bytes nor up are ever modified.
func rawSchemas(up *mcp.Tool, w *wireTool) *mcp.Tool {
	if w == nil {
		return up
	}
	in, newIn := rawSchema(up.InputSchema, &w.InputSchema)
	out, newOut := rawSchema(up.OutputSchema, &w.OutputSchema)
	if !newIn && !newOut {
		return up
	}
	c := *up
	c.InputSchema, c.OutputSchema = in, out
	return &c
}

// rawSchema is schema s as the raw text *v, and whether that is new: s
// itself when it already is that text (then *v becomes s's bytes), or s
// when *v is absent or null.
func rawSchema(s any, v *jsontext.Value) (any, bool) {
	raw := nonNull(*v)
	if raw == nil {
		return s, false
	}
	if r, ok := s.(json.RawMessage); ok && bytes.Equal(r, raw) {
		*v = jsontext.Value(r)
		return s, false
	}
	return json.RawMessage(raw), true
}

// keepRawSchemas replaces, in a tools/list result go-sdk has just decoded
// (nothing else holds it yet), each tool's decoded schemas with their raw
// text from raw, the result as the server sent it, where its tools match
// the decoded ones one for one, by exact name. Where they do not (a tool
// go-sdk left out, a raw entry that does not read), it changes nothing
// there: [Server.pageTools] reports what does not match.
func keepRawSchemas(r *mcp.ListToolsResult, raw []byte) {
	var page wirePage
	if raw == nil || jsonv2.Unmarshal(raw, &page) != nil || len(page.Tools) != len(r.Tools) {
		return
	}
	for i, rt := range page.Tools {
		up := r.Tools[i]
		var w wireTool
		if up == nil || jsonv2.Unmarshal(rt, &w) != nil || w.Name != up.Name {
			continue
		}
		if v := nonNull(w.InputSchema); v != nil {
			up.InputSchema = json.RawMessage(v)
		}
		if v := nonNull(w.OutputSchema); v != nil {
			up.OutputSchema = json.RawMessage(v)
		}
	}
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
