package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/internal/hydratest"
	"github.com/openplaybook/openplaybook/runtime"
)

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeLoopbackPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestAuthLoginMCPServer: an MCP server behind OAuth that needs a
// person's consent, with Hydra as its authorization server. `auth login`
// prints the authorization URL, a person (Hydra's headless login app)
// consents, the redirect reaches the loopback listener, and the tokens
// are stored in the vault; then a run in a new process calls the
// server's tool with them, once, counted at the server. When the access
// token has run out, two processes at once refresh it once: Hydra rotates
// refresh tokens and revokes the chain on reuse, and both still connect.
func TestAuthLoginMCPServer(t *testing.T) {
	t.Parallel()
	hy := hydratest.Start(t)
	redirect := fmt.Sprintf("http://127.0.0.1:%d/callback", freeLoopbackPort(t))
	hy.CreateClient(hydratest.Client{ID: "openplaybook-cli", AuthMethod: "none", GrantTypes: []string{"authorization_code", "refresh_token"},
		ResponseTypes: []string{"code"}, RedirectURIs: []string{redirect}, Scope: "offline_access offline"})
	hy.SetUser(hydratest.User{Subject: "alice", Name: "Alice", Email: "alice@example.com"})
	p := hydratest.NewProtectedMCP(t, hy.Issuer, hy.Issuer, "openplaybook-cli")

	e := newRTEnv(t, rtConfig{
		servers: map[string]any{"ledger": map[string]any{"url": p.URL, "timeout": "30s",
			"oauth": map[string]any{"issuer": hy.Issuer, "clientId": "openplaybook-cli", "grant": "authorization_code", "redirectUrl": redirect}}},
		transcripts: map[string]string{"clerk": rtTranscript(map[string][]map[string]any{
			"write": {rtCall("mcp.ledger.append", map[string]any{"line": "paid"})},
		})},
	})
	hb, _ := os.ReadFile(e.harness)
	var h map[string]any
	json.Unmarshal(hb, &h)
	h["store"].(map[string]any)["vault"] = map[string]any{"keySecret": "OPENPLAYBOOK_VAULT_KEY"}
	hb, _ = json.MarshalIndent(h, "", "  ")
	e.write("harness.json", string(hb))
	env, _ := os.ReadFile(e.dir + "/secrets.env")
	e.write("secrets.env", string(env)+"OPENPLAYBOOK_VAULT_KEY="+vaultKeyValue+"\n")

	// Before a login: the server cannot be used, and says what to do.
	if out, stderr := e.cli(ExitProblems, "check", "--format", "text"); !strings.Contains(out+stderr, "openplaybook auth login ledger") {
		t.Errorf("check before the login does not say to log in:\n%s%s", out, stderr)
	}

	var stdout bytes.Buffer
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		c := &CLI{Stdout: &stdout, Stderr: stderr, Version: "v0.0.0-test"}
		done <- c.Main([]string{"auth", "login", "--harness", e.harness, "--timeout", "60s", "ledger"})
	}()
	urlRE := regexp.MustCompile(`(?m)^  (http://\S+)$`)
	var authURL string
	for deadline := time.Now().Add(30 * time.Second); authURL == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := urlRE.FindStringSubmatch(stderr.String()); m != nil {
			authURL = m[1]
		}
		select {
		case code := <-done:
			t.Fatalf("auth login ended with %d before printing a URL:\n%s", code, stderr.String())
		default:
		}
	}
	if !strings.HasPrefix(authURL, hy.Issuer) || !strings.Contains(authURL, "code_challenge_method=S256") {
		t.Fatalf("the authorization URL %q (stderr:\n%s)", authURL, stderr.String())
	}
	back, err := hy.Follow(authURL, redirect, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get(back.String())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(stdout.String(), "logged in to MCP server ledger") {
			t.Fatalf("auth login: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("auth login did not end after the redirect")
	}
	list, _ := e.cli(ExitOK, "auth", "list")
	if !strings.Contains(list, "mcp:ledger") || !strings.Contains(list, "authorization_code") || !strings.Contains(list, "yes") {
		t.Fatalf("auth list after login:\n%s", list)
	}

	// A run in a new process calls the tool with the stored token.
	var reg struct {
		MCPServers []struct {
			Name  string           `json:"name"`
			Tools []map[string]any `json:"tools"`
		} `json:"mcpServers"`
	}
	out, _ := e.cli(ExitOK, "registry", "--format", "json")
	if err := json.Unmarshal([]byte(out), &reg); err != nil || len(reg.MCPServers) != 1 {
		t.Fatalf("registry: %s (%v)", out, err)
	}
	var def map[string]any
	for _, tl := range reg.MCPServers[0].Tools {
		if tl["name"] == "mcp.ledger.append" {
			def = tl
		}
	}
	if def == nil {
		t.Fatalf("registry lists no mcp.ledger.append: %s", out)
	}
	if def["outputSchema"] == nil {
		def["outputSchema"] = map[string]any{"type": "object"}
	}
	doc := map[string]any{
		"openplaybook": "1.6",
		"manifest":     map[string]any{"id": "ledger", "name": "ledger", "version": "1.0.0", "description": "Appends to the ledger.", "requiredConnectors": []string{}},
		"requires":     map[string]any{"connections": []any{}, "mcpServers": []any{map[string]any{"name": "ledger", "toolNames": []string{"mcp.ledger.append"}, "capabilities": []any{}}}, "secrets": []any{}},
		"tools":        []any{def},
		"steps":        []any{map[string]any{"id": "write", "kind": "agent", "agent": "clerk", "purpose": "Append.", "allowedTools": []string{"mcp.ledger.append"}}},
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	docPath := e.write("ledger.json", string(b))
	before := p.Calls.Load()
	o := e.outcome(ExitOK, "run", docPath)
	if o.Status != runtime.Completed {
		t.Fatalf("run: %+v", o)
	}
	if n := p.Calls.Load() - before; n != 1 {
		_, recs := e.auditJSON(o.Run)
		t.Fatalf("the server ran %d calls; want 1\n%v", n, recs)
	}

	// The access token runs out (its expiry, as stored, passes); two
	// processes need a new one at once.
	v, st, err := (&CLI{Stderr: &bytes.Buffer{}}).openVault(e.harness)
	if err != nil {
		t.Fatal(err)
	}
	tok, ver, err := v.Get(context.Background(), "mcp:ledger")
	if err != nil {
		t.Fatal(err)
	}
	oldRefresh := tok.RefreshToken
	tok.Expiry = time.Now().Add(-time.Hour)
	if _, err := v.Put(context.Background(), "mcp:ledger", tok, ver); err != nil {
		t.Fatal(err)
	}
	st.Close()
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var o, er bytes.Buffer
			codes[i] = (&CLI{Stdout: &o, Stderr: &er}).Main([]string{"check", "--harness", e.harness})
			if codes[i] != 0 {
				t.Logf("check %d: %s%s", i, o.String(), er.String())
			}
		}()
	}
	wg.Wait()
	if codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("check after the expiry: exit %v", codes)
	}
	v, st, err = (&CLI{Stderr: &bytes.Buffer{}}).openVault(e.harness)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tok, _, err = v.Get(context.Background(), "mcp:ledger")
	if err != nil || tok.RefreshToken == oldRefresh || !tok.Expiry.After(time.Now()) {
		t.Fatalf("after the refresh: rotated %v, expiry %v, %v", tok.RefreshToken != oldRefresh, tok.Expiry, err)
	}
	for _, s := range []string{tok.AccessToken, tok.RefreshToken, oldRefresh} {
		if strings.Contains(e.printed.String()+stdout.String()+stderr.String(), s) {
			t.Fatal("a token was printed")
		}
	}
}

