package serve_test

import (
	"io"
	"net/http"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/serve"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`

// TestAttackSessionFlood: serve.MaxAgentSessions bounds the open sessions
// of one run. The gateway counts the sessions that have attached, before
// it reads a request's body; a session attaches only once its initialize
// is handled. An agent that sends the headers of many initialize requests
// first and their bodies afterwards has every one pass the check.
func TestAttackSessionFlood(t *testing.T) {
	r := newRig(t, "")
	run, tok, _ := startAgentRun(t, r) // one session is open
	const extra = 32
	n := serve.MaxAgentSessions + extra
	tr := &http.Transport{MaxIdleConnsPerHost: n}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var ok, limited atomic.Int32
	var wg sync.WaitGroup
	bodies := make([]*io.PipeWriter, n)
	for i := range n {
		pr, pw := io.Pipe()
		bodies[i] = pw
		req, err := http.NewRequest(http.MethodPost, tok.MCPURL, pr)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = int64(len(initBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				ok.Add(1)
			case http.StatusTooManyRequests:
				limited.Add(1)
			}
		}()
	}
	// Every request is at the server, past the session count, reading its
	// body (or already answered 429).
	deadline := time.Now().Add(10 * time.Second)
	for gatewayReaders() < n-int(limited.Load()) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for _, pw := range bodies {
		go func() {
			_, _ = io.WriteString(pw, initBody)
			pw.Close()
		}()
	}
	wg.Wait()
	open := r.srv.Exchange().Attached(run)
	t.Logf("%d initialized, %d refused 429; %d sessions attached", ok.Load(), limited.Load(), open)
	if open > serve.MaxAgentSessions {
		t.Errorf("BROKEN: %d agent sessions are open on run %s, over serve.MaxAgentSessions (%d): the limit is checked before the body is read and a session counts only once attached", open, run, serve.MaxAgentSessions)
	}
}

// gatewayReaders counts the goroutines in the gateway's ServeHTTP.
func gatewayReaders() int {
	buf := make([]byte, 8<<20)
	n := goruntime.Stack(buf, true)
	return strings.Count(string(buf[:n]), "serve.(*gateway).ServeHTTP(")
}
