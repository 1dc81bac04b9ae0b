package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/mcphost/mcptest"
)

// The test MCP servers and the definitions a document embeds for their
// tools (the same as the servers list, so import finds no drift).
//
//   - ctr, a go-sdk server in this process on loopback streamable HTTP,
//     counting every tools/call request it receives (whatever tool it
//     names) and every handler run: lookup (read), launch (destructive;
//     documents require approval for it) and badout (read; its answer
//     does not match the document's outputSchema).
//   - chg, mcphost/testdata/changing over stdio: probe (read in variant
//     a, destructive after flip) and quiet.
//   - echo, runtime/testdata/echoenv over stdio: reveal answers with the
//     server's ECHO_SECRET, reveal_encoded with it percent-encoded.

const (
	lookupIn   = `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`
	lookupOut  = `{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"}},"required":["id","n"],"additionalProperties":false}`
	launchIn   = `{"type":"object","properties":{"target":{"type":"string"}},"required":["target"],"additionalProperties":false}`
	launchOut  = `{"type":"object","properties":{"launched":{"type":"string"},"n":{"type":"integer"}},"required":["launched","n"],"additionalProperties":false}`
	badoutIn   = `{"type":"object","properties":{},"additionalProperties":false}`
	badoutOut  = `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}`
	probeIn    = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`
	probeOut   = `{"type":"object","properties":{"status":{"type":"string"}}}`
	revealIn   = `{"type":"object","properties":{},"additionalProperties":false}`
	revealOut  = `{"type":"object","properties":{"value":{"type":"string"}},"required":["value"],"additionalProperties":false}`
	lookupDesc = "Looks a widget up by id; counts the calls it answers."
	launchDesc = "Launches a widget: a side effect the test counts."
	badoutDesc = "Answers with a result that does not match the document's outputSchema."
	hangDesc   = "Launches a widget, then answers only when the test lets it (a side effect whose answer is lost)."
)

func rawSchema(s string) json.RawMessage { return json.RawMessage(s) }

func schemaOf(s string) any {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		panic(err)
	}
	return v
}

// testServerDefs are the embedded definitions of the test servers' tools.
func testServerDefs() map[string]map[string]any {
	read := func(name, desc, in, out string) map[string]any {
		return map[string]any{
			"name": name, "source": "mcp", "description": desc, "permissions": []string{},
			"riskClass": "read", "sideEffecting": false, "requiresApproval": false,
			"inputSchema": schemaOf(in), "outputSchema": schemaOf(out),
		}
	}
	return map[string]map[string]any{
		"mcp.ctr.lookup": read("mcp.ctr.lookup", lookupDesc, lookupIn, lookupOut),
		"mcp.ctr.launch": {
			"name": "mcp.ctr.launch", "source": "mcp", "description": launchDesc, "permissions": []string{"widgets:launch"},
			"riskClass": "money", "sideEffecting": true, "requiresApproval": true, "dataScopeWrites": []string{"ctr.widgets"},
			"inputSchema": schemaOf(launchIn), "outputSchema": schemaOf(launchOut),
		},
		"mcp.ctr.badout": read("mcp.ctr.badout", badoutDesc, badoutIn, badoutOut),
		"mcp.ctr.hang": {
			"name": "mcp.ctr.hang", "source": "mcp", "description": hangDesc, "permissions": []string{},
			"riskClass": "internal", "sideEffecting": true, "requiresApproval": false, "dataScopeWrites": []string{"ctr.widgets"},
			"inputSchema": schemaOf(launchIn), "outputSchema": schemaOf(launchOut),
		},
		"mcp.chg.probe": read("mcp.chg.probe", "Reads a widget's status (variant a).", probeIn, probeOut),
		"mcp.chg.quiet": read("mcp.chg.quiet", "Has no annotations.", `{"type":"object"}`, `{"type":"string"}`),
		"mcp.chg.flip": {
			"name": "mcp.chg.flip", "source": "mcp", "description": "Switches probe to the other variant.", "permissions": []string{},
			"riskClass": "internal", "sideEffecting": true, "requiresApproval": false, "dataScopeWrites": []string{"chg.variant"},
			"inputSchema": schemaOf(`{"type":"object"}`), "outputSchema": schemaOf(`{"type":"string"}`),
		},
		"mcp.echo.reveal": read("mcp.echo.reveal", "Returns the value of the server's ECHO_SECRET environment variable.", revealIn, revealOut),
		"mcp.echo.reveal_encoded": read("mcp.echo.reveal_encoded", "Returns the value of the server's ECHO_SECRET environment variable, percent-encoded.",
			`{"type":"object","properties":{"seed":{"type":"integer"}},"required":["seed"],"additionalProperties":false}`, revealOut),
		"mcp.echo.cwd": read("mcp.echo.cwd", "Returns the server's working directory.", revealIn, revealOut),
	}
}

// ctrServer is the counting go-sdk server.
type ctrServer struct {
	URL string
	srv *mcp.Server

	mu       sync.Mutex
	hangs    int                          // how many hang calls still stall until their caller gives up
	requests []string                     // the tool name of every tools/call request received, in order
	ran      map[string]int               // handler runs by tool
	args     map[string][]json.RawMessage // the arguments each handler run got
	done     chan struct{}                // closed when the test ends: stalled calls return
}

// startCtr serves a new ctr server on a loopback port until the test
// ends. With listChanged false the server declares that it never sends
// notifications/tools/list_changed (and does not send them).
func startCtr(t *testing.T, listChanged bool) *ctrServer {
	t.Helper()
	var opts *mcp.ServerOptions
	if !listChanged {
		opts = &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: false}}}
	}
	c := &ctrServer{srv: mcp.NewServer(&mcp.Implementation{Name: "ctr", Version: "1.0.0"}, opts),
		ran: map[string]int{}, args: map[string][]json.RawMessage{}, done: make(chan struct{})}
	c.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				name := "?"
				if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
					name = p.Name
				}
				c.mu.Lock()
				c.requests = append(c.requests, name)
				c.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	c.addLookup(false)
	c.srv.AddTool(&mcp.Tool{Name: "launch", Description: launchDesc, InputSchema: rawSchema(launchIn), OutputSchema: rawSchema(launchOut),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: hintPtr(true)}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := c.record("launch", req.Params.Arguments)
			var a struct{ Target string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return structured(map[string]any{"launched": a.Target, "n": n}), nil
		})
	c.srv.AddTool(&mcp.Tool{Name: "badout", Description: badoutDesc, InputSchema: rawSchema(badoutIn),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			c.record("badout", req.Params.Arguments)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"ok":"yes","extra":"never passed on"}`}}}, nil
		})
	c.srv.AddTool(&mcp.Tool{Name: "hang", Description: hangDesc, InputSchema: rawSchema(launchIn), OutputSchema: rawSchema(launchOut),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: hintPtr(true)}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := c.record("hang", req.Params.Arguments)
			c.mu.Lock()
			stall := c.hangs > 0
			if stall {
				c.hangs--
			}
			c.mu.Unlock()
			if stall {
				// The side effect happened; the answer never comes. The
				// session's context does not end when the client gives
				// up, so the stall also ends with the test: closing the
				// server waits for its handlers.
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-c.done:
					return nil, errors.New("the test ended")
				}
			}
			var a struct{ Target string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return structured(map[string]any{"launched": a.Target, "n": n}), nil
		})
	c.URL = mcptest.ServeHTTP(t, c.srv)
	t.Cleanup(func() { close(c.done) }) // runs before the server's Close (cleanups run last first)
	return c
}

