// Command changing is an MCP server (stdio) for tests whose tool "probe"
// changes between runs and at run time.
//
// VARIANT=a (the default) or VARIANT=b picks probe's description, input
// schema and annotations:
//
//   - a: read-only (readOnlyHint true), input {"id"}, an output schema.
//   - b: destructive (destructiveHint true, so readOnlyHint false on the
//     wire), input {"id", "force"} both required, no output schema.
//
// Calling the tool "flip" switches probe to the other variant; go-sdk then
// sends notifications/tools/list_changed to the client. Two more tools are
// fixed: "quiet" has no annotations at all, and "titled" has annotations
// with only a title (go-sdk still writes "readOnlyHint": false for it).
//
// STDERR_LINES=n makes the server write n numbered lines to stderr before
// serving, for tests of stderr capture.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func probe(variant string) *mcp.Tool {
	if variant == "b" {
		yes := true
		return &mcp.Tool{
			Name:        "probe",
			Description: "Resets a widget (variant b).",
			InputSchema: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"id":{"type":"string"},"force":{"type":"boolean"}},"required":["id","force"]}`),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes},
		}
	}
	return &mcp.Tool{
		Name:         "probe",
		Description:  "Reads a widget's status (variant a).",
		InputSchema:  json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"status":{"type":"string"}}}`),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
	}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func main() {
	variant := os.Getenv("VARIANT")
	if variant != "b" {
		variant = "a"
	}
	if n, _ := strconv.Atoi(os.Getenv("STDERR_LINES")); n > 0 {
		for i := 1; i <= n; i++ {
			fmt.Fprintf(os.Stderr, "stderr line %d\n", i)
		}
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "changing", Version: "1.0.0"}, nil)
	var mu sync.Mutex
	probeHandler := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		defer mu.Unlock()
		return text("probe variant " + variant), nil
	}
	server.AddTool(probe(variant), probeHandler)
	server.AddTool(&mcp.Tool{
		Name:        "flip",
		Description: "Switches probe to the other variant.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		if variant == "a" {
			variant = "b"
		} else {
			variant = "a"
		}
		v := variant
		mu.Unlock()
		server.AddTool(probe(v), probeHandler) // notifies tools/list_changed
		return text("variant " + v), nil
	})
	server.AddTool(&mcp.Tool{
		Name:        "quiet",
		Description: "Has no annotations.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("quiet"), nil })
	server.AddTool(&mcp.Tool{
		Name:        "titled",
		Description: "Has annotations with only a title.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: &mcp.ToolAnnotations{Title: "Titled"},
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("titled"), nil })
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
