package mcphost

import (
	stdjson "encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestCheckMessage(t *testing.T) {
	many := func(extra string) string {
		var b strings.Builder
		b.WriteString(`{"jsonrpc":"2.0","id":1,"result":{`)
		for i := range 40 {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		b.WriteString(extra + `}}`)
		return b.String()
	}
	for _, c := range []struct{ msg, want string }{
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, ""},
		{"  {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n", ""},
		{`{"jsonrpc":"2.0","id":1,"result":{"a":{"x":1},"b":{"x":2},"A":"a","c":["a","A"]}}`, "differ only by case"},
		{`{"jsonrpc":"2.0","id":1,"result":{"x":{"Name":1},"y":{"name":1}}}`, ""},
		{`{"jsonrpc":"2.0","id":1,"result":{"s":"\ud83d\ude00 \u00e9 \/"}}`, ""},
		{`{"jsonrpc":"2.0","id":1,"result":{"n":12345678901234567890,"f":1e400}}`, ""},
		{many(`"k39x":1`), ""},
		{many(`"K7":1`), "differ only by case"},
		{`[{"jsonrpc":"2.0","id":1,"result":{}}]`, "batch"},
		{` [{"jsonrpc":"2.0","id":1,"result":{}}]`, "batch"},
		{`"just a string"`, "not a JSON object"},
		{`42`, "not a JSON object"},
		{``, "empty"},
		{`{"jsonrpc":"2.0","id":1,"result":{},"result":{}}`, "member name twice"},
		{`{"jsonrpc":"2.0","id":1,"result":{},"Result":{}}`, "differ only by case"},
		{`{"jsonrpc":"2.0","id":1,"ID":2,"result":{}}`, "differ only by case"},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","Type":"image"}]}}`, "differ only by case"},
		{`{"jsonrpc":"2.0","id":1,"result":{"s":1,"ſ":2}}`, "differ only by case"},      // long s folds to s
		{`{"jsonrpc":"2.0","id":1,"result":{"k":1,"\u212a":2}}`, "differ only by case"}, // the Kelvin sign, escaped
		{`{"jsonrpc":"2.0","id":1,"result":{"t":"a\ud800b"}}`, "lone surrogate"},
		{`{"jsonrpc":"2.0","id":1,"result":{"t":"a\udc00"}}`, "lone surrogate"},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\":\"a\xffb\"}}", "invalid UTF-8"},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"t\xc3\":1}}", "invalid UTF-8"},
		{`{"jsonrpc":"2.0","id":1,"result":{}}{"jsonrpc":"2.0","id":2,"result":{}}`, "more than one JSON value"},
		{`{"jsonrpc":"2.0","id":1,"result":{}} x`, "more than one JSON value"},
		{`{"jsonrpc":"2.0","id":1,"result":{`, "incomplete"},
		{`{"jsonrpc":"2.0",'id':1}`, "invalid JSON"},
		// The message's object is level 1: 9999 arrays in it are 10000.
		{`{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + `}`, ""},
		{`{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`, "nested deeper than 10000 levels"},
		{`{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth) + `}`, "nested deeper than 10000 levels"},
		{`{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("[", 2*MaxDepth) + `"}`, ""},
	} {
		got := checkMessage([]byte(c.msg), redactor{})
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%.120q: %q, want %q", c.msg, got, c.want)
		}
	}
}

// TestCheckMessageRedacts: member names that hold a configured secret
// are redacted in the description.
func TestCheckMessageRedacts(t *testing.T) {
	const secret = "tok-Secret-123456"
	got := checkMessage([]byte(`{"jsonrpc":"2.0","id":1,"result":{"`+secret+`":1,"`+strings.ToUpper(secret)+`":2}}`), redactor{secrets: []string{secret, strings.ToUpper(secret)}})
	if strings.Contains(strings.ToLower(got), strings.ToLower(secret)) || !strings.Contains(got, "[redacted]") {
		t.Fatalf("description = %q", got)
	}
}

func BenchmarkCheckMessage(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`)
	sb.WriteString(strings.Repeat("lorem ipsum ", 1000))
	sb.WriteString(`"}],"structuredContent":{"items":[`)
	for i := range 500 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"id":%d,"name":"item %d","price":%d.99,"tags":["a","b"]}`, i, i, i)
	}
	sb.WriteString(`]}}}`)
	msg := []byte(sb.String())
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if got := checkMessage(msg, redactor{}); got != "" {
			b.Fatal(got)
		}
	}
}

// TestResultJSONDecoded: without the server's text, decoded content is
// refused where a float64 may have changed a number.
func TestResultJSONDecoded(t *testing.T) {
	for _, c := range []struct {
		sc   any
		want string // the JSON, or "refused"
	}{
		{map[string]any{"n": 1.5, "b": []any{float64(1 << 52), "x"}}, `{"b":[4503599627370496,"x"],"n":1.5}`},
		{map[string]any{"n": 12345678901234567890.0}, "refused"},
		{map[string]any{"n": []any{-float64(1 << 53)}}, "refused"},
		{stdjson.RawMessage(` {"n": 12345678901234567890} `), `{"n":12345678901234567890}`},
		{jsontext.Value(`{"b":1,"a":2}`), `{"b":1,"a":2}`},
		{stdjson.RawMessage(`{"n":`), "refused"},
	} {
		got, err := ResultJSON(&mcp.CallToolResult{StructuredContent: c.sc})
		if c.want == "refused" {
			if err == nil {
				t.Errorf("%v: %s; want refused", c.sc, got)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%v: %s, %v; want %s", c.sc, got, err, c.want)
		}
	}
	// Text content that is JSON keeps its numbers and member order.
	got, err := ResultJSON(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{ \"z\": 1, \"a\": 98765432109876543210 }"}}})
	if err != nil || string(got) != `{"z":1,"a":98765432109876543210}` {
		t.Errorf("text: %s, %v", got, err)
	}
	// Text with a duplicate name is not JSON to this: it stays a string.
	got, err = ResultJSON(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"a":1,"a":2}`}}})
	if err != nil || string(got) != `"{\"a\":1,\"a\":2}"` {
		t.Errorf("duplicate text: %s, %v", got, err)
	}
}
