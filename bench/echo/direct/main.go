// Command direct is the baseline of bench/echo.sh: a plain go-sdk client
// that starts @modelcontextprotocol/server-everything over stdio
// (mcp.CommandTransport), initializes, and calls its echo tool N times,
// one after the other, as openplaybook run does with the transcript
// driver. It prints the per-call p50, p90 and the total to stderr.
//
//	go run ./bench/echo/direct -n 1000
//
// Run it from the repository root (where node_modules is), or give the
// server's entry point with -server.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	n := flag.Int("n", 1000, "number of echo calls")
	server := flag.String("server", "node_modules/@modelcontextprotocol/server-everything/dist/index.js", "the server's entry point, started as: node SERVER stdio")
	msg := flag.String("message", "hello from the echo benchmark", "the message to echo")
	preload := flag.String("preload", "", "a script for node to preload (node --require PRELOAD SERVER stdio), such as bench/echo/exit-on-eof.cjs")
	caps := flag.Bool("caps", false, "print the server's initialize capabilities to stderr")
	flag.Parse()
	if err := run(*n, *server, *preload, *msg, *caps); err != nil {
		fmt.Fprintln(os.Stderr, "direct:", err)
		os.Exit(1)
	}
}

func run(n int, server, preload, msg string, caps bool) error {
	ctx := context.Background()
	start := time.Now()
	// The same client capabilities as mcphost declares: none.
	client := mcp.NewClient(&mcp.Implementation{Name: "echo-direct", Version: "v0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	var nodeArgs []string
	if preload != "" {
		// node reads a relative --require path as a module name.
		p, err := filepath.Abs(preload)
		if err != nil {
			return err
		}
		nodeArgs = append(nodeArgs, "--require", p)
	}
	nodeArgs = append(nodeArgs, server, "stdio")
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command("node", nodeArgs...)}, nil)
	if err != nil {
		return err
	}
	defer func() {
		c0 := time.Now()
		cs.Close()
		fmt.Fprintf(os.Stderr, "direct: close %v\n", time.Since(c0).Round(time.Microsecond))
	}()
	if caps {
		c := cs.InitializeResult().Capabilities
		fmt.Fprintf(os.Stderr, "tools capability: %+v\n", c.Tools)
	}
	connected := time.Since(start)
	args := map[string]any{"message": msg}
	lat := make([]time.Duration, 0, n)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		c0 := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
		if err != nil {
			return fmt.Errorf("call %d: %w", i, err)
		}
		if res.IsError {
			return fmt.Errorf("call %d: the tool reported an error", i)
		}
		lat = append(lat, time.Since(c0))
	}
	calls := time.Since(t0)
	fmt.Fprintf(os.Stderr, "direct: connect %v, %d calls in %v", connected.Round(time.Microsecond), n, calls.Round(time.Microsecond))
	if n > 0 {
		slices.Sort(lat)
		fmt.Fprintf(os.Stderr, ", per call p50 %v p90 %v mean %v",
			lat[n/2].Round(time.Microsecond), lat[n*9/10].Round(time.Microsecond), (calls / time.Duration(n)).Round(time.Microsecond))
	}
	fmt.Fprintln(os.Stderr)
	return nil
}
