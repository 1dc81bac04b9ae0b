// Command checkmem measures what `openplaybook check` holds per tool of
// an MCP server's registry (issue 20, BENCHMARKS.md "Issue 20: check
// against a 10k-tool registry"): an MCP server (go-sdk, streamable HTTP,
// served by this process, so its memory is not the measured one's) lists
// -tools tools, each with an input and an output schema of about 1 KB
// sent compact, and a document embeds every one of them (spaced, as
// people write them) and allows them in its steps; the harness binds the
// server by URL. `openplaybook check --harness H DOC` runs as a whole
// process under GNU time (/usr/bin/time -f '%M'), its exit status must be
// 0 (the document is clean: every definition matches), and the figure is
// (RSS(-tools) - RSS(-small)) / (-tools - -small), in KiB per tool.
//
// Every binary given is measured once per round, the binaries
// interleaved, -rounds times; it prints each measurement, then the median
// and spread per binary.
//
//	go build -o /tmp/opb-after ./cmd/openplaybook
//	go run ./bench/checkmem -bin before=/tmp/opb-before,after=/tmp/opb-after -rounds 3
//
// -nodoc checks the harness alone (`check --harness H`), which lists
// every server it binds: the registry without the document.
//
// -protocol is the MCP protocol version the server offers (default
// 2025-11-25; from 2026-07-28 on, go-sdk's client keeps the decoded
// tools/list results in a cache of its own).
//
// -inproc runs check's steps in this process instead (harness.Load,
// playbook.Read, host.Connect, validate.Document, preflight.Check, as
// `openplaybook check` does) at -tools tools and writes a heap profile of
// what is live once they are done (go tool pprof -sample_index=inuse_space;
// alloc_space for everything allocated) to -heapprofile.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/bench/internal/benchutil"
	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/preflight"
	"github.com/openplaybook/openplaybook/syntax"
	"github.com/openplaybook/openplaybook/validate"
)

var (
	bins        = flag.String("bin", "", "the openplaybook binaries to measure, NAME=PATH, comma-separated (go build -o PATH ./cmd/openplaybook)")
	rounds      = flag.Int("rounds", 3, "how many times each binary is measured (interleaved)")
	small       = flag.Int("small", 10, "the number of tools of the small case")
	tools       = flag.Int("tools", 10000, "the number of tools of the large case")
	inproc      = flag.Bool("inproc", false, "run check's steps in this process at -tools tools and write -heapprofile")
	heapprofile = flag.String("heapprofile", "heap.out", "with -inproc: the heap profile to write")
	keep        = flag.String("keep", "", "write the cases' documents and harnesses under this directory and keep them")
	nodoc       = flag.Bool("nodoc", false, "check the harness alone (`check --harness H`, no document): the server's listing without the document's drift")
	protocol    = flag.String("protocol", "2025-11-25", "the MCP protocol version the server speaks (go-sdk caches tools/list results itself from 2026-07-28 on)")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "checkmem:", err)
		os.Exit(1)
	}
}

// tcase is one registry size: its server, document and harness.
type tcase struct {
	n            int
	doc, harness string
	stop         func()
}

