// Command server is an MCP server (stdio) for the runtime's crash test
// (runtime/crash_test.go). Its side effect is a file anyone can read, so the
// test can tell whether a call happened before the process running it was
// killed.
//
// Tools:
//
//   - append (side-effecting: readOnlyHint false, destructiveHint true)
//     takes {"id": string}, appends one line "<id>\n" to the file named by
//     the environment variable COUNT_FILE, syncs it, and returns
//     {"ok": true}. It sleeps APPEND_DELAY (a Go duration, default 6ms)
//     around the write, half before and half after, so a kill lands inside
//     a call often. An id that starts with "slow" is held: after its line
//     is synced the server creates COUNT_FILE.<id>.running and answers only
//     once COUNT_FILE.<id>.release exists, so the test can kill the runtime
//     while the call has happened and its outcome is not yet recorded.
//   - read (readOnlyHint true) takes {"tag"?: string} and returns
//     {"lines": n}, the number of lines in COUNT_FILE.
//
// With PID_DIR set, the server creates an empty file named by its process
// id there when it starts, so the test can wait for it to be gone after a
// kill.
//
// With CALL_LOG set, every call appends a line to that file when it
// arrives, "start <key> <ppid>", and another just before its answer is
// sent, "answer <key> <ppid>": the key is the append's id, or "read:"
// and the read's tag; ppid is the process id of the server's parent (the
// runtime that called it). Each line is one write to a file opened for
// appending, so lines of several servers (and a test's own) keep the
// order they were written in.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func result(v any) *mcp.CallToolResult {
	b, _ := json.Marshal(v)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: v}
}

func failure(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

func main() {
	countFile := os.Getenv("COUNT_FILE")
	if countFile == "" {
		log.Fatal("COUNT_FILE is not set")
	}
	delay := 6 * time.Millisecond
	if v := os.Getenv("APPEND_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			log.Fatalf("APPEND_DELAY: %v", err)
		}
		delay = d
	}
	if dir := os.Getenv("PID_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(os.Getpid())), nil, 0o644); err != nil {
			log.Fatal(err)
		}
	}

	logCall := func(event, key string) {}
	if name := os.Getenv("CALL_LOG"); name != "" {
		ppid := os.Getppid()
		logCall = func(event, key string) {
			f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				log.Fatalf("CALL_LOG: %v", err)
			}
			_, err = fmt.Fprintf(f, "%s %s %d\n", event, key, ppid)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				log.Fatalf("CALL_LOG: %v", err)
			}
		}
	}

	var mu sync.Mutex // one append at a time
	yes := true
	server := mcp.NewServer(&mcp.Implementation{Name: "crash", Version: "1.0.0"}, nil)
	server.AddTool(&mcp.Tool{
		Name:         "append",
		Description:  "Appends one line with the id to the count file.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`),
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: &yes},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || args.ID == "" {
			return failure("append needs {\"id\": string}"), nil
		}
		logCall("start", args.ID)
		defer logCall("answer", args.ID)
		mu.Lock()
		defer mu.Unlock()
		time.Sleep(delay / 2)
		f, err := os.OpenFile(countFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return failure("%v", err), nil
		}
		_, err = f.WriteString(args.ID + "\n")
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return failure("%v", err), nil
		}
		if strings.HasPrefix(args.ID, "slow") {
			if err := os.WriteFile(countFile+"."+args.ID+".running", nil, 0o644); err != nil {
				return failure("%v", err), nil
			}
			for !exists(countFile + "." + args.ID + ".release") {
				time.Sleep(5 * time.Millisecond)
			}
		}
		time.Sleep(delay - delay/2)
		return result(map[string]any{"ok": true}), nil
	})
	server.AddTool(&mcp.Tool{
		Name:         "read",
		Description:  "Counts the lines of the count file.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"tag":{"type":"string"}},"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"lines":{"type":"integer"}},"required":["lines"]}`),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			Tag string `json:"tag"`
		}
		_ = json.Unmarshal(req.Params.Arguments, &args)
		logCall("start", "read:"+args.Tag)
		defer logCall("answer", "read:"+args.Tag)
		b, err := os.ReadFile(countFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return failure("%v", err), nil
		}
		return result(map[string]any{"lines": bytes.Count(b, []byte("\n"))}), nil
	})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}
