package mcphost

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// chunks hands out its bytes n at a time, counting the reads.
type chunks struct {
	b     []byte
	n     int
	reads int
	eof   bool // io.EOF comes with the last bytes
}

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	c.reads++
	n := min(len(p), len(c.b), c.n)
	copy(p, c.b[:n])
	c.b = c.b[n:]
	if len(c.b) == 0 && c.eof {
		return n, io.EOF
	}
	return n, nil
}

// sized returns a response message of exactly n bytes.
func sized(t *testing.T, n int) string {
	t.Helper()
	head, tail := `{"jsonrpc":"2.0","id":1,"result":{"n":"`, `"}}`
	m := head + strings.Repeat("y", n-len(head)-len(tail)) + tail
	if len(m) != n {
		t.Fatalf("built %d bytes, want %d", len(m), n)
	}
	return m
}

// A message of exactly maxCapture bytes is within the limit ("a message
// over 16 MiB" is refused), whatever ends its line; one byte more is
// refused, also as the last line of the stream, without a newline.
func TestStdioLimitBoundary(t *testing.T) {
	for _, end := range []string{"\n", "\r\n", ""} {
		conn := newStdioConn(io.NopCloser(strings.NewReader(sized(t, maxCapture)+end)), nopWriteCloser{}, &wireGuard{})
		m, err := conn.Read(context.Background())
		if err != nil {
			t.Errorf("a message of exactly %d bytes, line ending %q: %v", maxCapture, end, err)
		} else if _, ok := m.(*jsonrpc.Response); !ok {
			t.Errorf("read %T", m)
		}
		conn = newStdioConn(io.NopCloser(strings.NewReader(sized(t, maxCapture+1)+end)), nopWriteCloser{}, &wireGuard{})
		if _, err := conn.Read(context.Background()); err == nil || !strings.Contains(err.Error(), "longer than") {
			t.Errorf("a message of %d bytes, line ending %q: %v; want it refused as too long", maxCapture+1, end, err)
		}
	}
	// The last line, with no newline, cannot go over the limit by a read's
	// worth of bytes either (the read that brings them also says io.EOF).
	src := &chunks{b: []byte(sized(t, maxCapture+minStdioBuffer)), n: 1 << 30, eof: true}
	conn := newStdioConn(io.NopCloser(src), nopWriteCloser{}, &wireGuard{})
	if _, err := conn.Read(context.Background()); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("a last line of %d bytes: %v; want it refused as too long", maxCapture+minStdioBuffer, err)
	}
}

// A server that drips a long line a few bytes at a time costs the reader
// time in proportion to the line, not to its square: each byte is
// searched for the newline once.
func TestStdioSlowDripLinear(t *testing.T) {
	src := &chunks{b: []byte(sized(t, maxCapture) + "\n"), n: 64}
	conn := newStdioConn(io.NopCloser(src), nopWriteCloser{}, &wireGuard{})
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := conn.Read(context.Background())
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d reads in %v", src.reads, time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatalf("reading a %d-byte line in %d-byte pieces takes over 10s (%d reads so far): quadratic", maxCapture, src.n, src.reads)
	}
}

// A Read waiting on a server ends when the connection is closed, with
// io.EOF, whether the server sent nothing or is midway through a line;
// that partial line is not a message, and not a protocol violation: the
// server stays healthy.
func TestStdioCloseEndsRead(t *testing.T) {
	for _, partial := range []string{"", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"te`} {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pw.Close()
		_, stdin, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		g := &wireGuard{}
		conn, err := (&stdioTransport{r: pr, w: stdin, guard: g}).Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pw.Write([]byte(partial)); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := conn.Read(context.Background())
			done <- err
		}()
		time.Sleep(50 * time.Millisecond)
		conn.Close()
		select {
		case err := <-done:
			if !errors.Is(err, io.EOF) {
				t.Errorf("partial line %q: Read after Close = %v, want io.EOF", partial, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("partial line %q: Read still waits after Close", partial)
		}
		if v := g.violation(); v != nil {
			t.Errorf("partial line %q: closing recorded a violation: %v", partial, v)
		}
	}
}

// Concurrent Writes each put one whole line on the pipe; Close racing
// them and a pending Read ends them all.
func TestStdioConcurrentWritesAndClose(t *testing.T) {
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdoutW.Close()
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	conn := newStdioConn(stdoutR, stdinW, &wireGuard{})
	const writers, each = 8, 50
	lines := make(chan []byte, writers*each)
	go func() {
		// The peer reads the messages, then nothing more (stdinR stays
		// open).
		defer close(lines)
		peer := newStdioConn(stdinR, nopWriteCloser{}, &wireGuard{})
		for range writers * each {
			m, err := peer.Read(context.Background())
			if err != nil {
				return
			}
			b, _ := jsonrpc.EncodeMessage(m)
			lines <- b
		}
	}()
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range each {
				id, _ := jsonrpc.MakeID(float64(w*1000 + i))
				big := `{"pad":"` + strings.Repeat("p", (w*7919+i*104729)%100000) + `"}`
				if err := conn.Write(context.Background(), &jsonrpc.Request{ID: id, Method: "m", Params: []byte(big)}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for range writers * each {
		if _, ok := <-lines; !ok {
			break
		}
		n++
	}
	if n != writers*each {
		t.Errorf("the peer read %d whole messages, want %d", n, writers*each)
	}
	readDone := make(chan error, 1)
	go func() {
		_, err := conn.Read(context.Background())
		readDone <- err
	}()
	writeDone := make(chan error, 1)
	go func() {
		// More than the pipe holds, which nobody reads any more.
		writeDone <- conn.Write(context.Background(), &jsonrpc.Request{Method: "m", Params: []byte(`"` + strings.Repeat("z", 1<<20) + `"`)})
	}()
	time.Sleep(20 * time.Millisecond)
	go conn.Close()
	conn.Close()
	for name, ch := range map[string]chan error{"Read": readDone, "Write": writeDone} {
		select {
		case err := <-ch:
			if name == "Write" && err == nil {
				t.Error("a Write cut short by Close reported success")
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s still waits after Close", name)
		}
	}
}
