// Command echoenv is an MCP server (stdio) for the runtime's secret tests
// (runtime/secrets_test.go). Its one tool, "reveal" (readOnlyHint true,
// no arguments), answers with the value of its ECHO_SECRET environment
// variable, as structured content {"value": ...} and as text: a server
// that hands a credential it was started with back to the agent, which the
// runtime must never write anywhere. Its "reveal_encoded" tool ({"seed":
// n}) answers the same way with the value percent-encoded as a TypeScript
// or Python server would write it into a URL: seed 0 is
// encodeURIComponent's form, any other seed writes each byte literally or
// as %XX with each hex digit's case drawn from that seed. Its "cwd" tool
// answers with its working directory.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"strings"

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
		Name:         "reveal_encoded",
		Description:  "Returns the value of the server's ECHO_SECRET environment variable, percent-encoded.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"seed":{"type":"integer"}},"required":["seed"],"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"value":{"type":"string"}},"required":["value"],"additionalProperties":false}`),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Seed uint64 `json:"seed"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		v := map[string]any{"value": percentEncode(os.Getenv("ECHO_SECRET"), in.Seed)}
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

// percentEncode writes s as encodeURIComponent does (seed 0: every byte
// but A-Z a-z 0-9 - _ . ! ~ * ' ( ) as %XX, upper case) or, for another
// seed, each character literally or each of its bytes as %XX with each
// digit's case drawn from the seed.
func percentEncode(s string, seed uint64) string {
	var b strings.Builder
	if seed == 0 {
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
				b.WriteByte(c)
			} else {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		}
		return b.String()
	}
	rnd := rand.New(rand.NewPCG(seed, 18))
	for _, r := range s { // a character's bytes all one way: the text stays UTF-8
		if rnd.IntN(3) == 0 {
			b.WriteRune(r)
			continue
		}
		for _, c := range []byte(string(r)) {
			e := []byte(fmt.Sprintf("%%%02x", c))
			for j := 1; j <= 2; j++ {
				if e[j] >= 'a' && rnd.IntN(2) == 0 {
					e[j] -= 'a' - 'A'
				}
			}
			b.Write(e)
		}
	}
	return b.String()
}
