// Command gen writes the inputs of one openplaybook run that calls the
// echo tool of @modelcontextprotocol/server-everything N times, for
// bench/echo.sh:
//
//	go run ./bench/echo/gen -n 1000 -dir /tmp/echo1000
//
// It writes, in DIR:
//
//   - echo.json: a playbook with one agent step ("echo", agent "bench")
//     whose allowedTools is ["mcp.everything.echo"], embedding that tool's
//     definition as server-everything lists it (`openplaybook pin` says
//     it is in line);
//   - transcript.json: the step's N calls, each {"message": MESSAGE}
//     (N=0: a step with no calls);
//   - harness.yaml: server "everything" bound by command (node, the
//     server's entry point under ROOT/node_modules, stdio; with -preload,
//     node --require PRELOAD first), agent "bench"
//     on the transcript driver, the store in DIR/store.db, and maxToolCalls
//     large enough for N.
//
// Run the result with
//
//	openplaybook run --harness DIR/harness.yaml --input '{}' DIR/echo.json
//
// and remove DIR/store.db between runs to start each from an empty store.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// playbook is the document; the echo tool's definition is what
// `openplaybook pin` embeds for server-everything 2026.8.31.
const playbook = `{
  "openplaybook": "1.6",
  "manifest": {
    "id": "echo-bench",
    "name": "Echo benchmark",
    "version": "0.1.0",
    "description": "Calls the echo tool of the MCP server-everything as often as the transcript says: the per-call cost of the runtime's call path.",
    "requiredConnectors": []
  },
  "inputSchema": {"type": "object"},
  "requires": {
    "connections": [],
    "mcpServers": [{"name": "everything", "toolNames": ["mcp.everything.echo"], "capabilities": []}],
    "secrets": []
  },
  "tools": [
    {
      "name": "mcp.everything.echo",
      "source": "mcp",
      "description": "Echoes back the input string",
      "permissions": [],
      "inputSchema": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
          "message": {
            "type": "string",
            "description": "Message to echo"
          }
        },
        "required": [
          "message"
        ]
      },
      "riskClass": "read",
      "sideEffecting": false
    }
  ],
  "steps": [
    {
      "id": "echo",
      "kind": "agent",
      "agent": "bench",
      "purpose": "Echo the message once per transcript entry.",
      "allowedTools": ["mcp.everything.echo"]
    }
  ]
}
`

func main() {
	n := flag.Int("n", 1000, "number of echo calls (0 or more)")
	dir := flag.String("dir", "", "output directory (created if needed)")
	root := flag.String("root", ".", "the repository root, where node_modules is")
	msg := flag.String("message", "hello from the echo benchmark", "the message to echo")
	preload := flag.String("preload", "", "a script for node to preload into the server (node --require PRELOAD ...), such as bench/echo/exit-on-eof.cjs")
	flag.Parse()
	if err := gen(*n, *dir, *root, *preload, *msg); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func gen(n int, dir, root, preload, msg string) error {
	if dir == "" || n < 0 {
		return fmt.Errorf("usage: gen -n N -dir DIR [-root REPO]")
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	entry := filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		return fmt.Errorf("%v (run npm ci in the repository root)", err)
	}
	args := []string{entry, "stdio"}
	if preload != "" {
		p, err := filepath.Abs(preload)
		if err != nil {
			return err
		}
		args = append([]string{"--require", p}, args...)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}

	call, err := json.Marshal(map[string]any{"tool": "mcp.everything.echo", "arguments": map[string]string{"message": msg}})
	if err != nil {
		return err
	}
	var tr strings.Builder
	tr.WriteString("{\"steps\": {\"echo\": [")
	for i := 0; i < n; i++ {
		if i > 0 {
			tr.WriteByte(',')
		}
		tr.WriteString("\n  ")
		tr.Write(call)
	}
	tr.WriteString("\n]}}\n")

	argsJSON, err := json.Marshal(args) // a JSON array is YAML
	if err != nil {
		return err
	}
	harness := fmt.Sprintf(`# Written by bench/echo/gen for %d echo calls.
mcpServers:
  everything:
    command: node
    args: %s
agents:
  bench: {driver: transcript, transcript: transcript.json}
store:
  sqlite: store.db
runtime:
  maxToolCalls: %d
`, n, argsJSON, max(n, 1))

	for name, data := range map[string]string{
		"echo.json":       playbook,
		"transcript.json": tr.String(),
		"harness.yaml":    harness,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}
