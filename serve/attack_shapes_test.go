package serve_test

import (
	"bytes"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/openplaybook/openplaybook/serve"
)

// lockedBuffer is a bytes.Buffer safe for the server's error log.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAttackMessageShapes: every method an agent may send, with params
// of every JSON shape, is answered (an error or a result) without a
// panic, and the session still serves its agent afterwards.
func TestAttackMessageShapes(t *testing.T) {
	r := newRig(t, "")
	_, tok, a := startAgentRun(t, r)
	var errs lockedBuffer
	ts := httptest.NewUnstartedServer(r.srv)
	ts.Config.ErrorLog = log.New(&errs, "", 0)
	ts.Start()
	defer ts.Close()
	_, path, _ := strings.Cut(tok.MCPURL, r.ts.URL)
	url := ts.URL + path
	methods := []string{"initialize", "ping", "server/discover", "tools/list", "tools/call", "resources/list", "resources/read",
		"resources/templates/list", "resources/subscribe", "resources/unsubscribe", "subscriptions/listen", "prompts/list",
		"prompts/get", "logging/setLevel", "completion/complete", "notifications/initialized", "notifications/cancelled",
		"notifications/progress", "notifications/roots/list_changed"}
	params := []string{`null`, `[]`, `"s"`, `1`, `{}`, `{"name":null}`, `{"name":1,"arguments":[]}`, `{"name":"openplaybook_finish_step","arguments":"x"}`,
		`{"name":"openplaybook_finish_step","arguments":{"output":null,"Output":1}}`, `{"name":"note__add","arguments":null}`,
		`{"name":"note__add","arguments":{"body":"x"},"_meta":{"progressToken":{"a":[1]}}}`, `{"uri":1}`, `{"uri":"openplaybook://runs/../step"}`,
		`{"requestId":{"x":1},"reason":"x"}`, `{"level":"nope"}`, `{"ref":{"type":"ref/prompt","name":"x"},"argument":{"name":"a","value":"b"}}`,
		`{"cursor":"` + strings.Repeat("z", 2000) + `"}`, `{"protocolVersion":"9999-99-99","capabilities":null,"clientInfo":null}`}
	for _, sid := range []string{"", a.cs.ID()} {
		for _, m := range methods {
			for i, p := range params {
				body := `{"jsonrpc":"2.0","id":` + string(rune('1'+i%9)) + `,"method":"` + m + `","params":` + p + `}`
				if strings.HasPrefix(m, "notifications/") {
					body = `{"jsonrpc":"2.0","method":"` + m + `","params":` + p + `}`
				}
				code, _ := post(t, url, tok.Token, sid, []byte(body), nil)
				if code == 0 || code >= 500 {
					t.Errorf("BROKEN: %s with params %s (session %q): status %d", m, p, sid, code)
				}
			}
		}
	}
	if s := errs.String(); strings.Contains(s, "panic") {
		t.Errorf("BROKEN: the server panicked: %s", s)
	}
	if _, isErr := a.call(t, "customer__get", map[string]any{"customerId": "cus_ada"}); isErr {
		t.Fatal("the session broke")
	}
	if n := countNotes(t, r.st, "cus_ada"); n > 1 {
		t.Errorf("%d notes", n)
	}
	_ = http.StatusOK
}

// TestAttackStalledSubscribers: event-stream clients that never read
// (their TCP windows fill) must not hold up the server: publishing stays
// non-blocking and the runs go on.
func TestAttackStalledSubscribers(t *testing.T) {
	r := newRig(t, "")
	run, _, a := startAgentRun(t, r)
	u := strings.TrimPrefix(r.ts.URL, "http://")
	var conns []net.Conn
	for i := range 40 {
		c, err := net.Dial("tcp", u)
		if err != nil {
			t.Fatal(err)
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(1024)
		}
		conns = append(conns, c)
		path := "/api/v1/events"
		if i%2 == 0 {
			path = "/api/v1/runs/" + run + "/events"
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", path, u, operatorToken)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	big := strings.Repeat("x", 64<<10)
	for range 2000 {
		r.srv.Events().Publish(run, serve.Event{Type: "progress", Text: big})
	}
	// The run still goes on with its agent.
	if _, isErr := a.call(t, "note__add", map[string]any{"customerId": "cus_ada", "body": "still serving"}); isErr {
		t.Fatal("note.add failed")
	}
	if _, isErr := a.call(t, serve.FinishTool, map[string]any{"output": 1}); isErr {
		t.Fatal("finish failed")
	}
	r.waitStatus(run, "waiting", "gate")
}