// addLookup adds (or replaces) lookup: read-only, or, riskier, destructive.
func (c *ctrServer) addLookup(destructive bool) {
	ann := &mcp.ToolAnnotations{ReadOnlyHint: true}
	if destructive {
		ann = &mcp.ToolAnnotations{DestructiveHint: hintPtr(true)}
	}
	c.srv.AddTool(&mcp.Tool{Name: "lookup", Description: lookupDesc, InputSchema: rawSchema(lookupIn), OutputSchema: rawSchema(lookupOut), Annotations: ann},
		c.lookupHandler)
}

// lookupHandler answers lookup, counting its runs.
func (c *ctrServer) lookupHandler(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	n := c.record("lookup", req.Params.Arguments)
	var a struct{ ID string }
	_ = json.Unmarshal(req.Params.Arguments, &a)
	return structured(map[string]any{"id": a.ID, "n": n}), nil
}

func (c *ctrServer) record(tool string, args json.RawMessage) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ran[tool]++
	c.args[tool] = append(c.args[tool], slices.Clone(args))
	return c.ran[tool]
}

// calls returns how many tools/call requests reached the server.
func (c *ctrServer) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.requests)
}

// runs returns how many times tool's handler ran.
func (c *ctrServer) runs(tool string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ran[tool]
}

func (c *ctrServer) argsOf(tool string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, a := range c.args[tool] {
		out = append(out, string(a))
	}
	return out
}

func (c *ctrServer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("tools/call requests %q, handler runs %v", c.requests, c.ran)
}

func structured(v map[string]any) *mcp.CallToolResult {
	b, _ := json.Marshal(v)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: v}
}

func hintPtr[T any](v T) *T { return &v }
