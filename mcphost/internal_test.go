package mcphost

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestNameProblem(t *testing.T) {
	for _, c := range []struct{ tool, want string }{
		{"search_orders", ""},
		{"a.b-c_D9", ""},
		{"", "empty name"},
		{"bad name", "contains whitespace"},
		{"tab\there", "contains whitespace"},
		{"x/y", "contains '/'"},
		{"a:b", "contains ':'"},
		{"日本", "contains a non-ASCII character"},
		{"customer\u2024get", "contains a non-ASCII character"},
		{"bell\x07", "contains a control character"},
		{".x", "starts or ends with a dot"},
		{"x.", "starts or ends with a dot"},
		{"a..b", "empty segment"},
		{strings.Repeat("x", 128-len("mcp.srv.")), ""},
		{strings.Repeat("x", 128-len("mcp.srv.")+1), "longer than 128 bytes"},
	} {
		got := nameProblem("srv", c.tool)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("nameProblem(%q) = %q, want %q", c.tool, got, c.want)
		}
	}
	if got := nameProblem("srv", "日本"); !strings.Contains(got, `"\u65e5\u672c"`) {
		t.Errorf("the name is not shown escaped: %s", got)
	}
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 16}
	b.Write([]byte("line one\nline two\n"))
	b.Write([]byte("line three\n"))
	// 29 bytes written, 16 kept: "ne two\nline three\n" minus the cut line.
	if got := string(b.Bytes()); got != "line three\n" {
		t.Errorf("Bytes = %q", got)
	}
	b = &tailBuffer{max: 8}
	b.Write([]byte(strings.Repeat("z", 100)))
	if got := string(b.Bytes()); got != "" {
		// One long cut line: none of it is kept (its cut start could be
		// the end of a secret that redaction no longer recognises).
		t.Errorf("Bytes = %q", got)
	}
	var lines []string
	for i := range 30 {
		lines = append(lines, "l"+strings.Repeat("-", i))
	}
	got := tailLines([]byte(strings.Join(lines, "\r\n")+"\n\n\x1b[31mred\x1b[0m\n"), 3)
	if want := lines[28] + "\n" + lines[29] + "\n\uFFFD[31mred\uFFFD[0m"; got != want {
		t.Errorf("tailLines = %q, want %q", got, want)
	}
}

func TestStdoutSniffer(t *testing.T) {
	for _, c := range []struct {
		chunks []string
		want   string
	}{
		{[]string{`{"jsonrpc":"2.0"}` + "\n", ` [{"a":1}]` + "\n"}, ""},
		{[]string{"\r\n", "  {}\n"}, ""},
		{[]string{"{}\n", "hel", "lo world\n{}\n"}, "hello world"},
		{[]string{"Server running on stdio\n"}, "Server running on stdio"},
		{[]string{strings.Repeat("x", maxKept+100) + "\n"}, strings.Repeat("x", maxKept)},
		{[]string{`{"a":"b`, "\n", "c\"}\n"}, `c"}`},
	} {
		s := newStdoutSniffer(nil)
		for _, ch := range c.chunks {
			s.scan([]byte(ch))
		}
		if got := string(s.nonJSON()); got != c.want {
			t.Errorf("%q: nonJSON = %q, want %q", c.chunks, got, c.want)
		}
		select {
		case <-s.badCh:
			if c.want == "" {
				t.Errorf("%q: signalled", c.chunks)
			}
		default:
			if c.want != "" {
				t.Errorf("%q: not signalled", c.chunks)
			}
		}
	}
}