// TestAuthLoginRefusedEndsAtOnce: when the authorization server redirects
// back with an error (here Hydra refuses the offline_access scope the
// client was not given), auth login ends at once with that error; it
// does not print another URL and wait out its timeout.
func TestAuthLoginRefusedEndsAtOnce(t *testing.T) {
	t.Parallel()
	hy := hydratest.Start(t)
	redirect := fmt.Sprintf("http://127.0.0.1:%d/callback", freeLoopbackPort(t))
	hy.CreateClient(hydratest.Client{ID: "narrow-cli", AuthMethod: "none", GrantTypes: []string{"authorization_code"},
		ResponseTypes: []string{"code"}, RedirectURIs: []string{redirect}, Scope: "openid"})
	p := hydratest.NewProtectedMCP(t, hy.Issuer, hy.Issuer, "narrow-cli")
	e := newRTEnv(t, rtConfig{servers: map[string]any{"ledger": map[string]any{"url": p.URL, "timeout": "30s",
		"oauth": map[string]any{"issuer": hy.Issuer, "clientId": "narrow-cli", "grant": "authorization_code", "redirectUrl": redirect}}}})
	hb, _ := os.ReadFile(e.harness)
	var h map[string]any
	json.Unmarshal(hb, &h)
	h["store"].(map[string]any)["vault"] = map[string]any{"keySecret": "OPENPLAYBOOK_VAULT_KEY"}
	hb, _ = json.MarshalIndent(h, "", "  ")
	e.write("harness.json", string(hb))
	env, _ := os.ReadFile(e.dir + "/secrets.env")
	e.write("secrets.env", string(env)+"OPENPLAYBOOK_VAULT_KEY="+vaultKeyValue+"\n")

	stderr := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- (&CLI{Stdout: &bytes.Buffer{}, Stderr: stderr}).Main([]string{"auth", "login", "--harness", e.harness, "--timeout", "120s", "ledger"})
	}()
	urlRE := regexp.MustCompile(`(?m)^  (http://\S+)$`)
	var authURL string
	for deadline := time.Now().Add(30 * time.Second); authURL == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := urlRE.FindStringSubmatch(stderr.String()); m != nil {
			authURL = m[1]
		}
	}
	if authURL == "" {
		t.Fatalf("no authorization URL:\n%s", stderr.String())
	}
	back, err := hy.Follow(authURL, redirect, nil)
	if err != nil {
		t.Fatal(err)
	}
	if back.Query().Get("error") == "" {
		t.Fatalf("Hydra did not refuse: %s", back.Redacted())
	}
	res, err := http.Get(back.String())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	select {
	case code := <-done:
		if code != ExitProblems || !strings.Contains(stderr.String(), "the authorization server refused") {
			t.Fatalf("auth login: exit %d\n%s", code, stderr.String())
		}
		if n := len(urlRE.FindAllString(stderr.String(), -1)); n != 1 {
			t.Errorf("auth login printed %d authorization URLs; want 1", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("auth login still waits 20 s after the refusal:\n%s", stderr.String())
	}
}

// TestLoopbackAnswerReachesBrowser: the page the loopback listener sends
// back (refused or authorized) reaches the browser whole, every time,
// even though auth login stops listening as soon as it has the answer.
// It failed with an EOF now and then while the listener was closed
// rather than shut down.
func TestLoopbackAnswerReachesBrowser(t *testing.T) {
	for i := 0; i < 40; i++ {
		redirect := fmt.Sprintf("http://127.0.0.1:%d/callback", freeLoopbackPort(t))
		query, want := "?error=invalid_scope", "the authorization was refused"
		if i%2 == 1 {
			query, want = "?code=abc&state=s", "authorized"
		}
		done := make(chan error, 1)
		go func() {
			_, err := (&CLI{Stdout: &bytes.Buffer{}, Stderr: &syncBuffer{}}).loopbackLogin(context.Background(), "ledger", "http://example.invalid/auth", redirect)
			done <- err
		}()
		var res *http.Response
		var err error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if res, err = http.Get(redirect + query); err == nil || !strings.Contains(err.Error(), "refused") {
				break
			}
		}
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Fatalf("round %d: status %d, body %q, err %v; want %q", i, res.StatusCode, body, err, want)
		}
		if err := <-done; (err != nil) != (i%2 == 0) {
			t.Fatalf("round %d: loopbackLogin returned %v", i, err)
		}
	}
}
