package mcphost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	return &liveTool{s: s, name: t.Name, upstream: t.Upstream.Name, print: fingerprint(t.Upstream)}
}

type liveTool struct {
	s        *Server
	name     string // mcp.<server>.<upstream>
	upstream string
	print    string // fingerprint of the tool as listed when imported
}

// fingerprint is the deterministic JSON of a listed tool.
func fingerprint(t *mcp.Tool) string {
	if t == nil {
		return ""
	}
	b, err := json.Marshal(t, json.Deterministic(true))
	if err != nil {
		return "unencodable: " + err.Error()
	}
	return string(b)
}

func (t *liveTool) Call(ctx context.Context, args jsontext.Value) (registry.Result, error) {
	if d := t.s.cfg.CallTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	res, err := t.s.Call(ctx, t.upstream, []byte(args))
	if err != nil {
		return registry.Result{}, err
	}
	if res != nil && res.IsError {
		// The server answered: the tool ran and failed.
		return registry.Result{}, registry.Definite(errors.New("the tool reported an error: " + contentText(res.Content)))
	}
	v, err := ResultJSON(res)
	return registry.Result{Content: v}, err
}

func (t *liveTool) Current(ctx context.Context) (playbook.Definition, error) {
	var tools []Tool
	var err error
	if t.s.cfg.ToolsCheck == CheckOnChange {
		tools, err = t.s.Tools(ctx)
	} else {
		tools, err = t.s.FreshTools(ctx)
	}
	if err != nil {
		return playbook.Definition{}, fmt.Errorf("MCP server %q could not be asked for its tools: %w", t.s.name, err)
	}
	for _, lt := range tools {
		if lt.Name != t.name {
			continue
		}
		if lt.Problem != "" {
			return playbook.Definition{}, fmt.Errorf("MCP server %q lists %s but it cannot be used: %s", t.s.name, quoteName(t.name), lt.Problem)
		}
		if fingerprint(lt.Upstream) != t.print {
			return playbook.Definition{}, fmt.Errorf("MCP server %q lists %s differently than when the run imported it (its title, annotations, schemas or other members changed)", t.s.name, quoteName(t.name))
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
// sent it, else the text content (joined by newlines) parsed as JSON when
// it is JSON, else as a JSON string.
func ResultJSON(res *mcp.CallToolResult) (jsontext.Value, error) {
	if res == nil {
		return nil, errors.New("the server sent no result")
	}
	text := contentText(res.Content)
	if res.IsError {
		return nil, errors.New("the tool reported an error: " + text)
	}
	var v any = text
	if res.StructuredContent != nil {
		v = res.StructuredContent
	} else {
		var parsed any
		if json.Unmarshal([]byte(text), &parsed) == nil {
			v = parsed
		}
	}
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("the result cannot be encoded as JSON: %v", err)
	}
	return b, nil
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
