// Command echoenv is an MCP server (stdio) for the runtime's secret tests
// (runtime/secrets_test.go). Its one tool, "reveal" (readOnlyHint true,
// no arguments), answers with the value of its ECHO_SECRET environment
// variable, as structured content {"value": ...} and as text: a server
// that hands a credential it was started with back to the agent, which the
// runtime must never write anywhere. Its "cwd" tool answers with its
// working directory.
package main

import (
	"context"
	"encoding/json"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	server := mcp.NewServer(&mcp.Implementation{Name: "echoenv", Version: "1.0.0"}, nil)
	server.AddTool(&mcp.Tool{
		Name:         "reveal",
		Description:  "Returns the value of the server's ECHO_SECRET environment variable.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"value":{"type":"string"}},"required":["value"],"additionalProperties":false}`),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		v := map[string]any{"value": os.Getenv("ECHO_SECRET")}
		b, _ := json.Marshal(v)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: v}, nil
	})
	server.AddTool(&mcp.Tool{
		Name:         "cwd",
		Description:  "Returns the server's working directory.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"value":{"type":"string"}},"required":["value"],"additionalProperties":false}`),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		dir, _ := os.Getwd()
		v := map[string]any{"value": dir}
		b, _ := json.Marshal(v)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: v}, nil
	})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
