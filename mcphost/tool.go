package mcphost

import (
	"bytes"
	"context"
	"crypto/sha256"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/internal/jsonnum"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
)

// RegistryTool returns t, a tool the server listed, as a registry tool:
// its Call sends tools/call to the server under t's upstream name and maps
// the result to one JSON value ([ResultJSON]); its Current lists the
// server's tools afresh ([Server.FreshTools]: whether or not the server
// promised to announce changes, a notification may still be on its way)
// (or, with [CheckOnChange], as [Server.Tools] does) and returns t's
// definition now, or an error when the server cannot be
// asked, no longer lists the tool, or lists it under a problem (twice, or
// malformed).
//
// Current also compares the whole tool as the server lists it now (every
// member go-sdk decodes: title, annotations, schemas, _meta, ...) with the
// listing t came from, and reports any change as an error, so a change
// that the definition does not show (a title, an annotation hint that maps
// to nothing) still stops the call until the document is reviewed again.
func (s *Server) RegistryTool(t Tool) registry.Live {
	lt := &liveTool{s: s, name: t.Name, upstream: t.Upstream.Name, imported: t.Upstream}
	lt.same.Store(t.Upstream)
	return lt
}

type liveTool struct {
	s        *Server
	name     string // mcp.<server>.<upstream>
	upstream string
	// imported is the tool as listed when imported; its fingerprint is
	// taken the first time a listing holds another *mcp.Tool for it (a
	// listing is never modified, see [Server.Tools]), so importing
	// thousands of tools fingerprints none of them.
	imported  *mcp.Tool
	printOnce sync.Once
	print     [sha256.Size]byte
	// same is the last listed tool found equal to imported (imported
	// itself at first): the same one again needs no new fingerprint.
	same atomic.Pointer[mcp.Tool]
}

// importedPrint is the fingerprint of the tool as imported.
func (t *liveTool) importedPrint() [sha256.Size]byte {
	t.printOnce.Do(func() { t.print = fingerprint(t.imported) })
	return t.print
}

// fingerprint is the SHA-256 of the deterministic JSON of a listed tool
// (every member go-sdk decodes), its schemas in RFC 8785 canonical form:
// a schema kept as the server's text ([rawSchemas]) and the same schema
// decoded by go-sdk have one fingerprint, and members in another order
// are not a change, as they were not when the schemas were decoded maps.
// A tool that cannot be encoded (and no tool) has the zero fingerprint,
// which [liveTool.Current] takes as a change whatever it is compared
// with: what cannot be compared fails closed.
func fingerprint(t *mcp.Tool) [sha256.Size]byte {
	if t == nil {
		return [sha256.Size]byte{}
	}
	c := *t
	var err error
	if c.InputSchema, err = canonicalSchema(t.InputSchema); err == nil {
		c.OutputSchema, err = canonicalSchema(t.OutputSchema)
	}
	var b []byte
	if err == nil {
		b, err = json.Marshal(&c, json.Deterministic(true))
	}
	if err != nil {
		return [sha256.Size]byte{}
	}
	return sha256.Sum256(b)
}

// canonicalSchema is a schema (raw text or decoded) as RFC 8785 canonical
// JSON text; nil stays nil.
func canonicalSchema(s any) (any, error) {
	if s == nil {
		return nil, nil
	}
	var v jsontext.Value
	if raw, ok := s.(stdjson.RawMessage); ok {
		v = jsontext.Value(bytes.Clone(raw))
	} else {
		b, err := json.Marshal(s, json.Deterministic(true))
		if err != nil {
			return nil, err
		}
		v = b
	}
	if err := v.Canonicalize(); err != nil {
		return nil, err
	}
	return stdjson.RawMessage(v), nil
}

func (t *liveTool) Call(ctx context.Context, args jsontext.Value) (registry.Result, error) {
	if d := t.s.cfg.CallTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	res, err := t.s.Call(ctx, t.upstream, []byte(args))
	if errors.Is(err, errNotSent) {
		// Refused before anything was sent: the tool did not run.
		return registry.Result{}, registry.Definite(err)
	}
	if err != nil {
		return registry.Result{}, err
	}
	if res != nil && res.IsError {
		// The server answered: the tool ran and failed.
		return registry.Result{}, registry.Definite(errors.New("the tool reported an error: " + t.s.red.redactIssued(contentText(res.Content))))
	}
	v, err := ResultJSON(res)
	if err == nil && t.s.red.issued != nil {
		// A server that echoes the OAuth token it was sent: the
		// runtime redacts the harness's secrets, not issued tokens.
		v = jsontext.Value(t.s.red.redactIssued(string(v)))
	}
	return registry.Result{Content: v}, err
}

