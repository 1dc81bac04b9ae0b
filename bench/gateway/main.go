// Command gateway measures what `openplaybook serve`'s MCP gateway adds
// to a tool call (BENCHMARKS.md, round 4): the same go-sdk client calls
// the echo tool of @modelcontextprotocol/server-everything
//
//   - direct: over streamable HTTP, to the server started with
//     `node .../dist/index.js streamableHttp` (PORT in its environment);
//   - direct, stdio: over stdio, one server process per session, the
//     transport the gateway itself uses to the server;
//   - gateway: over streamable HTTP to `openplaybook serve`, as the
//     external agent (driver mcp) of a run whose one step allows
//     mcp.everything.echo; the gateway calls the server over stdio,
//     through the runtime's decision path, and audits every call in the
//     harness's SQLite file (synchronous=FULL, on disk).
//
// The gateway's clients ask for each revision of -revisions: 2026-07-28
// (sessionless: a server and a session per request at the gateway) and
// 2025-11-25 (a session); the direct clients ask for go-sdk's newest and
// fall back as the server answers.
//
// Each measurement keeps C sessions calling for -duration, each call
// after the previous one's answer; direct and gateway measurements are
// interleaved, -rounds times. At C > 1 the gateway is measured two ways:
// C sessions on one run (one step: its calls are made one at a time, by
// design) and one session on each of C runs (each run has its own step
// and its own server process).
//
//	go build -o /tmp/opb ./cmd/openplaybook
//	go run ./bench/gateway -openplaybook /tmp/opb
//	go run ./bench/gateway -openplaybook /tmp/opb -tools-check on-change -duration 10s -rounds 5
//	go run ./bench/gateway -inproc -cpuprofile cpu.out -tools-check on-change -concurrency 1
//
// -inproc serves the gateway in this process (serve.New on a loopback
// listener, the same handler `openplaybook serve` uses) so that
// -cpuprofile profiles it; the client is then in the profile too.
//
// It prints, for each configuration, calls/s and the p50, p90 and p99
// latency of one call, then, against each baseline, the added p50
// latency (gateway p50 - direct p50) and the throughput ratio (gateway /
// direct) of each round, and their medians. Run it from the repository root after npm ci.
package main

import (
	"bufio"
	"context"
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openplaybook/openplaybook/bench/internal/benchutil"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/bench/echo/echogen"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/serve"
)

var (
	opbBin      = flag.String("openplaybook", "", "the openplaybook binary to serve with (go build -o BIN ./cmd/openplaybook); not needed with -inproc")
	root        = flag.String("root", ".", "the repository root, where node_modules is")
	duration    = flag.Duration("duration", 5*time.Second, "how long each measurement makes calls")
	rounds      = flag.Int("rounds", 3, "how many times each measurement is made (interleaved)")
	concurrency = flag.String("concurrency", "1,32", "the numbers of concurrent sessions, comma-separated")
	toolsChecks = flag.String("tools-check", "every-call,on-change", "the server's toolsCheck in the gateway's harness, comma-separated: every-call (the default) and/or on-change")
	warmup      = flag.Int("warmup", 50, "calls each session makes before it is measured")
	inproc      = flag.Bool("inproc", false, "serve the gateway in this process instead of `openplaybook serve`")
	cpuprofile  = flag.String("cpuprofile", "", "with -inproc: write a CPU profile of the first gateway measurement to this file")
	revisions   = flag.String("revisions", "2026-07-28,2025-11-25", "the MCP revisions the gateway's clients ask for, comma-separated: 2026-07-28 (sessionless) and/or 2025-11-25 (a session); each is measured")
	memprofile  = flag.String("memprofile", "", "with -inproc: write an allocation profile (go tool pprof -sample_index=alloc_space) to this file at the end")
)

const message = echogen.Message

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

// result is one measurement.
type result struct {
	c     int
	calls int
	secs  float64
	lat   []time.Duration // sorted
}

func (r result) rate() float64 { return float64(r.calls) / r.secs }
func (r result) pct(p int) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(len(r.lat)-1, len(r.lat)*p/100)]
}

