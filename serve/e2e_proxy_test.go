package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/obs"
)

// TestOperateBehindReverseProxy: serve with a public URL
// (https://play.example.com) behind a TLS-terminating reverse proxy on
// loopback, which connects from 127.0.0.2, the one trusted proxy. The
// MCP URL handed out is the public one and an MCP client reaches the run
// through it; the console's login cookie is the __Host- one and works;
// a foreign Origin is refused; forwarding headers from the proxy are
// believed (the access line's client and scheme), while forged ones from
// an untrusted peer (127.0.0.1, directly) are ignored.
func TestOperateBehindReverseProxy(t *testing.T) {
	const public = "https://play.example.com"
	proxies, err := obs.ParseProxies("127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	r := newOpsRig(t, nil, public, proxies)
	backend, _ := url.Parse(r.ts.URL)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(backend)
			pr.Out.Host = pr.In.Host // as an ingress does
			pr.SetXForwarded()
			pr.Out.Header.Set("X-Forwarded-For", "203.0.113.7") // the "client" the proxy saw
		},
		Transport:     &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext},
		FlushInterval: -1,
	}
	front := httptest.NewTLSServer(rp)
	t.Cleanup(front.Close)
	// A client that resolves play.example.com to the proxy.
	tr := front.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, front.Listener.Addr().String())
	}
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")

	// The agent token, asked through the proxy with a forged
	// X-Forwarded-Host: the MCP URL is the public one.
	req, _ := http.NewRequest("POST", public+"/api/v1/runs/"+run+"/agent-token", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-Host", "evil.example.net")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tok struct{ Token, MCPURL string }
	_ = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if resp.StatusCode != 200 && resp.StatusCode != 201 {
		t.Fatalf("agent-token through the proxy: %d", resp.StatusCode)
	}
	if tok.MCPURL != public+"/mcp/runs/"+run {
		t.Fatalf("MCP URL %q, want the public URL's", tok.MCPURL)
	}
	// An MCP client reaches the run at that URL, through the proxy.
	c := mcp.NewClient(&mcp.Implementation{Name: "proxied-agent", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: tok.MCPURL, HTTPClient: &http.Client{Transport: bearer{tok.Token, tr}}}, nil)
	if err != nil {
		t.Fatalf("connecting through the proxy: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "customer__get", Arguments: map[string]any{"customerId": "cus_ada"}})
	if err != nil || res.IsError {
		t.Fatalf("customer.get through the proxy: %v %+v", err, res)
	}

	// The console login: the cookie is __Host- and Secure, and works.
	login := func(origin string) *http.Response {
		req, _ := http.NewRequest("POST", public+"/login", strings.NewReader(url.Values{"token": {operatorToken}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := login("https://evil.example.com"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a login from a foreign Origin: %d", resp.StatusCode)
	}
	resp = login(public)
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "__Host-openplaybook_session" {
			session = ck
		}
	}
	if resp.StatusCode != 200 || session == nil || !session.Secure {
		t.Fatalf("login through the proxy: %d, cookie %+v", resp.StatusCode, session)
	}
	req, _ = http.NewRequest("GET", public+"/api/v1/runs/"+run, nil)
	req.AddCookie(session)
	resp, err = client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the API with the session cookie: %v %v", resp, err)
	}
	resp.Body.Close()

	// Directly, from 127.0.0.1 (not a trusted proxy), with forged
	// forwarding headers.
	req, _ = http.NewRequest("GET", r.ts.URL+"/healthz?direct", nil)
	req.Header.Set("X-Forwarded-For", "198.51.100.9")
	req.Header.Set("X-Forwarded-Proto", "https")
	req.Header.Set("X-Forwarded-Host", "evil.example.net")
	req.Header.Set("Forwarded", "for=198.51.100.9;proto=https")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	var viaProxy, direct int
	sc := bufio.NewScanner(strings.NewReader(r.logs.String()))
	for sc.Scan() {
		var l struct{ Msg, Path, Client, Scheme string }
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "http" {
			continue
		}
		switch {
		case l.Path == "/healthz":
			direct++
			if l.Client != "127.0.0.1" || l.Scheme != "http" {
				t.Errorf("forged forwarding headers from an untrusted peer were believed: %s", sc.Text())
			}
		case strings.HasPrefix(l.Path, "/api/v1/runs/"+run):
			viaProxy++
			if l.Client != "203.0.113.7" || l.Scheme != "https" {
				t.Errorf("the trusted proxy's forwarding headers were not believed: %s", sc.Text())
			}
		}
	}
	if viaProxy == 0 || direct != 1 {
		t.Errorf("access lines: %d through the proxy, %d direct", viaProxy, direct)
	}
}
