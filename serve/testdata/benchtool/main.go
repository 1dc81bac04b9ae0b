// Command benchtool is an MCP server (stdio) for the replica benchmarks
// of serve (serve/bench_replicas_test.go). Each of its tools takes
// {"id": string}, writes one line "<tool> <id> <unix nanoseconds>" to
// the file TIMES_FILE names as the call arrives (so the benchmark reads
// when a call reached the tool server, on the machine's clock, and how
// many calls did), then sleeps DELAY (a Go duration, default 20ms) and
// returns {"ok": true}:
//
//   - read: read-only;
//   - write: side-effecting (destructiveHint true);
//   - guarded: side-effecting; the benchmark's playbook requires a
//     person's approval of it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	times := os.Getenv("TIMES_FILE")
	if times == "" {
		log.Fatal("TIMES_FILE is not set")
	}
	delay := 20 * time.Millisecond
	if v := os.Getenv("DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			log.Fatalf("DELAY: %v", err)
		}
		delay = d
	}
	f, err := os.OpenFile(times, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex // one line at a time
	yes := true
	server := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1.0.0"}, nil)
	tool := func(name string, ann *mcp.ToolAnnotations) {
		server.AddTool(&mcp.Tool{
			Name:         name,
			Description:  "Records the call's arrival, waits and answers ok.",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`),
			Annotations:  ann,
		}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			at := time.Now().UnixNano()
			var args struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || args.ID == "" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: name + ` takes {"id": string}`}}}, nil
			}
			mu.Lock()
			_, err := fmt.Fprintf(f, "%s %s %d\n", name, args.ID, at)
			mu.Unlock()
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
			}
			time.Sleep(delay)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"ok":true}`}}, StructuredContent: map[string]any{"ok": true}}, nil
		})
	}
	tool("read", &mcp.ToolAnnotations{ReadOnlyHint: true})
	tool("write", &mcp.ToolAnnotations{DestructiveHint: &yes})
	tool("guarded", &mcp.ToolAnnotations{DestructiveHint: &yes})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