func run() error {
	if !*inproc && *opbBin == "" {
		return errors.New("give -openplaybook BIN (go build -o BIN ./cmd/openplaybook) or -inproc")
	}
	if (*cpuprofile != "" || *memprofile != "") && !*inproc {
		return errors.New("-cpuprofile and -memprofile need -inproc")
	}
	var cs []int
	for _, f := range strings.Split(*concurrency, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-concurrency %q: want positive integers, comma-separated", *concurrency)
		}
		cs = append(cs, n)
	}
	maxC := slices.Max(cs)
	rootAbs, err := filepath.Abs(*root)
	if err != nil {
		return err
	}
	entry := filepath.Join(rootAbs, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		return fmt.Errorf("%v (run npm ci in the repository root)", err)
	}
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "bench-gateway-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	serverEntry = entry
	direct, stopDirect, err := startDirect(entry)
	if err != nil {
		return err
	}
	defer stopDirect()

	fmt.Printf("# %s; %s; %d CPUs; echo calls to server-everything, direct over streamable HTTP, through the gateway over stdio; %v per measurement, %d rounds\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.Version(), runtime.NumCPU(), *duration, *rounds)
	fmt.Printf("# before: %s\n", benchutil.LoadAvg())

	var prof io.WriteCloser
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		prof = f
	}
	for _, check := range strings.Split(*toolsChecks, ",") {
		check = strings.TrimSpace(check)
		gw, err := newGateway(ctx, filepath.Join(tmp, check), rootAbs, check, maxC)
		if err != nil {
			return err
		}
		err = compare(ctx, direct, gw, check, cs, prof)
		gw.stop()
		if err != nil {
			return err
		}
	}
	if prof != nil {
		prof.Close()
	}
	if *memprofile != "" {
		f, err := os.Create(*memprofile)
		if err != nil {
			return err
		}
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return err
		}
		f.Close()
	}
	fmt.Printf("# after: %s\n", benchutil.LoadAvg())
	return nil
}

// gconf is one gateway configuration's sessions.
type gconf struct {
	name     string
	sessions []*mcp.ClientSession
}

// compare measures direct and gateway side by side at each concurrency.
func compare(ctx context.Context, direct string, gw *gateway, check string, cs []int, prof io.Writer) error {
	hc := httpClient("")
	for _, c := range cs {
		ds, err := connect(ctx, hc, direct, c, "")
		if err != nil {
			return fmt.Errorf("direct: %w", err)
		}
		stdio, err := connectStdio(ctx, entryOf(), c)
		if err != nil {
			return fmt.Errorf("direct over stdio: %w", err)
		}
		var gcs []gconf
		for _, rev := range strings.Split(*revisions, ",") {
			rev = strings.TrimSpace(rev)
			one, err := gw.sessions(ctx, c, 1, rev)
			if err != nil {
				return err
			}
			if c == 1 {
				gcs = append(gcs, gconf{"gateway " + rev, one})
				continue
			}
			gcs = append(gcs, gconf{"gateway " + rev + ", 1 run", one})
			many, err := gw.sessions(ctx, c, c, rev)
			if err != nil {
				return err
			}
			gcs = append(gcs, gconf{fmt.Sprintf("gateway %s, %d runs", rev, c), many})
		}
		every := append(slices.Clone(ds), stdio...)
		for _, g := range gcs {
			every = append(every, g.sessions...)
		}
		if err := warm(ctx, ds, "echo"); err != nil {
			return fmt.Errorf("direct: %w", err)
		}
		if err := warm(ctx, stdio, "echo"); err != nil {
			return fmt.Errorf("direct over stdio: %w", err)
		}
		for _, g := range gcs {
			if err := warm(ctx, g.sessions, "mcp__everything__echo"); err != nil {
				return fmt.Errorf("%s: %w", g.name, err)
			}
		}
		results := map[string][]result{}
		for range *rounds {
			r, err := measure(ctx, ds, "echo")
			if err != nil {
				return fmt.Errorf("direct: %w", err)
			}
			results["direct"] = append(results["direct"], r)
			r, err = measure(ctx, stdio, "echo")
			if err != nil {
				return fmt.Errorf("direct over stdio: %w", err)
			}
			results[stdioName] = append(results[stdioName], r)
			for _, g := range gcs {
				if prof != nil {
					_ = pprof.StartCPUProfile(prof)
				}
				r, err := measure(ctx, g.sessions, "mcp__everything__echo")
				if prof != nil {
					pprof.StopCPUProfile()
					prof = nil // one profile: the first gateway measurement
				}
				if err != nil {
					return fmt.Errorf("%s: %w", g.name, err)
				}
				results[g.name] = append(results[g.name], r)
			}
		}
		for _, s := range every {
			s.Close()
		}
		fmt.Printf("\n## toolsCheck: %s, concurrency %d\n", check, c)
		fmt.Printf("%-30s %5s %10s %9s %9s %9s\n", "", "round", "calls/s", "p50 µs", "p90 µs", "p99 µs")
		names := []string{"direct", stdioName}
		for _, g := range gcs {
			names = append(names, g.name)
		}
		for _, n := range names {
			for i, r := range results[n] {
				fmt.Printf("%-30s %5d %10.0f %9.0f %9.0f %9.0f\n", n, i+1, r.rate(), us(r.pct(50)), us(r.pct(90)), us(r.pct(99)))
			}
		}
		for _, base := range names[:2] {
			for _, n := range names[2:] {
				var added, ratio []float64
				for i := range results[n] {
					d, g := results[base][i], results[n][i]
					added = append(added, us(g.pct(50))-us(d.pct(50)))
					ratio = append(ratio, g.rate()/d.rate())
				}
				fmt.Printf("# %s, c=%d, %s against %s: added p50 %s µs (median %.0f; target <= 150); throughput %s x (median %.2f; target >= 0.7)\n",
					check, c, n, base, joinf(added, "%.0f"), median(added), joinf(ratio, "%.2f"), median(ratio))
			}
		}
	}
	return nil
}