func (t *liveTool) Current(ctx context.Context) (playbook.Definition, error) {
	var tools []Tool
	var err error
	if t.s.cfg.ToolsCheck == CheckOnChange {
		tools, err = t.s.tools(ctx)
	} else {
		tools, err = t.s.FreshTools(ctx)
	}
	if err != nil {
		return playbook.Definition{}, fmt.Errorf("MCP server %q could not be asked for its tools: %w", t.s.name, err)
	}
	for i := range tools {
		lt := &tools[i]
		if lt.Name != t.name {
			continue
		}
		if lt.Problem != "" {
			return playbook.Definition{}, fmt.Errorf("MCP server %q lists %s but it cannot be used: %s", t.s.name, quoteName(t.name), lt.Problem)
		}
		if lt.Upstream == nil || lt.Upstream != t.same.Load() {
			if p := fingerprint(lt.Upstream); p == ([sha256.Size]byte{}) || p != t.importedPrint() {
				return playbook.Definition{}, fmt.Errorf("MCP server %q lists %s differently than when the run imported it (its title, annotations, schemas or other members changed)", t.s.name, quoteName(t.name))
			}
			t.same.Store(lt.Upstream)
		}
		return lt.Definition, nil
	}
	return playbook.Definition{}, fmt.Errorf("MCP server %q no longer lists %s", t.s.name, quoteName(t.name))
}

// freshListings coalesces concurrent [Server.FreshTools] calls: a caller
// shares a listing only if that listing starts after the caller asked.
type freshListings struct {
	run     sync.Mutex // held while a fresh listing runs
	mu      sync.Mutex
	pending *listing // the next listing, not started yet
}

type listing struct {
	done  chan struct{}
	tools []Tool
	err   error
}

// FreshTools lists the server's tools with a tools/list request that
// starts after FreshTools was called, whatever the server said about
// list_changed: the listing a call is checked against is never older than
// the call. Callers that arrive while one listing runs share the next
// one, so many concurrent callers cost one request per round, not one
// each. Errors are as for [Server.Tools].
func (s *Server) FreshTools(ctx context.Context) ([]Tool, error) {
	f := &s.fresh
	f.mu.Lock()
	l, start := f.pending, false
	if l == nil {
		l, start = &listing{done: make(chan struct{})}, true
		f.pending = l
	}
	f.mu.Unlock()
	if start {
		f.run.Lock()
		f.mu.Lock()
		f.pending = nil // from now on, a new caller needs a new listing
		f.mu.Unlock()
		lctx, cancel := context.WithTimeoutCause(ctx, s.cfg.timeout(), errTimeout)
		tools, err := s.list(lctx)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				e = s.failure(lctx, "tools/list", err)
			}
			err = e
		}
		cancel()
		l.tools, l.err = tools, err
		close(l.done)
		f.run.Unlock()
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if l.err != nil {
		return nil, l.err
	}
	return append([]Tool(nil), l.tools...), nil
}

