package serve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/serve"
)

// rpcAnswer is one JSON-RPC answer as it came: its id as written.
type rpcAnswer struct {
	ID     jsontext.Value `json:"id"`
	Result jsontext.Value `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// answerOf reads the JSON-RPC answer of an HTTP body (plain JSON, or the
// last data of a server-sent event stream).
func answerOf(t *testing.T, body string) (rpcAnswer, bool) {
	t.Helper()
	text := strings.TrimSpace(body)
	if !strings.HasPrefix(text, "{") {
		text = ""
		for line := range strings.SplitSeq(body, "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok && strings.TrimSpace(d) != "" {
				text = strings.TrimSpace(d)
			}
		}
	}
	var a rpcAnswer
	if text == "" || json.Unmarshal([]byte(text), &a) != nil {
		return rpcAnswer{}, false
	}
	return a, true
}

// rejectedCount counts the run's agent.rejected records.
func rejectedCount(t *testing.T, r *rig, run string) int {
	t.Helper()
	n := 0
	for _, k := range auditKinds(t, r, run) {
		if k == "agent.rejected" {
			n++
		}
	}
	return n
}

// stdioAsk sends line to a stdio session and then a ping with id
// "fence", and returns the answers (not notifications) read before the
// ping's answer. The gateway writes a refusal before it passes the next
// line on, so a refused line's answer comes before the fence's, and a
// line that gets no answer returns none, without waiting on a clock.
func stdioAsk(t *testing.T, in io.Writer, br *bufio.Reader, line string) []string {
	t.Helper()
	return stdioRead(t, in, br, line, false)
}

// stdioCall is stdioAsk for a line the gateway serves: go-sdk may answer
// it after the fence, so it reads until the fence and one other answer
// have come.
func stdioCall(t *testing.T, in io.Writer, br *bufio.Reader, line string) []string {
	t.Helper()
	return stdioRead(t, in, br, line, true)
}

func stdioRead(t *testing.T, in io.Writer, br *bufio.Reader, line string, answered bool) []string {
	t.Helper()
	// The pipes hold nothing: write while the answers are read.
	go func() { _, _ = io.WriteString(in, line+"\n"+`{"jsonrpc":"2.0","id":"fence","method":"ping"}`+"\n") }()
	var got []string
	fenced := false
	for !fenced || (answered && len(got) == 0) {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stdio answers: %v (so far %q)", err, got)
		}
		var head struct {
			ID jsontext.Value `json:"id"`
		}
		switch _ = json.Unmarshal([]byte(l), &head); {
		case string(head.ID) == `"fence"`:
			fenced = true
		case head.ID != nil:
			got = append(got, l)
		}
	}
	return got
}

// waitingRun creates a run of agent.json that waits for its agent, and
// issues its token, for a stdio server (which executes the run itself,
// so no HTTP agent may be attached).
func waitingRun(t *testing.T, r *rig) (string, serve.IssuedToken) {
	t.Helper()
	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "tester")
	if err != nil {
		t.Fatal(err)
	}
	return run, tok
}

// drained holds the stdio answer readers being drained.
var drained sync.Map

// stdioDrain reads and drops what is left of a stdio server's answers
// (once per reader): its pipe holds nothing, and a server writing a
// notification no one reads would never close.
func stdioDrain(br *bufio.Reader) {
	if _, loaded := drained.LoadOrStore(br, true); !loaded {
		go func() { _, _ = io.Copy(io.Discard, br) }()
	}
}

// stdioInit opens a session over stdio: initialize, initialized. What
// the session still writes when the test ends is drained.
func stdioInit(t *testing.T, in io.Writer, br *bufio.Reader) {
	t.Helper()
	t.Cleanup(func() { stdioDrain(br) })
	got := stdioCall(t, in, br, initBody)
	if len(got) != 1 || !strings.Contains(got[0], `"result"`) {
		t.Fatalf("initialize over stdio: %q", got)
	}
	if got := stdioAsk(t, in, br, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); len(got) != 0 {
		t.Fatalf("initialized over stdio: %q", got)
	}
}

// noteCall is a tools/call of note__add (which adds a note to cus_ada
// if it runs) under the id given as written.
func noteCall(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"note__add","arguments":{"customerId":"cus_ada","body":"ran under ` + strings.ReplaceAll(id, `"`, `'`) + `"}}}`
}

