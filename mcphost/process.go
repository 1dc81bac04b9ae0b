package mcphost

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	// stderrKeep is how much of a server's stderr is kept: the tail of the
	// stream, for error messages.
	stderrKeep = 4 << 10
	// stderrLines is how many of the kept lines a message shows.
	stderrLines = 20
	// closeGrace is how long Close waits for a server to exit after its
	// stdin is closed, and again after SIGTERM, before killing it.
	closeGrace = time.Second
	// exitGrace is how long a failed start waits for a server whose stdout
	// ended to exit by itself (so its exit status and last stderr lines can
	// be reported) before it is killed.
	exitGrace = 500 * time.Millisecond
	// waitDelay bounds how long reaping a server waits for its stderr to
	// close (a grandchild may hold it open).
	waitDelay = time.Second
)

// process is a started stdio server.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File // our end of the server's stdin
	stdout *stdoutSniffer
	stderr *tailBuffer

	done    chan struct{} // closed when the process is reaped
	waitErr error         // cmd.Wait's result, set before done is closed

	killOnce sync.Once
}

// startProcess starts cfg's command with its stdin and stdout on pipes
// and its stderr in a bounded tail buffer. The process is in its own
// process group (where the platform has them), so killing it kills what
// it started.
func startProcess(cfg *ServerConfig) (*process, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	cmd.Env = cfg.environ()
	cmd.Dir = cfg.Dir
	cmd.WaitDelay = waitDelay
	setProcAttr(cmd)

	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, err
	}
	p := &process{
		cmd:    cmd,
		stdin:  stdinW,
		stdout: newStdoutSniffer(stdoutR),
		stderr: &tailBuffer{max: stderrKeep},
		done:   make(chan struct{}),
	}
	cmd.Stdin = stdinR
	cmd.Stdout = stdoutW
	cmd.Stderr = p.stderr
	err = cmd.Start()
	// The child has its own copies now (or never will).
	stdinR.Close()
	stdoutW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		return nil, err
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has been reaped.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitDescription says how the process ended, e.g. "exit status 3"; ""
// while it runs.
func (p *process) exitDescription() string {
	if !p.exited() {
		return ""
	}
	if st := p.cmd.ProcessState; st != nil {
		return st.String()
	}
	if p.waitErr != nil {
		return p.waitErr.Error()
	}
	return "exited"
}

// kill kills the process group at once and reaps the process.
func (p *process) kill() {
	p.killOnce.Do(func() {
		killGroup(p.cmd, true)
	})
	<-p.done
	killGroup(p.cmd, true) // leftovers of the group, if any
}

// stop ends the process the way the MCP stdio transport asks: stdin is
// closed (by the caller, through the connection), then the process gets
// closeGrace to exit, then SIGTERM and closeGrace more, then SIGKILL. The
// rest of its process group is killed in any case.
func (p *process) stop() {
	p.stdin.Close()
	select {
	case <-p.done:
		killGroup(p.cmd, true)
		return
	case <-time.After(closeGrace):
	}
	killGroup(p.cmd, false)
	select {
	case <-p.done:
		killGroup(p.cmd, true)
		return
	case <-time.After(closeGrace):
	}
	p.kill()
}

// transport returns the MCP transport over the process's stdin and
// stdout, each line of which guard checks before go-sdk reads it. Closing
// its connection closes both pipes (not the process).
func (p *process) transport(guard *wireGuard) mcp.Transport {
	return &stdioTransport{r: p.stdout, w: p.stdin, guard: guard}
}

// stderrTail returns the last lines of the process's stderr, safe to show
// in a message: at most stderrLines lines, control characters and invalid
// UTF-8 replaced.
func (p *process) stderrTail() string {
	return tailLines(p.stderr.Bytes(), stderrLines)
}

// tailBuffer keeps the last max bytes written to it. It is safe for
// concurrent use.
type tailBuffer struct {
	mu        sync.Mutex
	max       int
	buf       []byte
	truncated bool // bytes were dropped from the front
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if len(p) >= b.max {
		p = p[len(p)-b.max:]
		b.buf = append(b.buf[:0], p...)
		b.truncated = true
		return n, nil
	}
	if over := len(b.buf) + len(p) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.truncated = true
	}
	b.buf = append(b.buf, p...)
	return n, nil
}

