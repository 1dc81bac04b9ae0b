package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestProtocolVersions: what docs/serve.md says of the MCP revisions the
// gateway serves holds. A go-sdk client asking for 2025-11-25 gets it
// with a session; one left at its newest revision gets the sessionless
// 2026-07-28, without one; a server/discover of 2026-07-28 is answered
// with every revision served, 2026-07-28 first.
func TestProtocolVersions(t *testing.T) {
	r, _ := approvalRig(t)
	ctx := context.Background()
	run, a := startApprovalRun(t, r)
	if v := a.cs.InitializeResult().ProtocolVersion; v != "2025-11-25" || a.cs.ID() == "" {
		t.Errorf("the go-sdk client asking for 2025-11-25 negotiated %q with session %q, want 2025-11-25 with a session", v, a.cs.ID())
	}
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	if b := r.connectAt(tok.MCPURL, tok.Token, nil); b.cs.InitializeResult().ProtocolVersion != "2026-07-28" || b.cs.ID() != "" {
		t.Errorf("the go-sdk client at its newest revision negotiated %q with session %q, want 2026-07-28 without one", b.cs.InitializeResult().ProtocolVersion, b.cs.ID())
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"probe","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest("POST", tok.MCPURL, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "server/discover")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	data := string(raw)
	if i := strings.Index(data, "data: "); i >= 0 {
		data = strings.TrimSpace(data[i+len("data: "):])
	}
	var res struct {
		Result struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(data), &res); err != nil || resp.StatusCode != 200 {
		t.Fatalf("server/discover: %d %s (%v)", resp.StatusCode, raw, err)
	}
	want := []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}
	if !slices.Equal(res.Result.SupportedVersions, want) {
		t.Errorf("server/discover lists %q, want %q (docs/serve.md, \"Protocol versions\")", res.Result.SupportedVersions, want)
	}
}
