package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// operateBlocks returns the sh code blocks of docs/operate.md with the
// line each starts at, leaving out those whose first line says what they
// need that a test machine has not ("# needs a Kubernetes cluster ...",
// "# needs a container engine ...").
func operateBlocks(t *testing.T) (blocks []string, lines []int) {
	return docBlocks(t, "operate.md", "")
}

// docBlocks returns the sh code blocks of docs/NAME (of its section
// headed exactly section, up to the next heading of the same or a
// higher level, when section is not ""), as operateBlocks does.
func docBlocks(t *testing.T, name, section string) (blocks []string, lines []int) {
	t.Helper()
	src, err := os.ReadFile("../../../docs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var cur []string
	in, start := false, 0
	level := 0 // of the section, while in it; -1 before it; 0 when no section is asked for
	if section != "" {
		level = -1
	}
	for i, l := range strings.Split(string(src), "\n") {
		if !in && section != "" && strings.HasPrefix(l, "#") {
			hashes := len(l) - len(strings.TrimLeft(l, "#"))
			switch {
			case level == -1 && strings.TrimSpace(l[hashes:]) == section:
				level = hashes
				continue
			case level > 0 && hashes <= level:
				level = -2 // past it
			}
		}
		if level < 0 {
			continue
		}
		switch {
		case !in && l == "```sh":
			in, start, cur = true, i+2, nil
		case in && l == "```":
			in = false
			if len(cur) > 0 && strings.HasPrefix(cur[0], "# needs ") {
				continue
			}
			blocks, lines = append(blocks, strings.Join(cur, "\n")), append(lines, start)
		case in:
			cur = append(cur, l)
		}
	}
	return blocks, lines
}

// TestOperateDocRuns: every sh block of docs/operate.md (but those that
// need a Kubernetes cluster or a container engine) runs as written, in
// order, in one shell with errexit and pipefail, from a copy of the
// repository's examples: serve with JSON logs, Jaeger receiving serve's
// spans (read back through its query API), Prometheus metrics on both
// addresses, the health endpoints, serve behind a proxy, and the chart's
// checks. A grep in a block that finds nothing fails it.
func TestOperateDocRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs docs/operate.md")
	}
	gobin := filepath.Join(goEnv(t, "GOPATH"), "bin")
	for _, need := range []string{filepath.Join(gobin, "jaeger-v1.76.0"), filepath.Join(gobin, "helm")} {
		if _, err := os.Stat(need); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing (.ci/run builds Jaeger with scripts/jaeger.sh and installs helm)", need)
			}
			t.Skipf("%s is missing: run scripts/jaeger.sh and go install helm.sh/helm/v3/cmd/helm@v3.22.0", need)
		}
	}
	for _, tool := range []string{"curl", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("docs/operate.md uses %s, which is not installed: %v", tool, err)
		}
	}
	// The page's commands use the default ports: serve's, its metrics
	// listener's and Jaeger's (OTLP, UI, its own metrics).
	for _, port := range []string{"7420", "9464", "4317", "4318", "16686", "8888"} {
		ln, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("docs/operate.md's commands need port %s, which another process holds: %v", port, err)
			}
			t.Skipf("port %s is in use (another run of this test?): %v", port, err)
		}
		ln.Close()
	}
	blocks, lines := operateBlocks(t)
	if len(blocks) < 6 {
		t.Fatalf("docs/operate.md has %d runnable sh blocks; want the logs, traces, metrics, health, proxy and chart ones", len(blocks))
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "openplaybook"), "../../../cmd/openplaybook").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The repository, with the examples copied (the runs' store stays in
	// the copy) and everything else linked.
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "repo")
	if err := os.CopyFS(filepath.Join(work, "examples"), os.DirFS(filepath.Join(root, "examples"))); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(work, "examples", ".openplaybook"))
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n := e.Name(); n != "examples" && n != ".git" {
			if err := os.Symlink(filepath.Join(root, n), filepath.Join(work, n)); err != nil {
				t.Fatal(err)
			}
		}
	}

	out, err := runDocBlocks(t, "operate.md", blocks, lines, "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n", work, 8*time.Minute, bin, gobin)
	if err != nil {
		t.Fatalf("docs/operate.md does not run as written: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	for _, want := range []string{`"operationName":"GET /readyz"`, "openplaybook_http_requests_total{", `"msg":"http"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("docs/operate.md's commands printed no %s:\n%s", want, out)
		}
	}
}

// runDocBlocks runs the blocks of docs/name (lines: where each starts)
// in order, in one bash with errexit, nounset and pipefail, after
// prelude, in dir, with path's directories first on the PATH and none of
// the environment variables that would point the commands elsewhere; it
// returns what they printed, stdout and stderr together, and ends them
// after timeout.
func runDocBlocks(t *testing.T, name string, blocks []string, lines []int, prelude, dir string, timeout time.Duration, path ...string) ([]byte, error) {
	t.Helper()
	var script strings.Builder
	script.WriteString("set -euo pipefail\n" + prelude)
	for i, b := range blocks {
		fmt.Fprintf(&script, "echo '== docs/%s:%d' >&2\n%s\n", name, lines[i], b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-c", script.String())
	c.Dir = dir
	c.Env = append(os.Environ(), "PATH="+strings.Join(append(path, os.Getenv("PATH")), string(os.PathListSeparator)))
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OPENPLAYBOOK_OPERATOR_TOKEN", "OPENPLAYBOOK_HARNESS", "OPENPLAYBOOK_DATABASE_URL"} {
		c.Env = append(c.Env, k+"=")
	}
	c.WaitDelay = 10 * time.Second
	return c.CombinedOutput()
}

func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
