// Command servemem measures what `openplaybook serve` keeps in memory
// per concurrent attached run (issue 20, BENCHMARKS.md "Issue 20: serve
// memory per concurrent run"): serve is started as a whole process on a
// temporary SQLite store; runs of a one-step playbook whose agent step
// (driver mcp, allowedTools [customer.get]) is run by an external agent
// are created through POST /api/v1/runs, each gets an agent token
// (POST /api/v1/runs/{run}/agent-token) and an MCP client session on
// /mcp/runs/{run} that lists the tools and calls customer.get once, and
// stays connected, so every run holds its agent step. serve's VmRSS
// (/proc/PID/status) is read at -small runs and again at -large runs;
// the figure is (RSS(large) - RSS(small)) / (large - small), in MB
// (10^6 bytes) per run.
//
// Every binary given is measured once per round, the binaries
// interleaved, -rounds times; it prints each measurement, then the
// median and spread per binary.
//
//	go build -o /tmp/opb-after ./cmd/openplaybook
//	go run ./bench/servemem -bin before=/tmp/opb-before,after=/tmp/opb-after -rounds 3
//
// -inproc serves in this process instead (serve.New, the handler
// `openplaybook serve` uses) and writes a heap profile at -large runs
// to -heapprofile (go tool pprof -sample_index=inuse_space).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/openplaybook/openplaybook/bench/internal/benchutil"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/serve"
)

var (
	bins        = flag.String("bin", "", "the openplaybook binaries to measure, NAME=PATH, comma-separated (go build -o PATH ./cmd/openplaybook)")
	rounds      = flag.Int("rounds", 3, "how many times each binary is measured (interleaved)")
	small       = flag.Int("small", 10, "the first number of concurrent attached runs")
	large       = flag.Int("large", 100, "the second number of concurrent attached runs")
	settle      = flag.Duration("settle", 2*time.Second, "how long to wait before reading RSS")
	inproc      = flag.Bool("inproc", false, "serve in this process (serve.New) instead of `openplaybook serve`")
	heapprofile = flag.String("heapprofile", "", "with -inproc: write a heap profile at -large runs to this file")
)

const harnessText = `# Written by bench/servemem.
agents:
  bench: {driver: mcp}
store:
  sqlite: store.db
`

// customerGet is the built-in's definition as `openplaybook registry
// --format json` prints it.
const customerGet = `{"name": "customer.get", "source": "primitive", "description": "Fetch one customer record from the workspace's customer list by id.", "permissions": ["customers:read"], "inputSchema": {"type": "object", "properties": {"customerId": {"type": "string", "description": "Id of the customer to fetch."}}, "required": ["customerId"], "additionalProperties": false}, "outputSchema": {"type": "object", "properties": {"customer": {"type": "object", "properties": {"id": {"type": "string", "description": "Customer id."}, "name": {"type": "string", "description": "Full name."}, "email": {"type": "string", "description": "Primary email address.", "format": "email"}, "company": {"type": "string", "description": "Company, if any."}, "plan": {"type": "string", "description": "Current plan name."}, "tags": {"type": "array", "items": {"type": "string"}, "description": "Operator-assigned tags."}, "createdAt": {"type": "string", "format": "date-time", "description": "When the customer record was created."}}, "required": ["id", "name", "email"], "additionalProperties": false}}, "required": ["customer"], "additionalProperties": false}, "dataScopeResources": ["customers"], "requiresApproval": false, "riskClass": "read", "sideEffecting": false}`

const playbookText = `{
  "openplaybook": "1.6",
  "manifest": {
    "id": "bench-servemem",
    "name": "Hold an agent step",
    "version": "0.1.0",
    "description": "One agent step run by an external agent: what serve keeps per concurrent attached run.",
    "requiredConnectors": []
  },
  "inputSchema": {"type": "object"},
  "requires": {"connections": [], "mcpServers": [], "secrets": []},
  "tools": [` + customerGet + `],
  "steps": [
    {"id": "hold", "kind": "agent", "agent": "bench", "purpose": "Look one customer up and hold.", "allowedTools": ["customer.get"]}
  ]
}`

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "servemem:", err)
		os.Exit(1)
	}
}