// TestAttackMessagesWithoutMethod: a message with no method (a response
// to a request the gateway never sent, or neither a request nor a
// notification) is answered -32600 under its own id and audited as
// agent.rejected, over HTTP and over stdio.
func TestAttackMessagesWithoutMethod(t *testing.T) {
	cases := []struct{ body, id string }{
		{`{"jsonrpc":"2.0","id":99,"result":{"content":[]}}`, `99`},
		{`{"jsonrpc":"2.0","id":"r-1","error":{"code":-1,"message":"no"}}`, `"r-1"`},
		{`{"jsonrpc":"2.0","id":5}`, `5`},
		{`{"jsonrpc":"2.0","id":6,"method":null,"params":{}}`, `6`},
		{`{"jsonrpc":"2.0","result":{}}`, `null`},
		{`{"jsonrpc":"2.0"}`, `null`},
		{`{"jsonrpc":"2.0","id":7,"params":{"name":"note__add","arguments":{"customerId":"cus_ada","body":"x"}}}`, `7`},
	}
	check := func(t *testing.T, what string, a rpcAnswer, ok bool, id string) {
		t.Helper()
		if !ok || a.Error == nil || a.Error.Code != -32600 || string(a.ID) != id {
			t.Errorf("BROKEN: %s: answered %+v (id %s), want -32600 under id %s", what, a.Error, a.ID, id)
		}
	}
	t.Run("http", func(t *testing.T) {
		r := newRig(t, "")
		run, tok, a := startAgentRun(t, r)
		before := rejectedCount(t, r, run)
		for _, c := range cases {
			status, body := post(t, tok.MCPURL, tok.Token, a.cs.ID(), []byte(c.body), nil)
			ans, ok := answerOf(t, body)
			if status != http.StatusBadRequest {
				t.Errorf("BROKEN: %s: status %d, want 400", c.body, status)
			}
			check(t, c.body, ans, ok, c.id)
		}
		if n := rejectedCount(t, r, run) - before; n != len(cases) {
			t.Errorf("BROKEN: %d agent.rejected records for %d messages without a method", n, len(cases))
		}
		if n := countNotes(t, r.st, "cus_ada"); n != 0 {
			t.Errorf("%d notes", n)
		}
		if _, isErr := a.call(t, "customer__get", map[string]any{"customerId": "cus_ada"}); isErr {
			t.Fatal("the session broke")
		}
	})
	t.Run("stdio", func(t *testing.T) {
		r := newRig(t, "")
		run, tok := waitingRun(t, r)
		in, out, _ := stdioServer(t, r, run, tok.Token)
		br := bufio.NewReader(out)
		stdioInit(t, in, br)
		before := rejectedCount(t, r, run)
		for _, c := range cases {
			got := stdioAsk(t, in, br, c.body)
			if len(got) != 1 {
				t.Errorf("BROKEN: %s: %d answers over stdio, want 1: %q", c.body, len(got), got)
				continue
			}
			ans, ok := answerOf(t, got[0])
			check(t, c.body, ans, ok, c.id)
		}
		if n := rejectedCount(t, r, run) - before; n != len(cases) {
			t.Errorf("BROKEN: %d agent.rejected records for %d messages without a method", n, len(cases))
		}
		if n := countNotes(t, r.st, "cus_ada"); n != 0 {
			t.Errorf("%d notes", n)
		}
	})
}

// inexactIDs are ids that go-sdk would answer under another id (or not
// as sent); each is refused and nothing runs under it.
var inexactIDs = []struct{ id, echo string }{
	{`7.5`, `7.5`},
	{`2.5`, `2.5`},
	{`-2.5`, `-2.5`},
	{`1e30`, `1e30`},
	{`1E2`, `1E2`},
	{`2.0`, `2.0`},
	{`1e0`, `1e0`},
	{`-0`, `-0`},
	{`9007199254740993`, `9007199254740993`},
	{`-9007199254740993`, `-9007199254740993`},
	{`9223372036854775808`, `9223372036854775808`},
	{`123456789012345678901234567890`, `123456789012345678901234567890`},
	{`true`, `null`},
	{`{"n":1}`, `null`},
	{`[7]`, `null`},
}

// exactIDs are answered under exactly the id sent.
var exactIDs = []string{`0`, `12`, `-12`, `9007199254740992`, `-9007199254740992`, `"7.5"`, `"1e30"`, `""`}