// Bytes returns a copy of the kept tail. When bytes were dropped, the
// first (partial) line is dropped too.
func (b *tailBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.buf
	if b.truncated {
		// The first line lost its beginning: drop it whole, so the end of
		// a secret cut there is never shown.
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			out = out[i+1:]
		} else {
			out = nil // one endless line: nothing of it is shown
		}
	}
	return append([]byte(nil), out...)
}

// tailLines returns the last n non-empty lines of b, cleaned for display.
func tailLines(b []byte, n int) string {
	text := strings.ToValidUTF8(string(b), "\uFFFD")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, cleanLine(l))
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// cleanLine replaces control characters (terminal escapes included) with
// U+FFFD; tabs stay.
func cleanLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' {
			return r
		}
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '\u2028' || r == '\u2029' || r == '\u200e' || r == '\u200f' ||
			r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069' {
			return utf8.RuneError
		}
		return r
	}, s)
}

// stdoutSniffer passes a server's stdout through and notices a line that
// does not start like a JSON-RPC message ('{' or '['), such as a log line
// a server printed to stdout by mistake. The MCP stdio transport allows
// nothing but messages there.
type stdoutSniffer struct {
	r io.ReadCloser

	mu         sync.Mutex
	lineStart  bool   // the next byte starts a line
	collecting bool   // bad is being filled
	bad        []byte // the first bytes of the first non-JSON line
	badCh      chan struct{}
}

// maxShown is how many bytes of a non-JSON line a message shows;
// maxKept is how many are kept, so that a secret in the line is redacted
// whole before the line is cut for display.
const (
	maxShown = 64
	maxKept  = 4096
)

func newStdoutSniffer(r io.ReadCloser) *stdoutSniffer {
	return &stdoutSniffer{r: r, lineStart: true, badCh: make(chan struct{})}
}

func (s *stdoutSniffer) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.scan(p[:n])
	}
	return n, err
}

func (s *stdoutSniffer) Close() error { return s.r.Close() }

func (s *stdoutSniffer) scan(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := false
	for len(p) > 0 {
		if s.collecting {
			// The rest of the first non-JSON line, up to maxKept bytes.
			line := p
			nl := bytes.IndexByte(p, '\n')
			if nl >= 0 {
				line = p[:nl]
			}
			if room := maxKept - len(s.bad); len(line) >= room {
				line = line[:room]
				s.collecting = false
			}
			s.bad = append(s.bad, line...)
			if nl < 0 {
				break
			}
			s.collecting = false
			p = p[nl:]
		}
		if !s.lineStart {
			// Only the start of the next line matters: skip to it (most
			// of the stream is message bodies, skipped this way).
			nl := bytes.IndexByte(p, '\n')
			if nl < 0 {
				break
			}
			p = p[nl:]
		}
		c := p[0]
		p = p[1:]
		switch c {
		case '\n':
			s.lineStart = true
		case ' ', '\t', '\r':
			// Blanks before the first byte of a line (s.lineStart holds).
		case '{', '[':
			s.lineStart = false
		default:
			if s.bad == nil {
				s.bad = []byte{c}
				s.collecting = true
				found = true
			}
			s.lineStart = false
		}
	}
	if found {
		close(s.badCh)
	}
}

// nonJSON returns the first bytes of the first non-JSON line the server
// wrote, or nil.
func (s *stdoutSniffer) nonJSON() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.bad...)
}

// errServerExited and errNonJSON cancel a start-up early.
var (
	errServerExited = errors.New("server exited")
	errNonJSON      = errors.New("server wrote non-JSON to stdout")
)

// watch cancels ctx (with cause errServerExited or errNonJSON) as soon as
// the process exits or writes non-JSON to stdout, so a start-up does not
// wait for its timeout. It returns a function that stops watching.
func (p *process) watch(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	quit := make(chan struct{})
	go func() {
		select {
		case <-p.done:
			cancel(errServerExited)
		case <-p.stdout.badCh:
			cancel(errNonJSON)
		case <-ctx.Done():
		case <-quit:
		}
	}()
	return func() { close(quit) }
}
