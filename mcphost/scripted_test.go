package mcphost_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/mcphost"
	"github.com/openplaybook/openplaybook/registry"
)

// scriptedStdio is a stdio server that answers initialize and
// tools/list like hostileStdio and does what mode says at tools/call.
func scriptedStdio(mode string) {
	r := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := os.Stdout
	var calls atomic.Int64
	send := func(s string) { out.Write([]byte(s + "\n")) }
	readLine := func() string {
		l, _ := r.ReadString('\n')
		return strings.TrimSpace(l)
	}
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			json.Unmarshal(line, &req)
			if req.Method != "tools/call" {
				if a := hostileAnswer(line, nil, &calls); a != nil {
					out.Write(append(a, '\n'))
				}
			} else {
				id := string(req.ID)
				result := func(text string) string {
					b, _ := json.Marshal(text)
					return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":` + string(b) + `}]}}`
				}
				switch mode {
				case "interleave":
					// A notification, a response to an id never sent, a
					// ping and a roots/list request, whose answers are read
					// back and echoed in the result.
					send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`)
					send(`{"jsonrpc":"2.0","id":987654,"result":{}}`)
					send(`{"jsonrpc":"2.0","id":"p\u00e9-1","method":"ping"}`)
					got := readLine()
					send(`{"jsonrpc":"2.0","id":-7,"method":"roots/list"}`)
					got += " " + readLine()
					// The answer in pieces, split inside a UTF-8 sequence.
					a := []byte(result("é " + got))
					for i := 0; i < len(a); i += 7 {
						out.Write(a[i:min(i+7, len(a))])
						time.Sleep(time.Millisecond)
					}
					out.Write([]byte("\r\n"))
				case "deaf":
					// Read nothing more: the pipe to stdin fills up.
					time.Sleep(time.Hour)
				case "ping-flood":
					// Requests whose answers it never reads: the client's
					// writes of them fill the pipe.
					for i := 0; i < 20000; i++ {
						send(`{"jsonrpc":"2.0","id":"f` + strconv.Itoa(i) + `","method":"ping"}`)
					}
					time.Sleep(time.Hour)
				case "exit":
					os.Exit(0)
				case "close-stdout":
					out.Close()
					time.Sleep(time.Hour)
				case "partial-exit":
					out.Write([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"con`))
					os.Exit(0)
				case "answer-then-garbage":
					send(result("ok") + "\x00")
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func scriptedServer(t *testing.T, mode string) mcphost.ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return mcphost.ServerConfig{Name: "hostile", Command: exe, Env: map[string]string{"MCPHOST_SCRIPT": mode}, Timeout: 10 * time.Second}
}

// Server-to-client requests, notifications and stray responses
// interleaved with a call's answer, which arrives in awkward pieces: the
// call gets its answer, and the client's answers to the server's
// requests are JSON-RPC responses with the server's ids.
func TestScriptedInterleave(t *testing.T) {
	t.Parallel()
	s := connect(t, scriptedServer(t, "interleave"))
	live := s.RegistryTool(tools(t, s)["t"])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := live.Call(ctx, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	text := string(res.Content)
	t.Logf("result: %s", text)
	for _, want := range []string{`é `, `\"id\":\"pé-1\"`, `\"id\":-7`} {
		if !strings.Contains(text, want) {
			t.Errorf("result %s lacks %s", text, want)
		}
	}
	if h := s.Health(); h != nil {
		t.Errorf("Health() = %v", h)
	}
}

// A server whose answer is lost (it exits, closes its stdout, or exits
// halfway through the answer) fails the call promptly, as outcome
// unknown: the tool may have run.
func TestScriptedAnswerLost(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"exit", "close-stdout", "partial-exit"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			s := connect(t, scriptedServer(t, mode))
			live := s.RegistryTool(tools(t, s)["t"])
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			_, err := live.Call(ctx, []byte(`{}`))
			if err == nil {
				t.Fatal("call succeeded")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the call took %v to fail", d)
			}
			if registry.IsDefinite(err) {
				t.Errorf("lost answer is definite: %v", err)
			}
			t.Logf("%v", err)
		})
	}
}

// A valid answer followed by garbage on the same line is refused whole.
func TestScriptedAnswerThenGarbage(t *testing.T) {
	t.Parallel()
	s := connect(t, scriptedServer(t, "answer-then-garbage"))
	live := s.RegistryTool(tools(t, s)["t"])
	_, err := live.Call(context.Background(), []byte(`{}`))
	if err == nil || registry.IsDefinite(err) {
		t.Fatalf("call: %v; want an outcome-unknown protocol error", err)
	}
}

// A server that stops reading its stdin cannot hold a call past its
// timeout: the write of a large request (more than the pipe holds) must
// not block the call, nor Close, forever.
func TestScriptedDeafServer(t *testing.T) {
	t.Parallel()
	cfg := scriptedServer(t, "deaf")
	cfg.CallTimeout = time.Second
	s := connect(t, cfg)
	live := s.RegistryTool(tools(t, s)["t"])
	if _, err := live.Call(context.Background(), []byte(`{}`)); err == nil {
		t.Fatal("the first call succeeded")
	}
	// The write of a large request blocks; nor can the server hold Close
	// (go-sdk gives its notifications/cancelled 5s).
	callAndCloseEnd(t, s, live, `{"x":"`+strings.Repeat("a", 1<<20)+`"}`)
}

// callAndCloseEnd makes a call that must fail as outcome-unknown within
// 10s (the server's CallTimeout is 1s), then closes the server, which
// must end within 15s.
func callAndCloseEnd(t *testing.T, s *mcphost.Server, live registry.Tool, args string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := live.Call(context.Background(), []byte(args))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || registry.IsDefinite(err) {
			t.Errorf("call: %v; want an outcome-unknown failure", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call is still waiting 10s later (CallTimeout 1s)")
	}
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("Close is still waiting 15s later")
	}
}

// A server that floods the client with requests and never reads the
// answers (they fill the pipe to its stdin) cannot hold a call past its
// timeout, nor Close.
func TestScriptedPingFlood(t *testing.T) {
	t.Parallel()
	cfg := scriptedServer(t, "ping-flood")
	cfg.CallTimeout = time.Second
	s := connect(t, cfg)
	callAndCloseEnd(t, s, s.RegistryTool(tools(t, s)["t"]), `{}`)
}
