package mcphost_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/mcphost"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
)

// nodeScript is a config running a node one-liner that first writes its
// pid to a file, so the test can check the process is gone.
func nodeScript(t *testing.T, name, script string) (mcphost.ServerConfig, string) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "pid")
	return mcphost.ServerConfig{
		Name:    name,
		Command: mcptest.Node(t),
		Args:    []string{"-e", "require('fs').writeFileSync(process.env.PIDFILE, String(process.pid));" + script},
		Env:     map[string]string{"PIDFILE": pidFile},
	}, pidFile
}

// assertGone checks that the process whose pid is in pidFile has exited
// and been reaped.
func assertGone(t *testing.T, pidFile string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		return
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Errorf("the server wrote no pid file: %v", err)
		return
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 {
		t.Errorf("bad pid %q", b)
		return
	}
	// A grandchild is not ours to reap: give the kernel a moment to finish
	// killing it.
	for start := time.Now(); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 2*time.Second {
			t.Errorf("process %d is still there", pid)
			return
		}
	}
}

// alive reports whether process pid exists and is not a zombie. (A killed
// grandchild is reparented to pid 1, which in a container may never reap
// it: a zombie has ended all the same.)
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		// pid (comm) state ...
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return false
		}
	}
	return true
}

// fail connects to cfg, which must fail within max, and returns the
// error.
func fail(t *testing.T, cfg mcphost.ServerConfig, max time.Duration) *mcphost.Error {
	t.Helper()
	start := time.Now()
	s, err := mcphost.Connect(context.Background(), cfg)
	d := time.Since(start)
	if err == nil {
		s.Close()
		t.Fatalf("Connect succeeded")
	}
	t.Logf("after %v: %v", d.Round(time.Millisecond), err)
	if d > max {
		t.Errorf("Connect took %v, want under %v", d, max)
	}
	var e *mcphost.Error
	if !errors.As(err, &e) {
		t.Fatalf("error is a %T, want *mcphost.Error", err)
	}
	if e.Server != cfg.Name {
		t.Errorf("Error.Server = %q", e.Server)
	}
	return e
}

func TestCommandNotFound(t *testing.T) {
	t.Parallel()
	e := fail(t, mcphost.ServerConfig{Name: "nope", Command: "no-such-mcp-server-command"}, time.Second)
	if e.Op != "start" || !strings.Contains(e.Error(), "no-such-mcp-server-command") || !errors.Is(e, exec.ErrNotFound) {
		t.Errorf("got %q (op %q)", e, e.Op)
	}
}

func TestServerExitsAtOnce(t *testing.T) {
	t.Parallel()
	cfg, pidFile := nodeScript(t, "boom", "console.error('starting'); console.error('boom'); process.exit(3)")
	cfg.Timeout = 20 * time.Second // the exit is reported at once, not at the timeout
	e := fail(t, cfg, 5*time.Second)
	if !strings.Contains(e.Stderr, "boom") || !strings.Contains(e.Error(), "boom") || !strings.Contains(e.Msg, "exit status 3") {
		t.Errorf("got %q", e)
	}
	// Each stderr line is a line of its own, indented: never one run-on
	// string.
	if e.Stderr != "starting\nboom" || !strings.HasSuffix(e.Error(), "; its stderr ends:\n\tstarting\n\tboom") {
		t.Errorf("stderr tail %q, error %q: want the lines starting and boom, each on a line after a tab", e.Stderr, e.Error())
	}
	assertGone(t, pidFile)
}

func TestServerWritesNonJSON(t *testing.T) {
	t.Parallel()
	cfg, pidFile := nodeScript(t, "chatty", "console.log('hello'); setInterval(()=>{},1000)")
	cfg.Timeout = 20 * time.Second // reported at once, not at the timeout
	e := fail(t, cfg, 5*time.Second)
	if want := `server wrote non-JSON to stdout: "hello"`; e.Msg != want {
		t.Errorf("Msg = %q, want %q", e.Msg, want)
	}
	assertGone(t, pidFile)
}

func TestServerNeverAnswers(t *testing.T) {
	t.Parallel()
	cfg, pidFile := nodeScript(t, "mute", "console.error('listening, maybe'); setInterval(()=>{},1000)")
	cfg.Timeout = time.Second
	// One second, plus slack for a loaded machine.
	e := fail(t, cfg, 3*time.Second)
	if e.Msg != "no answer within 1s" || !strings.Contains(e.Stderr, "listening, maybe") || !errors.Is(e, context.DeadlineExceeded) {
		t.Errorf("got %q", e)
	}
	assertGone(t, pidFile)
}

