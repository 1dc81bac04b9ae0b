package mcphost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// stricter are messages go-sdk's jsonrpc.DecodeMessage reads and the
// stdio transport refuses, with what its error says.
var stricter = []struct{ msg, want string }{
	{`{"jsonrpc":"2.0","id":1.5,"result":{}}`, "not an integer"},
	{`{"jsonrpc":"2.0","id":-0.25,"result":{}}`, "not an integer"},
	{`{"jsonrpc":"2.0","id":1e300,"result":{}}`, "not an integer"},
	{`{"jsonrpc":"2.0","id":9007199254740993,"result":{}}`, "not an integer"},
	{`{"jsonrpc":"2.0","id":1,"method":null}`, "its method is null"},
	{`{"jsonrpc":"2.0","id":1,"error":{"message":"no code"}}`, "its error code is absent"},
}

// decodeCorpus is hand-picked messages, each one strict JSON object.
var decodeCorpus = []string{
	`{"jsonrpc":"2.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":0,"result":null}`,
	`{"jsonrpc":"2.0","id":-7,"result":{"content":[{"type":"text","text":"a\nb"}]}}`,
	`{"jsonrpc":"2.0","id":2.0,"result":{}}`,
	`{"jsonrpc":"2.0","id":1e3,"result":{}}`,
	`{"jsonrpc":"2.0","id":"abc","result":{ "spaced" : [ 1 , 2 ] }}`,
	`{"jsonrpc":"2.0","id":"a\u0000\"b","result":{}}`,
	`{"jsonrpc":"2.0","id":"","result":{}}`,
	`{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found"}}`,
	`{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"x","data":{"why":[1,"two"]}}}`,
	`{"jsonrpc":"2.0","id":3,"error":null,"result":{}}`,
	`{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m"},"result":{}}`,
	`{"jsonrpc":"2.0","id":4,"result":{},"extra":true}`,
	`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
	`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`,
	`{"jsonrpc":"2.0","id":5,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":"s1","method":"roots/list","params":{}}`,
	`{"jsonrpc":"2.0","id":5,"method":"","params":null}`,
	`{"jsonrpc":"2.0","id":null,"method":"x"}`,
	`{"jsonrpc":"2.0","method":"x","params":[1,2]}`,
	// Refused by both.
	`{"jsonrpc":"1.0","id":1,"result":{}}`,
	`{"id":1,"result":{}}`,
	`{"jsonrpc":2,"id":1,"result":{}}`,
	`{"jsonrpc":"2.0","result":{}}`,
	`{"jsonrpc":"2.0","id":null,"result":{}}`,
	`{"jsonrpc":"2.0","id":true,"result":{}}`,
	`{"jsonrpc":"2.0","id":{},"result":{}}`,
	`{"jsonrpc":"2.0","id":[1],"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":5}`,
	`{"jsonrpc":"2.0","id":1,"method":{}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":7}}`,
	`{"jsonrpc":"2.0","id":1,"error":[]}`,
}

// randomValue is a random JSON value of depth at most d.
func randomValue(r *rand.Rand, d int) string {
	switch k := r.IntN(8); {
	case d <= 0 || k < 2:
		return []string{`0`, `-1`, `1.5`, `1e5`, `true`, `false`, `null`, `""`, `"x"`, `"\u00e9\n\""`, `12345678901234567890`}[r.IntN(11)]
	case k < 5:
		var parts []string
		for i := range r.IntN(4) {
			parts = append(parts, fmt.Sprintf(`"m%d"%s:%s`, i, []string{"", " "}[r.IntN(2)], randomValue(r, d-1)))
		}
		return "{" + strings.Join(parts, ",") + "}"
	default:
		var parts []string
		for range r.IntN(4) {
			parts = append(parts, randomValue(r, d-1))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
}

// randomMessage is a random message-like object: members of JSON-RPC,
// some missing, some of the wrong type.
func randomMessage(r *rand.Rand) string {
	var parts []string
	add := func(name string, values ...string) {
		if r.IntN(5) > 0 {
			parts = append(parts, fmt.Sprintf(`"%s":%s`, name, values[r.IntN(len(values))]))
		}
	}
	add("jsonrpc", `"2.0"`, `"2.0"`, `"2.0"`, `"2"`, `2`, `null`)
	add("id", `1`, `42`, `-3`, `"a"`, `"7"`, `null`, `2.0`, `true`, randomValue(r, 1))
	if r.IntN(2) == 0 {
		add("method", `"tools/call"`, `"ping"`, `""`, `3`, randomValue(r, 1))
		add("params", randomValue(r, 3), `{}`, `null`)
	} else {
		add("result", randomValue(r, 3), `{"content":[]}`, `null`)
		add("error", `{"code":-32000,"message":"m"}`, `{"code":1,"message":"m","data":`+randomValue(r, 2)+`}`, `null`, randomValue(r, 1))
	}
	r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	return "{" + strings.Join(parts, ",") + "}"
}

// decodeMessage reads what go-sdk's jsonrpc.DecodeMessage reads, message
// for message, except for the stricter cases: every message of the corpus
// and 20,000 random ones that checkMessage accepts decode to equal
// messages, or both are refused.
func TestDecodeMessageMatchesSDK(t *testing.T) {
	msgs := append([]string(nil), decodeCorpus...)
	r := rand.New(rand.NewPCG(7, 11))
	for range 20000 {
		msgs = append(msgs, randomMessage(r))
	}
	agreed, refused := 0, 0
	for _, m := range msgs {
		if checkMessage([]byte(m), redactor{}) != "" {
			continue
		}
		ours, err := decodeMessage([]byte(m))
		theirs, sdkErr := jsonrpc.DecodeMessage([]byte(m))
		switch {
		case err != nil && sdkErr != nil:
			refused++
		case err != nil:
			if !isStricter(m, err) {
				t.Errorf("%s: refused (%v); go-sdk reads %#v", m, err, theirs)
			}
		case sdkErr != nil:
			t.Errorf("%s: read as %#v; go-sdk refuses it (%v)", m, ours, sdkErr)
		case !reflect.DeepEqual(ours, theirs):
			t.Errorf("%s:\nread as  %#v\ngo-sdk's %#v", m, ours, theirs)
		default:
			agreed++
		}
	}
	for _, c := range stricter {
		if _, err := jsonrpc.DecodeMessage([]byte(c.msg)); err != nil {
			t.Errorf("%s: go-sdk refuses it too (%v); not a stricter case", c.msg, err)
		}
		if _, err := decodeMessage([]byte(c.msg)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.msg, err, c.want)
		}
	}
	if agreed < 2000 || refused < 2000 {
		t.Errorf("only %d messages read alike and %d refused by both: the corpus does not test much", agreed, refused)
	}
}

// isStricter reports whether m is refused on purpose: a fractional or
// out-of-range id, a null method, an error without a code.
func isStricter(m string, err error) bool {
	s := err.Error()
	return strings.Contains(s, "is not an integer") || strings.Contains(s, "its method is null") ||
		strings.Contains(s, "its error code is absent")
}

// Messages split across reads, blank lines, CRLF endings and a last line
// without a newline all arrive whole; a line over maxCapture is a
// violation that ends the stream.
func TestStdioLines(t *testing.T) {
	msg := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"n":"%s"}}`, id, strings.Repeat("x", id*1000))
	}
	stream := msg(1) + "\n\n  \r\n" + msg(2) + "\r\n" + msg(30) + "\n" + msg(3)
	conn := newStdioConn(io.NopCloser(&trickle{b: []byte(stream)}), nopWriteCloser{}, &wireGuard{})
	for _, want := range []int64{1, 2, 30, 3} {
		m, err := conn.Read(context.Background())
		if err != nil {
			t.Fatalf("message %d: %v", want, err)
		}
		resp, ok := m.(*jsonrpc.Response)
		if !ok || resp.ID.Raw() != want || len(resp.Result) < int(want)*1000 {
			t.Fatalf("message %d: read %#v", want, m)
		}
	}
	if _, err := conn.Read(context.Background()); !errors.Is(err, io.EOF) {
		t.Errorf("at the end: %v, want io.EOF", err)
	}

	long := `{"jsonrpc":"2.0","id":1,"result":{"n":"` + strings.Repeat("y", maxCapture) + `"}}` + "\n"
	conn = newStdioConn(io.NopCloser(bytes.NewReader([]byte(long))), nopWriteCloser{}, &wireGuard{})
	_, err := conn.Read(context.Background())
	if err == nil || !strings.Contains(err.Error(), "longer than") || !errors.Is(err, ErrProtocol) {
		t.Fatalf("a line over the limit: %v", err)
	}
	if cap(conn.buf) > 2*maxCapture+minStdioBuffer {
		t.Errorf("the buffer grew to %d bytes", cap(conn.buf))
	}
}

// trickle hands out its bytes a few at a time.
type trickle struct{ b []byte }

func (t *trickle) Read(p []byte) (int, error) {
	if len(t.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(t.b), 777)
	copy(p, t.b[:n])
	t.b = t.b[n:]
	return n, nil
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }

// FuzzStdioRead: any byte stream from a server reads as messages that
// go-sdk would read alike, then io.EOF or an error; never a panic or a
// hang.
func FuzzStdioRead(f *testing.F) {
	for _, m := range decodeCorpus {
		f.Add([]byte(m + "\n" + m))
	}
	f.Add([]byte("\r\n\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n[1]\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		conn := newStdioConn(io.NopCloser(&trickle{b: stream}), nopWriteCloser{}, &wireGuard{})
		for range len(stream) + 1 {
			m, err := conn.Read(context.Background())
			if err != nil {
				return
			}
			if m == nil {
				t.Fatal("a nil message without an error")
			}
		}
		t.Fatal("more messages than lines")
	})
}

// A value an error shows is shown whole or described, never cut: a
// secret in it is then either redacted whole or not shown.
func TestDecodeErrorShowsValuesWholeOrNot(t *testing.T) {
	secret := "sk_live_" + strings.Repeat("9", 48)
	red := redactor{secrets: []string{secret}}
	for _, m := range []string{
		`{"jsonrpc":"` + secret + `","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":["` + secret + `"]}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":"` + secret + `","message":"m"}}`,
	} {
		_, err := decodeMessage([]byte(m))
		if err == nil {
			t.Fatalf("%s: read", m)
		}
		msg := red.redact(err.Error())
		if strings.Contains(msg, secret[:12]) {
			t.Errorf("%s: the error shows part of the secret: %s", m, msg)
		}
	}
}