func TestGateBody(t *testing.T) {
	const result = `{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}`
	resp := `{"jsonrpc":"2.0","id":7,"result":` + result + `}`
	req, _ := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
	for _, c := range []struct {
		name string
		sse  bool
		body string
	}{
		{"json", false, resp},
		{"sse", true, "event: message\nid: 1\ndata: " + resp + "\n\n"},
		{"sse-crlf-multiline", true, ": comment\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\r\n\r\ndata: " + resp[:17] + "\r\ndata: " + resp[17:] + "\r\n\r\n"},
	} {
		cap := &listCapture{}
		cap.reset()
		cap.sent(context.Background(), req)
		// Byte by byte: the hardest split.
		b := &gateBody{ReadCloser: io.NopCloser(iotest.OneByteReader(strings.NewReader(c.body))), cap: cap, guard: &wireGuard{}, sse: c.sse}
		out, err := io.ReadAll(b)
		if err != nil || string(out) != c.body {
			t.Errorf("%s: handed on %q, %v; want the body unchanged", c.name, out, err)
		}
		got := cap.take()
		// Multi-line data joins with "\n", which is JSON whitespace.
		if !bytes.Equal(bytes.ReplaceAll(got, []byte("\n"), nil), []byte(result)) {
			t.Errorf("%s: captured %q", c.name, got)
		}
	}
}

func TestHints(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		ann  string
		want hints
	}{
		{`{}`, hints{}},
		{`{"readOnlyHint":true}`, hints{readOnly: &yes}},
		{`{"readOnlyHint":false,"destructiveHint":true}`, hints{readOnly: &no, destructive: &yes}},
		{`{"readOnlyHint":null,"destructiveHint":"true"}`, hints{}},
		{`{"readonlyhint":true}`, hints{}},
	} {
		var m map[string]jsontext.Value
		if err := jsonUnmarshal([]byte(c.ann), &m); err != nil {
			t.Fatal(err)
		}
		got := hintsFromWire(m)
		if boolStr(got.readOnly) != boolStr(c.want.readOnly) || boolStr(got.destructive) != boolStr(c.want.destructive) {
			t.Errorf("%s: readOnly %s destructive %s", c.ann, boolStr(got.readOnly), boolStr(got.destructive))
		}
	}
}

func boolStr(b *bool) string {
	switch {
	case b == nil:
		return "nil"
	case *b:
		return "true"
	}
	return "false"
}

func TestRedactor(t *testing.T) {
	cfg := ServerConfig{
		Name:    "x",
		URL:     "https://user:pa55word-xyz@mcp.example/v1?key=query-secret&x=1",
		Headers: map[string]string{"Authorization": "Bearer tok-123456789", "X-Short": "abc"},
	}
	r := redactor{secrets: cfg.secrets(), url: cfg.URL}
	got := r.redact(`Post "` + cfg.URL + `": failed; token tok-123456789; pass pa55word-xyz; q query-secret; abc`)
	for _, leak := range []string{"tok-123456789", "pa55word-xyz", "query-secret"} {
		if strings.Contains(got, leak) {
			t.Errorf("%q leaks %q", got, leak)
		}
	}
	if !strings.Contains(got, `Post "https://mcp.example/v1"`) || !strings.HasSuffix(got, "; abc") {
		t.Errorf("redacted: %q", got)
	}
}

func jsonUnmarshal(b []byte, v any) error { return jsonv2.Unmarshal(b, v) }

// TestNonJSONLineRedactedBeforeCut: a secret on a non-JSON stdout line is
// redacted whole before the line is cut for display, so its first bytes
// never show.
func TestNonJSONLineRedactedBeforeCut(t *testing.T) {
	secret := "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0ffee"
	red := redactor{secrets: []string{secret}}
	got := quoteBytes([]byte(red.redact("key=" + secret + " trailing text")))
	if strings.Contains(got, secret[:8]) {
		t.Fatalf("message shows part of the secret: %s", got)
	}
	if !strings.Contains(got, "[redacted]") {
		t.Fatalf("message = %s, want the redaction marker", got)
	}
}

// TestTailDropsCutLine: a stderr tail whose first line lost its start
// (the ring overflowed) does not show that line at all.
func TestTailDropsCutLine(t *testing.T) {
	b := &tailBuffer{max: 16}
	b.Write([]byte("TOKENSECRETVALUE1234567890 and more on the same line"))
	if got := string(b.Bytes()); got != "" {
		t.Fatalf("tail of one overflowing line = %q, want nothing", got)
	}
	b.Write([]byte("\nlast\n"))
	if got := string(b.Bytes()); got != "last\n" {
		t.Fatalf("tail = %q, want the last whole line", got)
	}
}
