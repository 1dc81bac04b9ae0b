package mcphost_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/mcphost"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
)

func TestEverythingServer(t *testing.T) {
	t.Parallel()
	s := connect(t, mcptest.EverythingServer(t, "everything"))
	got := tools(t, s)
	if len(got) < 10 {
		t.Errorf("%d tools listed, want the reference server's dozen or more", len(got))
	}
	for name, w := range map[string]string{
		"echo":                  "riskClass=read sideEffecting=false requiresApproval=unknown",
		"get-sum":               "riskClass=read sideEffecting=false requiresApproval=unknown",
		"gzip-file-as-resource": "riskClass=unknown sideEffecting=true requiresApproval=unknown",
	} {
		tl, ok := got[name]
		if !ok {
			t.Errorf("%s is not listed", name)
			continue
		}
		if r := risk(tl); r != w || tl.Problem != "" || tl.Name != "mcp.everything."+name {
			t.Errorf("%s: %s (problem %q, name %q), want %s", name, r, tl.Problem, tl.Name, w)
		}
	}
	res, err := s.Call(context.Background(), "echo", map[string]any{"message": "hi there"})
	if err != nil || res.IsError || !strings.Contains(resultText(t, res), "hi there") {
		t.Fatalf("echo: %v %+v", err, res)
	}
	// A call with arguments the tool's schema rejects is the tool's
	// error, not a transport error.
	res, err = s.Call(context.Background(), "get-sum", map[string]any{"a": "x"})
	if err == nil && !res.IsError {
		t.Errorf("get-sum with bad arguments succeeded: %+v", res)
	}
}

func TestConnectAll(t *testing.T) {
	t.Parallel()
	node := mcptest.Node(t)
	cfgs := []mcphost.ServerConfig{
		mcptest.MemoryServer(t, "memory"),
		mcptest.EverythingServer(t, "everything"),
		{Name: "mute", Command: node, Args: []string{"-e", "setInterval(()=>{},1000)"}, Timeout: time.Second},
		{Name: "dup", Command: node, Args: []string{"-e", "process.exit(1)"}},
		{Name: "dup", Command: node, Args: []string{"-e", "process.exit(1)"}},
	}
	start := time.Now()
	res := mcphost.ConnectAll(context.Background(), cfgs)
	t.Logf("ConnectAll took %v", time.Since(start))
	for _, r := range res {
		if r.Server != nil {
			t.Cleanup(func() { r.Server.Close() })
		}
	}
	if len(res) != 4 {
		t.Errorf("%d results, want 4", len(res))
	}
	for _, name := range []string{"memory", "everything"} {
		if r := res[name]; r.Err != nil || r.Server == nil || len(r.Tools) == 0 {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if r := res["mute"]; r.Err == nil || !strings.Contains(r.Err.Error(), "no answer within 1s") {
		t.Errorf("mute: %v", r.Err)
	}
	if r := res["dup"]; r.Err == nil || !strings.Contains(r.Err.Error(), "configured 2 times") {
		t.Errorf("dup: %v", r.Err)
	}
}

// A server that does not announce changes to its tools is listed once by
// ConnectAll (the listing Connect made), not once by Connect and again
// for the result; asking for its tools afterwards still lists it afresh.
func TestConnectAllListsOnce(t *testing.T) {
	t.Parallel()
	server := newSDKServer(&mcp.ServerOptions{PageSize: 3, Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}})
	for i := range 10 {
		server.AddTool(&mcp.Tool{Name: fmt.Sprintf("tool_%02d", i), InputSchema: objectSchema}, noop)
	}
	url, rec := serve(t, server, "")
	res := mcphost.ConnectAll(context.Background(), []mcphost.ServerConfig{{Name: "quiet", URL: url}})
	r := res["quiet"]
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	defer r.Server.Close()
	if len(r.Tools) != 10 {
		t.Errorf("%d tools, want 10", len(r.Tools))
	}
	// 10 tools in pages of 3: four tools/list requests for one listing.
	if n := rec.count("tools/list"); n != 4 {
		t.Errorf("ConnectAll sent %d tools/list requests, want 4 (one listing)", n)
	}
	if _, err := r.Server.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := rec.count("tools/list"); n != 8 {
		t.Errorf("after Tools, %d tools/list requests, want 8: a server that does not announce changes is listed again", n)
	}
}