// stdioName labels the second baseline: the same client calling the
// server over stdio, as the gateway does, one server process per session.
const stdioName = "direct, stdio"

var serverEntry string

func entryOf() string { return serverEntry }

// connectStdio starts n server-everything processes over stdio (node
// --require exit-on-eof.cjs ENTRY stdio, as the gateway's harness starts
// them) and connects one session to each.
func connectStdio(ctx context.Context, entry string, n int) ([]*mcp.ClientSession, error) {
	preload := filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(entry))))), "bench", "echo", "exit-on-eof.cjs")
	var out []*mcp.ClientSession
	for range n {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench-gateway", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: exec.Command("node", "--require", preload, entry, "stdio")}, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, cs)
	}
	return out, nil
}

// startDirect starts server-everything over streamable HTTP on a free
// loopback port and returns its MCP URL.
func startDirect(entry string) (string, func(), error) {
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("node", entry, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	// It logs a line per request on stdout: discarded.
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("starting server-everything: %w", err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return "http://" + addr + "/mcp", stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("server-everything did not listen on %s within 30 s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// gateway is `openplaybook serve` (or, -inproc, its handler in this
// process) over a harness whose agent "bench" is driver mcp, with runs of
// the echo playbook waiting for their agent.
type gateway struct {
	runs []agentRun
	stop func()
}

type agentRun struct{ url, token string }

// sessions connects c clients at MCP revision rev spread over the first
// runs runs.
func (g *gateway) sessions(ctx context.Context, c, runs int, rev string) ([]*mcp.ClientSession, error) {
	var out []*mcp.ClientSession
	for i := range c {
		r := g.runs[i%runs]
		ss, err := connect(ctx, httpClient(r.token), r.url, 1, rev)
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		out = append(out, ss...)
	}
	return out, nil
}

func newGateway(ctx context.Context, dir, root, toolsCheck string, runs int) (*gateway, error) {
	if err := echogen.Write(0, dir, root, filepath.Join(root, "bench", "echo", "exit-on-eof.cjs"), message, toolsCheck); err != nil {
		return nil, err
	}
	entry := filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	harness := fmt.Sprintf(`# Written by bench/gateway.
mcpServers:
  everything:
    command: node
    args: [--require, %q, %q, stdio]
    toolsCheck: %s
agents:
  bench: {driver: mcp}
store:
  sqlite: store.db
runtime:
  maxToolCalls: 100000000
`, filepath.Join(root, "bench", "echo", "exit-on-eof.cjs"), entry, toolsCheck)
	hp := filepath.Join(dir, echogen.Harness)
	if err := os.WriteFile(hp, []byte(harness), 0o644); err != nil {
		return nil, err
	}
	doc := filepath.Join(dir, echogen.Playbook)
	if *inproc {
		return inprocGateway(ctx, hp, doc, runs)
	}
	return procGateway(hp, doc, runs)
}

var waitingRun = regexp.MustCompile(`^run (run_\w+) waiting`)

// procGateway creates the runs with `openplaybook run` (which stops, exit
// 3, when the step waits for its agent) and `openplaybook agent-token`,
// then starts `openplaybook serve`.
func procGateway(harness, doc string, runs int) (*gateway, error) {
	opTok := benchutil.RandomHex()
	env := append(os.Environ(), "OPENPLAYBOOK_OPERATOR_TOKEN="+opTok)
	cli := func(args ...string) (string, error) {
		cmd := exec.Command(*opbBin, args...)
		cmd.Env = env
		out, err := cmd.Output()
		return string(out), err
	}
	var ids []string
	for range runs {
		out, err := cli("run", "--harness", harness, "--input", "{}", doc)
		var ee *exec.ExitError
		m := waitingRun.FindStringSubmatch(out)
		if !errors.As(err, &ee) || ee.ExitCode() != 3 || m == nil {
			return nil, fmt.Errorf("openplaybook run: %v, want exit 3 (waiting for its agent): %s", err, out)
		}
		ids = append(ids, m[1])
	}
	cmd := exec.Command(*opbBin, "serve", "--harness", harness, "--listen", "127.0.0.1:0")
	cmd.Env = env
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
			} else {
				fmt.Fprintln(os.Stderr, "serve:", sc.Text())
			}
		}
	}()
	var b string
	select {
	case b = <-base:
	case <-time.After(30 * time.Second):
		stop()
		return nil, errors.New("openplaybook serve did not say where it listens within 30 s")
	}
	g := &gateway{stop: stop}
	for _, id := range ids {
		tok, err := cli("agent-token", "--harness", harness, id)
		if err != nil {
			stop()
			return nil, fmt.Errorf("openplaybook agent-token: %v", err)
		}
		g.runs = append(g.runs, agentRun{url: b + "/mcp/runs/" + id, token: strings.TrimSpace(tok)})
	}
	return g, nil
}

// inprocGateway serves the gateway in this process.
func inprocGateway(ctx context.Context, harness, doc string, runs int) (*gateway, error) {
	os.Setenv("OPENPLAYBOOK_OPERATOR_TOKEN", benchutil.RandomHex())
	lh, err := launch.Load(harness)
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
	g := &gateway{stop: func() { srv.Close(); _ = hs.Close(); st.Close() }}
	src, err := os.ReadFile(doc)
	if err != nil {
		return nil, err
	}
	for range runs {
		id, ds, err := srv.CreateRun(ctx, echogen.Playbook, src, []byte("{}"))
		if err != nil {
			g.stop()
			return nil, fmt.Errorf("creating a run: %v %v", err, ds)
		}
		tok, err := srv.IssueAgentToken(ctx, id, "", "bench")
		if err != nil {
			g.stop()
			return nil, err
		}
		g.runs = append(g.runs, agentRun{url: tok.MCPURL, token: tok.Token})
	}
	return g, nil
}

var transport = func() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 1024
	return tr
}()

