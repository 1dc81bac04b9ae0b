package mcphost_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openplaybook/openplaybook/mcphost"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
)

// The echo benchmarks time one tools/call of server-everything's echo
// tool over stdio, one call after the other: BenchmarkEchoDirect with a
// plain go-sdk client, BenchmarkEchoServer through mcphost. Their ratio
// is what mcphost adds to a call (BENCHMARKS.md, "MCP echo calls, direct
// vs through openplaybook"):
//
//	go test ./mcphost -run '^$' -bench 'Echo(Direct|Server)$' -benchtime 2000x -count 3

const echoMessage = "hello from the echo benchmark"

// benchCalls runs call b.N times and reports the per-call p50 and p90.
func benchCalls(b *testing.B, call func() (*mcp.CallToolResult, error)) {
	b.Helper()
	// A few calls first, so that the first ones (the server's JIT) do not
	// count.
	for range 20 {
		if _, err := call(); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		res, err := call()
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if res.IsError {
			b.Fatalf("the tool reported an error: %v", res.Content)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*9/10].Nanoseconds())/1e3, "p90-µs")
}

// directSession connects a plain go-sdk client to server-everything over
// stdio, declaring the client capabilities mcphost declares: none. It is
// closed when the benchmark ends.
func directSession(b *testing.B) *mcp.ClientSession {
	cfg := mcptest.EverythingServer(b, "everything")
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(cfg.Command, cfg.Args...), TerminateDuration: time.Second}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

func BenchmarkEchoDirect(b *testing.B) {
	ctx := context.Background()
	cs := directSession(b)
	args := map[string]any{"message": echoMessage}
	benchCalls(b, func() (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
	})
}

func BenchmarkEchoServer(b *testing.B) {
	ctx := context.Background()
	s, err := mcphost.Connect(ctx, mcptest.EverythingServer(b, "everything"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	// The arguments as the runtime passes them: the JSON text the agent
	// sent.
	args, _ := json.Marshal(map[string]any{"message": echoMessage})
	benchCalls(b, func() (*mcp.CallToolResult, error) {
		return s.Call(ctx, "echo", args)
	})
}

// BenchmarkListDirect and BenchmarkFreshTools time one tools/list of
// server-everything: with a plain go-sdk client, and as the runtime's
// drift check makes it before a call ([mcphost.Server.FreshTools]).
//
//	go test ./mcphost -run '^$' -bench 'ListDirect|FreshTools' -benchtime 300x
func BenchmarkListDirect(b *testing.B) {
	ctx := context.Background()
	cs := directSession(b)
	benchCalls(b, func() (*mcp.CallToolResult, error) {
		_, err := cs.ListTools(ctx, nil)
		return &mcp.CallToolResult{}, err
	})
}

func BenchmarkFreshTools(b *testing.B) {
	ctx := context.Background()
	s, err := mcphost.Connect(ctx, mcptest.EverythingServer(b, "everything"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchCalls(b, func() (*mcp.CallToolResult, error) {
		_, err := s.FreshTools(ctx)
		return &mcp.CallToolResult{}, err
	})
}