func run() error {
	ts := []benchutil.Target{{Name: "inproc"}}
	if !*inproc {
		var err error
		if ts, err = benchutil.ParseBins(*bins); err != nil {
			return err
		}
	}
	if *small < 1 || *large <= *small {
		return errors.New("want 1 <= -small < -large")
	}
	fmt.Printf("# %s; %s; %d CPUs; %d -> %d attached runs; %d rounds\n# before: %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.Version(), runtime.NumCPU(), *small, *large, *rounds, benchutil.LoadAvg())
	per := map[string][]float64{}
	fmt.Printf("%-10s %5s %12s %12s %12s\n", "", "round", "RSS small MB", "RSS large MB", "MB per run")
	for r := range *rounds {
		for _, t := range ts {
			a, b, err := measure(t)
			if err != nil {
				return fmt.Errorf("%s: %w", t.Name, err)
			}
			p := (b - a) / float64(*large-*small)
			per[t.Name] = append(per[t.Name], p)
			fmt.Printf("%-10s %5d %12.1f %12.1f %12.3f\n", t.Name, r+1, a, b, p)
		}
	}
	benchutil.Summary(ts, per, "MB per attached run", "%.3f", "target <= 0.5")
	fmt.Printf("# after: %s\n", benchutil.LoadAvg())
	return nil
}

// server is one serve under measurement.
type server struct {
	base, opTok string
	rss         func() (float64, error) // MB
	heap        func() error
	stop        func()
}

// measure starts a serve, attaches -small runs, reads RSS, attaches up to
// -large, reads RSS again.
func measure(t benchutil.Target) (float64, float64, error) {
	dir, err := os.MkdirTemp("", "bench-servemem-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	hp := filepath.Join(dir, "harness.yaml")
	if err := os.WriteFile(hp, []byte(harnessText), 0o644); err != nil {
		return 0, 0, err
	}
	var s *server
	if t.Path == "" {
		s, err = inprocServer(hp)
	} else {
		s, err = procServer(t.Path, hp)
	}
	if err != nil {
		return 0, 0, err
	}
	defer s.stop()
	ctx := context.Background()
	var sessions []*mcp.ClientSession
	defer func() {
		for _, cs := range sessions {
			cs.Close()
		}
	}()
	var rss [2]float64
	for i, n := range []int{*small, *large} {
		for len(sessions) < n {
			cs, err := attach(ctx, s)
			if err != nil {
				return 0, 0, err
			}
			sessions = append(sessions, cs)
		}
		time.Sleep(*settle)
		if rss[i], err = s.rss(); err != nil {
			return 0, 0, err
		}
	}
	if s.heap != nil {
		if err := s.heap(); err != nil {
			return 0, 0, err
		}
	}
	return rss[0], rss[1], nil
}

// attach creates a run, issues its agent token, connects an MCP session
// as its agent, lists the tools and calls the one tool once.
func attach(ctx context.Context, s *server) (*mcp.ClientSession, error) {
	var started struct {
		Run string `json:"run"`
	}
	body, _ := json.Marshal(map[string]any{"document": json.RawMessage(playbookText), "input": map[string]any{}})
	if err := api(s, "/api/v1/runs", body, http.StatusCreated, &started); err != nil {
		return nil, err
	}
	var tok serve.IssuedToken
	if err := api(s, "/api/v1/runs/"+started.Run+"/agent-token", []byte(`{"by":"bench@example.com"}`), http.StatusCreated, &tok); err != nil {
		return nil, err
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "bench-servemem", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: tok.MCPURL, HTTPClient: &http.Client{Transport: benchutil.Bearer{Token: tok.Token, Base: http.DefaultTransport}}}, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", tok.MCPURL, err)
	}
	var lt *mcp.ListToolsResult
	deadline := time.Now().Add(30 * time.Second)
	for {
		if lt, err = cs.ListTools(ctx, nil); err != nil {
			return nil, err
		}
		if len(lt.Tools) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the step has not started yet
	}
	var name string
	for _, tl := range lt.Tools {
		if strings.HasPrefix(tl.Name, "customer") {
			name = tl.Name
		}
	}
	if name == "" {
		return nil, fmt.Errorf("run %s offers no customer.get tool: %v", started.Run, lt.Tools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"customerId": "cus_none"}})
	if err != nil {
		return nil, fmt.Errorf("calling %s: %w", name, err)
	}
	_ = res // a tool error (no such customer) is an answer too
	return cs, nil
}

func api(s *server, path string, body []byte, want int, out any) error {
	req, err := http.NewRequest("POST", s.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.opTok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, b)
	}
	return json.Unmarshal(b, out)
}

func procServer(bin, hp string) (*server, error) {
	opTok := benchutil.RandomHex()
	cmd := exec.Command(bin, "serve", "--harness", hp, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "OPENPLAYBOOK_OPERATOR_TOKEN="+opTok)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }
	base := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+) `)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				base <- m[1]
			}
		}
	}()
	select {
	case b := <-base:
		pid := cmd.Process.Pid
		return &server{base: b, opTok: opTok, stop: stop, rss: func() (float64, error) { return vmRSS(pid) }}, nil
	case <-time.After(30 * time.Second):
		stop()
		return nil, errors.New("openplaybook serve did not say where it listens within 30 s")
	}
}

func inprocServer(hp string) (*server, error) {
	opTok := benchutil.RandomHex()
	os.Setenv("OPENPLAYBOOK_OPERATOR_TOKEN", opTok)
	ctx := context.Background()
	lh, err := launch.Load(hp)
	if err != nil {
		return nil, err
	}
	st, err := host.OpenStore(ctx, lh.H)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	base := "http://" + ln.Addr().String()
	srv, err := serve.New(serve.Options{Harness: lh, Store: st, BaseURL: base, Version: "bench"})
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: srv}
	go func() { _ = hs.Serve(ln) }()
	s := &server{base: base, opTok: opTok, stop: func() { srv.Close(); _ = hs.Close(); st.Close() }}
	s.rss = func() (float64, error) {
		runtime.GC()
		return vmRSS(os.Getpid())
	}
	if *heapprofile != "" {
		s.heap = func() error {
			f, err := os.Create(*heapprofile)
			if err != nil {
				return err
			}
			defer f.Close()
			runtime.GC()
			return pprof.Lookup("heap").WriteTo(f, 0)
		}
	}
	return s, nil
}

// vmRSS is VmRSS of /proc/PID/status, in MB.
func vmRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				return 0, err
			}
			return float64(kb) * 1024 / 1e6, nil
		}
	}
	return 0, errors.New("no VmRSS in /proc/" + strconv.Itoa(pid) + "/status")
}
