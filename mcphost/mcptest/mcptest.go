// Package mcptest starts real MCP servers for tests: the npm reference
// servers pinned in the repository's package.json (installed by npm ci),
// a small go-sdk server whose tool changes (testdata/changing), and
// in-process go-sdk servers on a loopback HTTP port.
//
// Without node_modules (or node), tests that need the npm servers are
// skipped, unless the CI environment variable is set: in CI a missing
// server fails the test.
package mcptest

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openplaybook/openplaybook/mcphost"
)

// RepoRoot returns the repository root: the nearest directory above the
// working directory that holds go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("mcptest: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("mcptest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// missing skips the test, or fails it in CI.
func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("mcptest: %s (CI is set, so this fails instead of skipping; run npm ci at the repository root)", what)
	}
	t.Skipf("mcptest: %s; run npm ci at the repository root to test against the real MCP servers", what)
}

// Node returns the path of the node binary (skipping or failing when
// there is none).
func Node(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node is not installed")
	}
	return node
}

// npmServer returns the stdio entry point of an installed npm MCP server.
func npmServer(t testing.TB, pkg string) string {
	t.Helper()
	entry := filepath.Join(RepoRoot(t), "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		missing(t, "node_modules/@modelcontextprotocol/"+pkg+" is not installed")
	}
	return entry
}

// MemoryServer returns the config of @modelcontextprotocol/server-memory
// over stdio, named name, with its knowledge graph in a temporary file.
func MemoryServer(t testing.TB, name string) mcphost.ServerConfig {
	t.Helper()
	entry := npmServer(t, "server-memory")
	return mcphost.ServerConfig{
		Name:    name,
		Command: Node(t),
		Args:    []string{entry},
		Env:     map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")},
	}
}

// EverythingServer returns the config of
// @modelcontextprotocol/server-everything over stdio, named name.
func EverythingServer(t testing.TB, name string) mcphost.ServerConfig {
	t.Helper()
	entry := npmServer(t, "server-everything")
	return mcphost.ServerConfig{
		Name:    name,
		Command: Node(t),
		Args:    []string{entry, "stdio"},
	}
}

// BuildChangingServer builds testdata/changing (see its doc comment) into
// a temporary directory and returns the binary's path. A build takes
// about a second with a warm build cache: build once per test and start
// it as often as needed.
func BuildChangingServer(t testing.TB) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("mcptest: the go command is needed to build the test server: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "changing")
	cmd := exec.Command(goTool, "build", "-o", bin, "./mcphost/testdata/changing")
	cmd.Dir = RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mcptest: building the changing server: %v\n%s", err, out)
	}
	return bin
}

// ChangingServer returns the config of the changing server binary bin
// (from [BuildChangingServer]), named name, starting with variant "a" or
// "b".
func ChangingServer(bin, name, variant string) mcphost.ServerConfig {
	return mcphost.ServerConfig{
		Name:    name,
		Command: bin,
		Env:     map[string]string{"VARIANT": variant},
	}
}

// ServeHTTP serves server over streamable HTTP on a loopback port until
// the test ends, and returns its URL.
func ServeHTTP(t testing.TB, server *mcp.Server) string {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts.URL
}
