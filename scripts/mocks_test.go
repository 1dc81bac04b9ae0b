// Package scripts_test tests scripts/mocks.sh: each start has ports of its
// own, and a listener that is not the mock it started is refused.
package scripts_test

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// listenEnv, when set, makes the test binary a listener instead: it
// listens on 127.0.0.1:0, prints the port and waits to be killed.
const listenEnv = "OPENPLAYBOOK_TEST_SESSION_LISTENER"

func TestMain(m *testing.M) {
	if os.Getenv(listenEnv) != "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString(strconv.Itoa(l.Addr().(*net.TCPAddr).Port) + "\n")
		select {}
	}
	os.Exit(m.Run())
}

// sessionListener starts this test binary as a listener in a session of
// its own (setsid: the session id is its pid) and returns that pid and the
// port it listens on; the listener is killed when the test ends.
func sessionListener(t *testing.T) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), listenEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the session listener printed no port: %v", err)
	}
	return cmd.Process.Pid, strings.TrimSpace(line)
}

// mocksEnv is the environment mocks.sh runs in: stripe-mock on PATH (where
// scripts/deps.sh installs it), and no MOCKS_PORTS unless extra sets it.
func mocksEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(strings.TrimSpace(string(gopath)), "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("mocks.sh needs node")
	}
	t.Setenv("PATH", path)
	if _, err := exec.LookPath("stripe-mock"); err != nil {
		t.Skip("stripe-mock is not installed (scripts/deps.sh)")
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MOCKS_PORTS=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// mocks runs scripts/mocks.sh with args and returns its exit code and
// standard error (standard output for "ports" and "harness").
func mocks(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"mocks.sh"}, args...)...)
	cmd.Env = env
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// stripePort reads the port DIR's stripe mock was started on.
func stripePort(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "ports"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if p, port, ok := strings.Cut(line, " "); ok && p == "stripe" {
			return port
		}
	}
	t.Fatalf("no stripe in %s/ports: %q", dir, b)
	return ""
}

// charges asks the stripe mock on port for a list of charges.
func charges(port string) error {
	req, _ := http.NewRequest("GET", "http://127.0.0.1:"+port+"/v1/charges?limit=1", nil)
	req.Header.Set("Authorization", "Bearer sk_test_123")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		return &net.AddrError{Err: res.Status, Addr: port}
	}
	return nil
}

// TestMocksOwnPorts: two starts get two ports, each serving its own
// stripe-mock; harness points the example harness's stripe connection at
// its start's mock and leaves the others; stop ends only its own.
func TestMocksOwnPorts(t *testing.T) {
	env := mocksEnv(t)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, d := range []string{a, b} {
		if code, _, stderr := mocks(t, env, "start", d, "stripe"); code != 0 {
			t.Fatalf("start %s: exit %d: %s", d, code, stderr)
		}
		t.Cleanup(func() { mocks(t, env, "stop", d) })
	}
	pa, pb := stripePort(t, a), stripePort(t, b)
	if pa == pb || pa == "12111" || pb == "12111" {
		t.Fatalf("ports %s and %s: each start takes a free port of its own", pa, pb)
	}
	for _, p := range []string{pa, pb} {
		if err := charges(p); err != nil {
			t.Errorf("the mock on %s: %v", p, err)
		}
	}
	if code, stdout, _ := mocks(t, env, "ports", a); code != 0 || stdout != "stripe "+pa+"\n" {
		t.Errorf("ports %s: exit %d, %q", a, code, stdout)
	}
	code, h, stderr := mocks(t, env, "harness", a, filepath.Join("..", "examples", "harness.yaml"))
	if code != 0 {
		t.Fatalf("harness: exit %d: %s", code, stderr)
	}
	if !strings.Contains(h, "    baseURL: http://127.0.0.1:"+pa+"   # stripe-mock\n") || strings.Contains(h, ":12111") ||
		!strings.Contains(h, "    baseURL: http://127.0.0.1:12201\n") {
		t.Errorf("the harness copy does not have stripe, and only stripe, on %s:\n%s", pa, h)
	}
	// A second start into a directory that holds a running mock refuses.
	if code, _, stderr := mocks(t, env, "start", a, "stripe"); code == 0 || !strings.Contains(stderr, "already holds a mock") {
		t.Errorf("a second start into %s: exit %d: %s", a, code, stderr)
	}
	if err := charges(pa); err != nil {
		t.Errorf("the refused start touched the running mock: %v", err)
	}
	mocks(t, env, "stop", a)
	if err := charges(pa); err == nil {
		t.Errorf("the mock on %s still answers after stop", pa)
	}
	if err := charges(pb); err != nil {
		t.Errorf("stopping %s stopped %s's mock too: %v", a, b, err)
	}
}

// TestMocksRefuseAListenerNotTheirs: a port something else listens on is
// refused, never reused: start fails naming it, leaves no mock running
// and the listener untouched; and what answers on a port counts as the
// mock only when the mock's own session holds the listening socket.
func TestMocksRefuseAListenerNotTheirs(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
			accepted <- struct{}{}
		}
	}()
	env := mocksEnv(t, "MOCKS_PORTS=stripe="+port)
	dir := filepath.Join(t.TempDir(), "m")
	t.Cleanup(func() { mocks(t, env, "stop", dir) }) // had it started one after all
	code, _, stderr := mocks(t, env, "start", dir, "stripe")
	if code == 0 || !strings.Contains(stderr, "127.0.0.1:"+port) || !strings.Contains(stderr, "refused") {
		t.Fatalf("start on a port another process listens on: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "stripe.pid")); err == nil {
		t.Error("a refused start left a mock recorded")
	}
	if _, err := os.Stat(filepath.Join(dir, "ports")); err == nil {
		t.Error("a refused start wrote a ports file")
	}
	// The listener is still the test's, and still accepts.
	c, err := net.Dial("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatalf("the test's listener no longer accepts: %v", err)
	}
	c.Close()
	<-accepted

	// ours PORT SID, sourced: a listener held by a process of its own
	// session (started with setsid, as start starts a mock) is that
	// session's and not session 1's, and a closed port has no listener.
	// The test process's own session is not used: under some CI runners
	// its leader is outside the PID namespace and ps shows it as 0.
	held, heldPort := sessionListener(t)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	free := strconv.Itoa(closed.Addr().(*net.TCPAddr).Port)
	closed.Close()
	script := `source ./mocks.sh
for args in "` + heldPort + ` ` + strconv.Itoa(held) + `" "` + heldPort + ` 1" "` + free + ` ` + strconv.Itoa(held) + `"; do rc=0; ours $args || rc=$?; echo $rc; done`
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.Fields(string(out)); strings.Join(got, " ") != "0 3 1" {
		t.Errorf("ours: %q, want 0 (the listener's own session), 3 (another session), 1 (nothing listens)", out)
	}
}