func TestGrandchildrenAreKilled(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("process groups are a unix feature")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	node := mcptest.Node(t)
	dir := t.TempDir()
	child := filepath.Join(dir, "child")
	// A shell that starts a background node (which holds stdout open),
	// records its pid, then becomes a server that never answers.
	script := `"$NODE" -e "require('fs').writeFileSync(process.env.CHILD, String(process.pid)); setInterval(()=>{},1000)" &
while [ ! -s "$CHILD" ]; do sleep 0.05; done
exec "$NODE" -e "require('fs').writeFileSync(process.env.PIDFILE, String(process.pid)); setInterval(()=>{},1000)"`
	cfg := mcphost.ServerConfig{
		Name: "family", Command: sh, Args: []string{"-c", script},
		Env: map[string]string{"NODE": node, "CHILD": child, "PIDFILE": filepath.Join(dir, "pid")},
		// Long enough for two node processes to start on a loaded 2-core
		// machine and write their pid files before the timeout fires.
		Timeout: 3 * time.Second,
	}
	fail(t, cfg, 8*time.Second)
	assertGone(t, filepath.Join(dir, "pid"))
	assertGone(t, child)
}

func TestCloseEndsServer(t *testing.T) {
	t.Parallel()
	// A real server, which exits when its stdin closes.
	s := connect(t, mcptest.EverythingServer(t, "everything"))
	pid := s.PID()
	if pid <= 0 {
		t.Fatalf("PID() = %d", pid)
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	t.Logf("Close took %v", time.Since(start))
	if runtime.GOOS != "windows" && alive(pid) {
		t.Errorf("process %d is still there after Close", pid)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestCloseKillsStubbornServer(t *testing.T) {
	t.Parallel()
	// A server that outlives its stdin and ignores SIGTERM: Close takes
	// the two grace periods, then kills it.
	cfg := rawServer(t, "stubborn", "[]")
	pidFile := filepath.Join(t.TempDir(), "pid")
	cfg.Env["STUBBORN"] = "1"
	cfg.Env["PIDFILE"] = pidFile
	s := connect(t, cfg)
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	d := time.Since(start)
	t.Logf("Close took %v", d)
	if d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
	assertGone(t, pidFile)
}

func TestSecretsStayOut(t *testing.T) {
	const secret = "sk-very-secret-123456"
	t.Setenv("MCPHOST_PARENT_ONLY", "inherited-secret-value")
	cfg, _ := nodeScript(t, "leaky", "console.error('token is ' + process.env.API_TOKEN); console.error('parent var: ' + (process.env.MCPHOST_PARENT_ONLY || 'unset')); console.error('path set: ' + !!process.env.PATH); process.exit(1)")
	cfg.Env["API_TOKEN"] = secret
	e := fail(t, cfg, 5*time.Second)
	msg := e.Error()
	if strings.Contains(msg, secret) || !strings.Contains(msg, "token is [redacted]") {
		t.Errorf("the error does not redact the secret: %q", msg)
	}
	// The parent's environment is not inherited, PATH is.
	if !strings.Contains(msg, "parent var: unset") || !strings.Contains(msg, "path set: true") {
		t.Errorf("environment: %q", msg)
	}
}

func TestBadConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  mcphost.ServerConfig
		want string
	}{
		{mcphost.ServerConfig{Name: "Acme", Command: "x"}, "invalid server name"},
		{mcphost.ServerConfig{Name: "https://acme.example", URL: "https://acme.example"}, "invalid server name"},
		{mcphost.ServerConfig{Name: "acme"}, "neither a command nor a URL"},
		{mcphost.ServerConfig{Name: "acme", Command: "x", URL: "http://x"}, "both"},
		{mcphost.ServerConfig{Name: "acme", URL: "ftp://x"}, "invalid URL"},
		{mcphost.ServerConfig{Name: "acme", URL: "http://x", Headers: map[string]string{"Bad Name": "secret-value-1"}}, "invalid header name"},
		{mcphost.ServerConfig{Name: "acme", URL: "http://x", Headers: map[string]string{"X-Key": "secret-value-2\r\nX-Evil: 1"}}, "line break"},
		{mcphost.ServerConfig{Name: "acme", Command: "x", Env: map[string]string{"A=B": "secret-value-3"}}, "invalid environment variable name"},
	} {
		_, err := mcphost.Connect(context.Background(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.cfg.Name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "secret-value") {
			t.Errorf("error shows a value: %v", err)
		}
	}
}
