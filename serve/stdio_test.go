package serve_test

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/serve"
)

// stdioServer is `openplaybook mcp`: a second server, agents only, over
// the rig's harness and store, serving run over pipes.
func stdioServer(t *testing.T, r *rig, run, token string) (in io.WriteCloser, out io.Reader, done chan error) {
	t.Helper()
	lh, err := launch.Load(r.dir + "/harness.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(serve.Options{Harness: lh, Store: r.st, AgentsOnly: true, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done = make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		done <- srv.ServeStdio(ctx, run, token, inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		srv.Close()
	})
	return inW, outR, done
}

// TestStdioAgent: over stdio, the agent token is checked, malformed lines
// are answered with JSON-RPC errors, and a client completes the step.
func TestStdioAgent(t *testing.T) {
	r := newRig(t, "")
	ctx := context.Background()
	run, _, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatal(err)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	// A bad token: refused before anything is served.
	_, _, done := stdioServer(t, r, run, "opa_wrong")
	if err := <-done; err == nil || !strings.Contains(err.Error(), "OPENPLAYBOOK_AGENT_TOKEN") {
		t.Fatalf("bad token: %v", err)
	}

	in, out, _ := stdioServer(t, r, run, tok.Token)
	// A batch line gets a JSON-RPC error line.
	if _, err := io.WriteString(in, `[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`+"\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(out)
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, `"code":-32600`) || !strings.Contains(line, "batch") {
		t.Fatalf("batch answered %q (%v)", line, err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-agent", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(br), Writer: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	a := &agent{cs: cs, changed: make(chan struct{}, 1)}
	a.tools(t, "customer__get", "note__add", serve.FinishTool)
	if text, isErr := a.call(t, "customer__get", map[string]any{"customerId": "cus_ada"}); isErr || !strings.Contains(text, "Ada") {
		t.Fatalf("customer.get: %q", text)
	}
	if _, isErr := a.call(t, "mcp__memory__create_entities", map[string]any{}); !isErr {
		t.Fatal("a tool of another step ran")
	}
	if _, isErr := a.call(t, serve.FinishTool, map[string]any{"output": "found"}); isErr {
		t.Fatal("finish failed")
	}
	r.waitStatus(run, "waiting", "gate")
}