// TestAttackInexactIDs: a request whose numeric id go-sdk would read as
// another (a fraction, an exponent, past ±2^53, -0) or whose id is not a
// string or a number is refused with -32600, the id echoed as sent, and
// its tools/call does not run; over HTTP and over stdio. The ids that
// are served are answered under exactly the id sent.
func TestAttackInexactIDs(t *testing.T) {
	getCall := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"customer__get","arguments":{"customerId":"cus_ada"}}}`
	}
	t.Run("http", func(t *testing.T) {
		r := newRig(t, "")
		run, tok, a := startAgentRun(t, r)
		before := rejectedCount(t, r, run)
		for _, c := range inexactIDs {
			_, body := post(t, tok.MCPURL, tok.Token, a.cs.ID(), []byte(noteCall(c.id)), nil)
			ans, ok := answerOf(t, body)
			if !ok || ans.Error == nil || ans.Error.Code != -32600 || string(ans.ID) != c.echo {
				t.Errorf("BROKEN: id %s: answered id %s, error %+v, result %.80s; want -32600 under id %s", c.id, ans.ID, ans.Error, ans.Result, c.echo)
			}
		}
		if n := countNotes(t, r.st, "cus_ada"); n != 0 {
			t.Errorf("BROKEN: %d tools/call under refused ids ran (notes added)", n)
		}
		if n := rejectedCount(t, r, run) - before; n != len(inexactIDs) {
			t.Errorf("BROKEN: %d agent.rejected records for %d refused ids", n, len(inexactIDs))
		}
		for _, id := range exactIDs {
			_, body := post(t, tok.MCPURL, tok.Token, a.cs.ID(), []byte(getCall(id)), nil)
			ans, ok := answerOf(t, body)
			if !ok || ans.Error != nil || string(ans.ID) != id {
				t.Errorf("id %s: answered id %s (error %+v), want the result under id %s", id, ans.ID, ans.Error, id)
			}
		}
	})
	t.Run("stdio", func(t *testing.T) {
		r := newRig(t, "")
		run, tok := waitingRun(t, r)
		in, out, _ := stdioServer(t, r, run, tok.Token)
		br := bufio.NewReader(out)
		stdioInit(t, in, br)
		// Let the step reach the session (a tools/list waits for it).
		stdioCall(t, in, br, `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`)
		before := rejectedCount(t, r, run)
		for _, c := range inexactIDs {
			got := stdioAsk(t, in, br, noteCall(c.id))
			var ans rpcAnswer
			ok := len(got) == 1 && json.Unmarshal([]byte(got[0]), &ans) == nil
			if !ok || ans.Error == nil || ans.Error.Code != -32600 || string(ans.ID) != c.echo {
				t.Errorf("BROKEN: id %s over stdio: answered %q; want -32600 under id %s", c.id, got, c.echo)
			}
		}
		if n := countNotes(t, r.st, "cus_ada"); n != 0 {
			t.Errorf("BROKEN: %d tools/call under refused ids ran over stdio (notes added)", n)
		}
		if n := rejectedCount(t, r, run) - before; n != len(inexactIDs) {
			t.Errorf("BROKEN: %d agent.rejected records for %d refused ids", n, len(inexactIDs))
		}
		for _, id := range exactIDs {
			got := stdioCall(t, in, br, getCall(id))
			var ans rpcAnswer
			if len(got) != 1 || json.Unmarshal([]byte(got[0]), &ans) != nil || ans.Error != nil || string(ans.ID) != id {
				t.Errorf("id %s over stdio: answered %q, want the result under id %s", id, got, id)
			}
		}
	})
}

// TestAttackRequestsAndNotificationsMixed: a request method sent as a
// notification (no id, or an id of null, which go-sdk reads as none) and
// a notification sent with an id are refused and audited; the tools/call
// among them does not run.
func TestAttackRequestsAndNotificationsMixed(t *testing.T) {
	r := newRig(t, "")
	run, tok, a := startAgentRun(t, r)
	args := `{"name":"note__add","arguments":{"customerId":"cus_ada","body":"as a notification"}}`
	cases := []string{
		`{"jsonrpc":"2.0","method":"tools/call","params":` + args + `}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":` + args + `}`,
		`{"jsonrpc":"2.0","id":3,"method":"notifications/initialized"}`,
		`{"jsonrpc":"1.0","id":4,"method":"tools/call","params":` + args + `}`,
		`{"id":4,"method":"tools/call","params":` + args + `}`,
		`{"jsonrpc":"2.0","id":4,"method":7,"params":` + args + `}`,
	}
	before := rejectedCount(t, r, run)
	for _, c := range cases {
		status, body := post(t, tok.MCPURL, tok.Token, a.cs.ID(), []byte(c), nil)
		ans, ok := answerOf(t, body)
		if status != http.StatusBadRequest || !ok || ans.Error == nil || ans.Error.Code != -32600 {
			t.Errorf("%s: %d %s, want 400 and -32600", c, status, body)
		}
	}
	if n := rejectedCount(t, r, run) - before; n != len(cases) {
		t.Errorf("BROKEN: %d agent.rejected records for %d refused messages", n, len(cases))
	}
	if n := countNotes(t, r.st, "cus_ada"); n != 0 {
		t.Errorf("BROKEN: %d notes", n)
	}
}
