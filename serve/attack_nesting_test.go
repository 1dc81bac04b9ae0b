package serve_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

// TestAttackNestingNamed: JSON nested past the decoders' limit (10000
// levels) is refused saying so, in an MCP message (HTTP and stdio) and
// in an API body; one level less is not refused for its nesting.
func TestAttackNestingNamed(t *testing.T) {
	r := newRig(t, "")
	_, tok, a := startAgentRun(t, r)
	nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	// The message's own object and params' nesting come on top: 3 levels
	// (message, params, arguments) before "tags".
	msg := func(n int) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"note__add","arguments":{"customerId":"cus_ada","body":"x","tags":` + nested(n) + `}}}`
	}
	const limit = "nested deeper than 10000 levels"
	_, body := post(t, tok.MCPURL, tok.Token, a.cs.ID(), []byte(msg(10000-3+1)), nil)
	if ans, ok := answerOf(t, body); !ok || ans.Error == nil || !strings.Contains(ans.Error.Message, limit) {
		t.Errorf("BROKEN: a message nested 10001 levels: %.300s; want it to say %q", body, limit)
	}
	_, body = post(t, tok.MCPURL, tok.Token, a.cs.ID(), []byte(msg(10000-3)), nil)
	if strings.Contains(body, "nested deeper") {
		t.Errorf("a message nested 10000 levels was refused for its nesting: %.300s", body)
	}
	if n := countNotes(t, r.st, "cus_ada"); n != 0 {
		t.Errorf("%d notes", n)
	}

	srun, stok := waitingRun(t, r)
	in, out, _ := stdioServer(t, r, srun, stok.Token)
	br := bufio.NewReader(out)
	stdioInit(t, in, br)
	got := stdioAsk(t, in, br, msg(10000-3+1))
	if len(got) != 1 || !strings.Contains(got[0], limit) {
		t.Errorf("BROKEN: over stdio, a message nested 10001 levels: %.300q; want it to say %q", got, limit)
	}

	api := r.api(operatorToken)
	res := api.do(http.MethodPost, "/api/v1/runs", `{"document":`+nested(10000)+`}`)
	want(t, "an API body nested 10001 levels", res, http.StatusBadRequest, limit, "line 1, column 10012")
	res = api.do(http.MethodPost, "/api/v1/runs", `{"document":`+nested(9999)+`}`)
	if strings.Contains(string(res.body), "nested deeper") {
		t.Errorf("an API body nested 10000 levels was refused for its nesting: %.300s", res.body)
	}
}