// httpClient is the client of every session: one pool of connections,
// large enough that calls reuse them.
func httpClient(token string) *http.Client {
	return &http.Client{Transport: benchutil.Bearer{Token: token, Base: transport}}
}

// connect connects n clients to url at MCP revision rev ("" for go-sdk's
// newest, falling back as the server answers).
func connect(ctx context.Context, hc *http.Client, url string, n int, rev string) ([]*mcp.ClientSession, error) {
	var opts *mcp.ClientSessionOptions
	if rev != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: rev}
	}
	var out []*mcp.ClientSession
	for range n {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench-gateway", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, cs)
	}
	return out, nil
}

func call(ctx context.Context, cs *mcp.ClientSession, tool string) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"message": message}})
	if err != nil {
		return err
	}
	if res.IsError || len(res.Content) == 0 {
		return fmt.Errorf("the call failed: %v", res.Content)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(tc.Text, message) {
		return fmt.Errorf("unexpected answer %v", res.Content)
	}
	return nil
}

// warm makes -warmup calls on each session (concurrently), waiting for a
// gateway session's first call until its run reached its step.
func warm(ctx context.Context, ss []*mcp.ClientSession, tool string) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(ss))
	for _, s := range ss {
		wg.Go(func() {
			for range *warmup {
				if err := call(ctx, s, tool); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// measure keeps every session calling for -duration.
func measure(ctx context.Context, ss []*mcp.ClientSession, tool string) (result, error) {
	var wg sync.WaitGroup
	lat := make([][]time.Duration, len(ss))
	errs := make(chan error, len(ss))
	t0 := time.Now()
	stop := t0.Add(*duration)
	for i, s := range ss {
		wg.Go(func() {
			for {
				c0 := time.Now()
				if !c0.Before(stop) {
					return
				}
				if err := call(ctx, s, tool); err != nil {
					errs <- err
					return
				}
				lat[i] = append(lat[i], time.Since(c0))
			}
		})
	}
	wg.Wait()
	secs := time.Since(t0).Seconds()
	close(errs)
	if err := <-errs; err != nil {
		return result{}, err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	return result{c: len(ss), calls: len(all), secs: secs, lat: all}, nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func joinf(v []float64, f string) string {
	var parts []string
	for _, x := range v {
		parts = append(parts, fmt.Sprintf(f, x))
	}
	return strings.Join(parts, ", ")
}
