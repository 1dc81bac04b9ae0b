package mcphost

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
)

// RegistryTool returns t, a tool the server listed, as a registry tool:
// its Call sends tools/call to the server under t's upstream name and maps
// the result to one JSON value ([ResultJSON]); its Current lists the
// server's tools as [Server.Tools] does (from the cache while the server
// has declared tools.listChanged and sent no notification, otherwise
// asking again) and returns t's definition now, or an error when the
// server cannot be asked, no longer lists the tool, or lists it under a
// problem (twice, or malformed).
func (s *Server) RegistryTool(t Tool) registry.Live {
	return &liveTool{s: s, name: t.Name, upstream: t.Upstream.Name}
}

type liveTool struct {
	s        *Server
	name     string // mcp.<server>.<upstream>
	upstream string
}

func (t *liveTool) Call(ctx context.Context, args jsontext.Value) (registry.Result, error) {
	res, err := t.s.Call(ctx, t.upstream, []byte(args))
	if err != nil {
		return registry.Result{}, err
	}
	v, err := ResultJSON(res)
	return registry.Result{Content: v}, err
}

func (t *liveTool) Current(ctx context.Context) (playbook.Definition, error) {
	tools, err := t.s.Tools(ctx)
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
		return lt.Definition, nil
	}
	return playbook.Definition{}, fmt.Errorf("MCP server %q no longer lists %s", t.s.name, quoteName(t.name))
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
