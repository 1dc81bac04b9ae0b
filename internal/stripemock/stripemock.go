// Package stripemock runs stripe-mock (github.com/stripe/stripe-mock), the
// Stripe API mock server built from Stripe's OpenAPI spec, for tests.
//
// stripe-mock is an external binary. CI installs it with
//
//	go install github.com/stripe/stripe-mock@v0.203.0
//
// and [Start] finds it on PATH, in $GOBIN or in $GOPATH/bin. When it is not
// installed the test is skipped, except under CI (CI=true), where that is a
// failure: CI must never silently skip the Stripe tests.
//
// stripe-mock takes about three seconds to start (it loads and compiles the
// whole OpenAPI spec), so start it once per package test and share the URL
// between subtests; put a [Proxy] in front of it where a test needs to see
// or count the requests that reach it.
//
// Things to know about stripe-mock (v0.203.0):
//   - It is stateless: responses come from fixtures, whatever the request
//     asked for. Filters are validated but not applied (listing invoices
//     with status=open may return a draft), ids in the path are echoed back,
//     and a POST creates nothing that a later GET would see.
//   - It accepts any key of the form sk_test_X or rk_test_X (three
//     "_"-separated parts) and rejects anything else with a 401 whose
//     message quotes the whole Authorization header it received.
//   - It reflects Idempotency-Key back as a response header but does not
//     replay responses for a repeated key.
//   - With -http-addr alone it still opens its default HTTPS port 12112 on
//     all interfaces (so two instances collide); [Start] passes -https-addr
//     127.0.0.1:0 as well.
package stripemock

import (
	"bufio"
	"bytes"
	"fmt"
	"go/build"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds how long [Start] waits for stripe-mock to listen and
// answer. It starts in about three seconds on an idle machine; the bound is
// generous for a loaded CI runner.
const startTimeout = 30 * time.Second

// binaryName is the executable's name (without ".exe").
const binaryName = "stripe-mock"

// Binary returns the path of the stripe-mock executable: the first found on
// PATH, in $GOBIN, in each $GOPATH/bin, or in the GOBIN and GOPATH the go
// command reports (which also covers `go env -w` settings and the default
// $HOME/go). The error lists where it looked.
func Binary() (string, error) {
	if p, err := exec.LookPath(binaryName); err == nil {
		return p, nil
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	for _, p := range filepath.SplitList(os.Getenv("GOPATH")) {
		if p != "" {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		// No go command: fall back to the default GOPATH ($HOME/go).
		if p := build.Default.GOPATH; p != "" {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	} else {
		lines := strings.Split(strings.TrimRight(string(out), "\r\n"), "\n")
		if len(lines) == 2 {
			if gobin := strings.TrimSpace(lines[0]); gobin != "" {
				dirs = append(dirs, gobin)
			}
			for _, p := range filepath.SplitList(strings.TrimSpace(lines[1])) {
				if p != "" {
					dirs = append(dirs, filepath.Join(p, "bin"))
				}
			}
		}
	}
	for _, dir := range dirs {
		if p, err := exec.LookPath(filepath.Join(dir, binaryName)); err == nil {
			return p, nil
		}
	}
	where := append([]string{"PATH"}, dirs...)
	return "", fmt.Errorf("%s not found (looked on %s); install it with `go install github.com/stripe/stripe-mock@v0.203.0`",
		binaryName, strings.Join(where, ", "))
}

// Start starts stripe-mock on a free loopback port, waits (at most 30
// seconds) until it answers, and returns its base URL, for example
// "http://127.0.0.1:41234". The process is killed in t.Cleanup.
//
// When stripe-mock is not installed, Start skips the test with a message,
// unless the CI environment variable is set to a true value, where it fails
// the test instead.
func Start(t testing.TB) (baseURL string) {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if inCI() {
			t.Fatalf("stripemock: %v (CI is set, so this is a failure, not a skip)", err)
		}
		t.Skipf("stripemock: %v", err)
	}

	// Both listeners on loopback with system-chosen ports: no race for a
	// "free" port, and no collision on stripe-mock's default HTTPS port.
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	cmd.Env = withoutEnv(os.Environ(), "PORT") // stripe-mock reads PORT
	setDeathSignal(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stripemock: %v", err)
	}
	var stderr tail
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("stripemock: start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	var out tail
	addrc := make(chan string, 1)
	go func() {
		// Read stdout to the end so stripe-mock never blocks on a full
		// pipe; the HTTP address comes from its start-up banner.
		sc := bufio.NewScanner(stdout)
		const prefix = "Listening for HTTP at address: "
		for sc.Scan() {
			line := sc.Text()
			out.Write([]byte(line + "\n"))
			if addr, ok := strings.CutPrefix(line, prefix); ok {
				select {
				case addrc <- strings.TrimSpace(addr):
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	fail := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		t.Fatalf("stripemock: %s\nstdout:\n%s\nstderr:\n%s", msg, out.String(), stderr.String())
	}
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	var addr string
	select {
	case addr = <-addrc:
	case <-exited:
		fail("stripe-mock exited before listening: %v", waitErr)
	case <-deadline.C:
		fail("stripe-mock did not listen within %v", startTimeout)
	}
	baseURL = "http://" + addr

	// The banner is printed once the socket is bound; make sure requests
	// are served before handing the URL out.
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get(baseURL + "/v1/balance")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return baseURL
		}
		select {
		case <-exited:
			fail("stripe-mock exited: %v", waitErr)
		case <-deadline.C:
			fail("stripe-mock at %s did not answer within %v: %v", baseURL, startTimeout, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// inCI reports whether the CI environment variable is set to anything but
// "", "0" or "false" (GitHub Actions and GitLab set CI=true).
func inCI() bool {
	v := os.Getenv("CI")
	if v == "" {
		return false
	}
	if b, err := strconv.ParseBool(v); err == nil {
		return b
	}
	return true
}

func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != name {
			out = append(out, kv)
		}
	}
	return out
}

// tail keeps the last 64 KiB written to it, for failure messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (w *tail) Write(p []byte) (int, error) {
	const max = 64 << 10
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > max {
		w.buf = append(w.buf[:0:0], w.buf[len(w.buf)-max:]...)
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(bytes.TrimRight(w.buf, "\n"))
}