func run() error {
	if *small < 1 || *tools <= *small {
		return errors.New("want 1 <= -small < -tools")
	}
	dir := *keep
	if dir == "" {
		d, err := os.MkdirTemp("", "bench-checkmem-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	if *inproc {
		c, err := newCase(dir, *tools)
		if err != nil {
			return err
		}
		defer c.stop()
		return profile(c)
	}
	ts, err := benchutil.ParseBins(*bins)
	if err != nil {
		return err
	}
	if err := exec.Command("/usr/bin/time", "-f", "%M", "true").Run(); err != nil {
		return fmt.Errorf("GNU time is missing (apt-get install -y time): %v", err)
	}
	var cases []*tcase
	for _, n := range []int{*small, *tools} {
		c, err := newCase(dir, n)
		if err != nil {
			return err
		}
		defer c.stop()
		cases = append(cases, c)
	}
	fmt.Printf("# %s; %s; %d CPUs; %d -> %d tools; MCP protocol %s; document: %v; %d rounds\n# before: %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.Version(), runtime.NumCPU(), *small, *tools, *protocol, !*nodoc, *rounds, benchutil.LoadAvg())
	per := map[string][]float64{}
	fmt.Printf("%-10s %5s %14s %14s %14s\n", "", "round", "RSS small KiB", "RSS large KiB", "KiB per tool")
	for r := range *rounds {
		for _, t := range ts {
			var rss [2]int
			for i, c := range cases {
				kib, err := measure(t.Path, c)
				if err != nil {
					return fmt.Errorf("%s at %d tools: %w", t.Name, c.n, err)
				}
				rss[i] = kib
			}
			p := float64(rss[1]-rss[0]) / float64(*tools-*small)
			per[t.Name] = append(per[t.Name], p)
			fmt.Printf("%-10s %5d %14d %14d %14.2f\n", t.Name, r+1, rss[0], rss[1], p)
		}
	}
	benchutil.Summary(ts, per, "KiB per tool", "%.2f", "target <= 10")
	fmt.Printf("# after: %s\n", benchutil.LoadAvg())
	return nil
}

// measure runs `check` on c under GNU time and returns its peak RSS in
// KiB; check must find the document clean.
func measure(bin string, c *tcase) (int, error) {
	var stdout, stderr bytes.Buffer
	args := []string{"-f", "%M", bin, "check", "--harness", c.harness}
	if !*nodoc {
		args = append(args, c.doc)
	}
	cmd := exec.Command("/usr/bin/time", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if err != nil {
		return 0, fmt.Errorf("check: %v\n%s%s", err, tail(stdout.String()), tail(stderr.String()))
	}
	kib, perr := strconv.Atoi(strings.TrimSpace(lines[len(lines)-1]))
	if perr != nil {
		return 0, fmt.Errorf("reading GNU time's output %q: %v", stderr.String(), perr)
	}
	return kib, nil
}

func tail(s string) string {
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}

// profile runs what `openplaybook check` runs on c in this process, then
// writes a heap profile while the results are still held.
func profile(c *tcase) error {
	ctx := context.Background()
	h, hds, err := harness.Load(c.harness)
	if err != nil {
		return err
	}
	if n := diag.Count(hds, diag.Error); n > 0 {
		return fmt.Errorf("harness: %v", hds)
	}
	src, err := os.ReadFile(c.doc)
	if err != nil {
		return err
	}
	doc, ds := playbook.Read(c.doc, src, &playbook.ReadOptions{Limits: syntax.Limits{MaxSize: 1 << 30}})
	env := host.Connect(ctx, h, []*playbook.Document{doc}, nil)
	defer env.Close()
	ds = append(ds, env.Diagnostics...)
	ds = append(ds, validate.Document(doc, &validate.Options{Registry: env.Registry.Has})...)
	ds = append(ds, preflight.Check(ctx, env, doc)...)
	if n := diag.Count(ds, diag.Error); n > 0 {
		return fmt.Errorf("%d errors, the first: %v", n, ds[0])
	}
	runtime.GC()
	f, err := os.Create(*heapprofile)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		return err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("%d tools: live heap %.1f MiB after check (server included); wrote %s\n", c.n, float64(ms.HeapAlloc)/(1<<20), *heapprofile)
	runtime.KeepAlive(doc)
	runtime.KeepAlive(src)
	return nil
}

// The schemas of every tool, as the server sends them (compact) and as
// the document spells them (spaced).
const (
	inputSchema  = `{"type": "object", "properties": {"id": {"type": "string", "description": "Record id.", "pattern": "^rec_[A-Za-z0-9]+$"}, "limit": {"type": "integer", "minimum": 1, "maximum": 100}, "cursor": {"type": "string"}, "expand": {"type": "array", "items": {"type": "string", "enum": ["owner", "history", "notes"]}}}, "required": ["id"], "additionalProperties": false}`
	outputSchema = `{"type": "object", "properties": {"id": {"type": "string"}, "status": {"type": "string", "enum": ["open", "closed", "pending"]}, "amount": {"type": "integer", "description": "Amount in cents."}, "updatedAt": {"type": "string", "format": "date-time"}, "owner": {"type": "object", "properties": {"id": {"type": "string"}, "email": {"type": "string"}}}}, "required": ["id", "status"]}`
)

func description(i int) string {
	return fmt.Sprintf("Generated tool number %d: looks up one record and returns its current state.", i)
}

// newCase starts the server of n tools and writes the document and
// harness that use it under dir.
func newCase(dir string, n int) (*tcase, error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bulk", Version: "1.0.0"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{*protocol}})
	in, out := compact(inputSchema), compact(outputSchema)
	for i := range n {
		srv.AddTool(&mcp.Tool{
			Name: fmt.Sprintf("tool_%d", i), Description: description(i),
			InputSchema: json.RawMessage(in), OutputSchema: json.RawMessage(out),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}}, nil
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true, Stateless: true})}
	go hs.Serve(ln)
	c := &tcase{n: n, stop: func() { hs.Close() }}
	c.doc = filepath.Join(dir, fmt.Sprintf("check-%d.json", n))
	c.harness = filepath.Join(dir, fmt.Sprintf("harness-%d.yaml", n))
	worker := filepath.Join(dir, "worker.json")
	if err := os.WriteFile(worker, []byte(`{"steps": {}}`), 0o644); err != nil {
		return nil, err
	}
	harnessText := fmt.Sprintf("# Written by bench/checkmem.\nmcpServers:\n  bulk: {url: %q, timeout: 60s}\nagents:\n  worker: {driver: transcript, transcript: %q}\n", "http://"+ln.Addr().String()+"/", worker)
	if err := os.WriteFile(c.harness, []byte(harnessText), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.doc, document(n), 0o644); err != nil {
		return nil, err
	}
	return c, nil
}

func compact(s string) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// document embeds the n tools of server bulk; its steps allow them five
// at a time.
func document(n int) []byte {
	var b bytes.Buffer
	name := func(i int) string { return fmt.Sprintf("mcp.bulk.tool_%d", i) }
	b.WriteString(`{
  "openplaybook": "1.6",
  "manifest": {"id": "checkmem", "name": "Check against a large registry", "version": "1.0.0", "description": "Generated by bench/checkmem.", "requiredConnectors": []},
  "inputSchema": {"type": "object"},
  "requires": {
    "connections": [],
    "mcpServers": [{"name": "bulk", "toolNames": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", name(i))
	}
	b.WriteString(`], "capabilities": []}],
    "secrets": []
  },
  "tools": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `
    {"name": %q, "source": "mcp", "description": %q,
     "permissions": [], "riskClass": "read", "sideEffecting": false, "requiresApproval": false,
     "inputSchema": %s,
     "outputSchema": %s}`, name(i), description(i), inputSchema, outputSchema)
	}
	b.WriteString(`
  ],
  "steps": [`)
	steps := (n + 4) / 5
	for s := range steps {
		if s > 0 {
			b.WriteString(",")
		}
		next := ""
		if s+1 < steps {
			next = fmt.Sprintf(`, "next": "s%d"`, s+1)
		}
		fmt.Fprintf(&b, "\n    {\"id\": \"s%d\", \"kind\": \"agent\", \"agent\": \"worker\", \"purpose\": \"Process batch %d of the records.\", \"allowedTools\": [", s, s)
		for j := 0; j < 5 && s*5+j < n; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", name(s*5+j))
		}
		b.WriteString("]" + next + "}")
	}
	b.WriteString("\n  ]\n}\n")
	return b.Bytes()
}
