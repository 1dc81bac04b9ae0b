// Package inproc times echo calls to server-everything in one process,
// side by side: BenchmarkDirect with a plain go-sdk client, BenchmarkRun
// through `openplaybook run` (the CLI's package, cmd/openplaybook/cli, driven in
// process, so that go test -cpuprofile profiles the whole call path):
//
//	go test ./bench/echo/inproc -run '^$' -bench . -benchtime 2x -count 3
//	go test ./bench/echo/inproc -run '^$' -bench Run -benchtime 5x -cpuprofile cpu.out
//	go tool pprof -top -cum inproc.test cpu.out
//
// Both report p50-µs and p90-µs per call. For BenchmarkRun a call's time
// is the interval between two "allowed" progress lines: the whole cycle
// of one call (driver, decision, store commit, the MCP round trip) as a
// sequence of calls sees it. Its ns/op is one N-call run; per-call-µs is
// (t(N) - t(0)) / N of in-process runs, start-up not counted.
package inproc

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openplaybook/openplaybook/bench/echo/echogen"
	"github.com/openplaybook/openplaybook/cmd/openplaybook/cli"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
)

var calls = flag.Int("echo.n", 1000, "echo calls per run")

// preload is the script that makes server-everything exit at stdin EOF
// (see it), so that a short run's close does not wait for a timer.
func preload(b *testing.B) string {
	return filepath.Join(mcptest.RepoRoot(b), "bench", "echo", "exit-on-eof.cjs")
}

func report(b *testing.B, lat []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*9/10].Nanoseconds())/1e3, "p90-µs")
}

// BenchmarkDirect makes N echo calls per op over one go-sdk session
// (the session's start-up is not timed).
func BenchmarkDirect(b *testing.B) {
	// Go's default collector target, whatever a run in this process set
	// before (run sets its own; see cmd/openplaybook/cli/gc.go).
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	cfg := mcptest.EverythingServer(b, "everything")
	ctx := context.Background()
	// The client capabilities mcphost declares: none.
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cmd := exec.Command(cfg.Command, append([]string{"--require", preload(b)}, cfg.Args...)...)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	args := map[string]any{"message": echogen.Message}
	call := func() time.Duration {
		t0 := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
		if err != nil {
			b.Fatal(err)
		}
		if res.IsError {
			b.Fatalf("the tool reported an error: %v", res.Content)
		}
		return time.Since(t0)
	}
	for range 20 { // the server's JIT warms up
		call()
	}
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		for range *calls {
			lat = append(lat, call())
		}
	}
	b.StopTimer()
	report(b, lat)
}

// stamps records when each "  allowed" progress line is written.
type stamps struct {
	mu    sync.Mutex
	times []time.Time
	other bytes.Buffer
}

func (s *stamps) Write(p []byte) (int, error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if bytes.HasPrefix(p, []byte("  allowed ")) {
		s.times = append(s.times, now)
	} else {
		s.other.Write(p)
	}
	return len(p), nil
}

// runOnce runs dir's playbook with an empty store and returns how long
// it took and the call times.
func runOnce(b *testing.B, dir string, want int) (time.Duration, []time.Duration) {
	b.Helper()
	if err := os.Remove(filepath.Join(dir, echogen.Store)); err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	st := &stamps{}
	c := &cli.CLI{Stdout: &bytes.Buffer{}, Stderr: st}
	t0 := time.Now()
	code := c.Main([]string{"run", "--harness", filepath.Join(dir, echogen.Harness), "--input", "{}", filepath.Join(dir, echogen.Playbook)})
	d := time.Since(t0)
	if code != cli.ExitOK || len(st.times) != want {
		b.Fatalf("run: exit %d, %d calls allowed, want %d; its output:\n%s", code, len(st.times), want, st.other.String())
	}
	var lat []time.Duration
	for i := 1; i < len(st.times); i++ {
		lat = append(lat, st.times[i].Sub(st.times[i-1]))
	}
	return d, lat
}

// BenchmarkRun runs the N-call playbook once per op, and the 0-call one
// (not timed in ns/op) for the start-up cost, with each toolsCheck of the
// server: every-call (the default: a tools/list before every call) and
// on-change (listed again after the server announces a change).
func BenchmarkRun(b *testing.B) {
	for _, check := range []string{"every-call", "on-change"} {
		b.Run("toolsCheck="+check, func(b *testing.B) { benchRun(b, check) })
	}
}

func benchRun(b *testing.B, toolsCheck string) {
	root := mcptest.RepoRoot(b)
	mcptest.EverythingServer(b, "everything") // skips without node_modules
	dirN, dir0 := b.TempDir(), b.TempDir()
	for dir, n := range map[string]int{dirN: *calls, dir0: 0} {
		if err := echogen.Write(n, dir, root, preload(b), echogen.Message, toolsCheck); err != nil {
			b.Fatal(err)
		}
	}
	runOnce(b, dirN, *calls) // warm up: caches, the page cache
	var lat []time.Duration
	var tN, t0 time.Duration
	b.ResetTimer()
	for range b.N {
		d, l := runOnce(b, dirN, *calls)
		tN += d
		lat = append(lat, l...)
		b.StopTimer()
		d, _ = runOnce(b, dir0, 0)
		t0 += d
		b.StartTimer()
	}
	b.StopTimer()
	report(b, lat)
	if *calls > 0 {
		b.ReportMetric(float64((tN-t0).Nanoseconds())/float64(b.N**calls)/1e3, "per-call-µs")
	}
}