// ResultJSON maps an MCP tools/call result to the one JSON value the
// runtime records and hands the agent: a result with isError is an error
// carrying its text content; otherwise structuredContent when the server
// sent it; else, when the content holds anything but text (an image,
// audio, a resource link, an embedded resource), the content array itself
// as MCP sends it, {"content": [...]}, each block with its "type"
// (docs/drivers.md, "Rich results": the model drivers show its images
// to the model); else the text content (joined by newlines) when it is
// JSON, else that text as a JSON string.
//
// Numbers keep their exact value. structuredContent is the server's JSON
// text, compacted (members in the server's order, numbers and strings
// spelled as sent) when it is raw JSON: a [json.RawMessage],
// [jsontext.Value] or []byte, as [Server.Call] returns it. Decoded
// content (go-sdk's map[string]any, whose numbers are float64) is
// encoded deterministically, and refused when it holds an integer of
// magnitude 2^53 or more (a float64 may have rounded it) or a number a
// float64 cannot hold exactly. JSON text content is likewise kept as
// written, compacted.
func ResultJSON(res *mcp.CallToolResult) (jsontext.Value, error) {
	if res == nil {
		return nil, errors.New("the server sent no result")
	}
	text := contentText(res.Content)
	if res.IsError {
		return nil, errors.New("the tool reported an error: " + text)
	}
	if res.StructuredContent != nil {
		switch sc := res.StructuredContent.(type) {
		case stdjson.RawMessage:
			return exactJSON([]byte(sc))
		case jsontext.Value:
			return exactJSON([]byte(sc))
		case []byte:
			return exactJSON(sc)
		}
		if lit, ok := roundedNumber(res.StructuredContent); ok {
			return nil, fmt.Errorf("structuredContent holds the number %s, which may not be the number the server sent: it was decoded as a 64-bit float, and the server's text is not available", lit)
		}
		b, err := json.Marshal(res.StructuredContent, json.Deterministic(true))
		if err != nil {
			return nil, fmt.Errorf("the result cannot be encoded as JSON: %v", err)
		}
		if lit, ok := jsonnum.OutOfRange(b); ok {
			return nil, fmt.Errorf("structuredContent holds the number %s, which a 64-bit float cannot hold exactly", quoteBytes([]byte(lit)))
		}
		return b, nil
	}
	if richContent(res.Content) {
		return contentJSON(res.Content)
	}
	if v := jsontext.Value(text); v.IsValid() {
		v = v.Clone()
		if v.Compact() == nil {
			return v, nil
		}
	}
	b, err := json.Marshal(text)
	if err != nil {
		return nil, fmt.Errorf("the result cannot be encoded as JSON: %v", err)
	}
	return b, nil
}

// richContent reports whether content holds a block other than text.
func richContent(content []mcp.Content) bool {
	for _, c := range content {
		if _, ok := c.(*mcp.TextContent); !ok {
			return true
		}
	}
	return false
}

// contentJSON returns content as {"content": [...]}, each block in its
// MCP wire form (go-sdk's encoding: "type", base64 "data", ...).
func contentJSON(content []mcp.Content) (jsontext.Value, error) {
	blocks := make([]stdjson.RawMessage, 0, len(content))
	for i, c := range content {
		b, err := stdjson.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("content block %d cannot be encoded as JSON: %v", i+1, err)
		}
		blocks = append(blocks, b)
	}
	b, err := stdjson.Marshal(struct {
		Content []stdjson.RawMessage `json:"content"`
	}{blocks})
	if err != nil {
		return nil, fmt.Errorf("the result cannot be encoded as JSON: %v", err)
	}
	return exactJSON(b)
}

// exactJSON returns b, which must be one valid JSON value, compacted.
func exactJSON(b []byte) (jsontext.Value, error) {
	v := jsontext.Value(bytes.Clone(b))
	if !v.IsValid() {
		return nil, errors.New("structuredContent is not valid JSON")
	}
	if err := v.Compact(); err != nil {
		return nil, fmt.Errorf("structuredContent cannot be compacted: %v", err)
	}
	return v, nil
}

// exactFloat is 2^53: from there on, a float64 does not hold every
// integer, so an integral float64 that large may be a rounded one.
const exactFloat = 1 << 53

// roundedNumber finds, in decoded JSON (maps, slices, float64), an
// integral float64 of magnitude 2^53 or more, and returns it spelled.
func roundedNumber(v any) (string, bool) {
	switch v := v.(type) {
	case float64:
		if math.Abs(v) >= exactFloat && v == math.Trunc(v) {
			return strconv.FormatFloat(v, 'g', -1, 64), true
		}
	case float32:
		return roundedNumber(float64(v))
	case map[string]any:
		for _, e := range v {
			if lit, ok := roundedNumber(e); ok {
				return lit, true
			}
		}
	case []any:
		for _, e := range v {
			if lit, ok := roundedNumber(e); ok {
				return lit, true
			}
		}
	}
	return "", false
}

// contentText joins the text parts of an MCP tool result.
func contentText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}
