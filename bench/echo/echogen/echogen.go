// Package echogen writes the inputs of one openplaybook run that calls the
// echo tool of @modelcontextprotocol/server-everything N times: the
// playbook, the transcript and the harness that bench/echo/gen,
// bench/echo.sh and the in-process benchmark in bench/echo/inproc use.
// See bench/echo/gen for what each file holds.
package echogen

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Message is the default message echoed.
const Message = "hello from the echo benchmark"

// Files are the names Write writes in its directory.
const (
	Playbook   = "echo.json"
	Transcript = "transcript.json"
	Harness    = "harness.yaml"
	Store      = "store.db"
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
      "outputSchema": {},
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

// Write writes the playbook, a transcript of n echo calls with message
// msg, and the harness into dir (created if needed). root is the
// repository root, where node_modules is; preload, when not "", is a
// script node preloads into the server (node --require); toolsCheck,
// when not "", is the server's toolsCheck in the harness (every-call or
// on-change; see docs/harness.md).
func Write(n int, dir, root, preload, msg, toolsCheck string) error {
	if dir == "" || n < 0 {
		return fmt.Errorf("echogen: want a directory and n >= 0")
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
    args: %s%s
agents:
  bench: {driver: transcript, transcript: transcript.json}
store:
  sqlite: store.db
runtime:
  maxToolCalls: %d
`, n, argsJSON, checkLine(toolsCheck), max(n, 1))

	for name, data := range map[string]string{
		Playbook:   playbook,
		Transcript: tr.String(),
		Harness:    harness,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func checkLine(toolsCheck string) string {
	if toolsCheck == "" {
		return ""
	}
	return "\n    toolsCheck: " + toolsCheck
}
