package launch_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// TestOpenRunChecksTheHarnessFirst: OpenRun of a run under a rewritten
// harness (the required MCP server now a command that writes a marker
// file, an unset secret named, another store seed) is
// a *runtime.HarnessChangedError before anything of the file is used: the
// command never starts, the original server sees no new session, the seed
// is not loaded. With AcceptHarnessChange the rewritten file is used (the
// command starts: the probe can see a use). The original harness opens the
// run.
func TestOpenRunChecksTheHarnessFirst(t *testing.T) {
	t.Parallel()
	root := mcptest.RepoRoot(t)
	dir := t.TempDir()
	var sessions atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "srv", Version: "1"}, nil)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "initialize" {
				sessions.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "ping", Description: "Answers pong."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
		return nil, struct{}{}, nil
	})
	url := mcptest.ServeHTTP(t, srv)

	write := func(name string, b []byte, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ex, err := os.ReadFile(filepath.Join(root, "examples", "support-triage.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lib struct{ Tools []map[string]any }
	if err := json.Unmarshal(ex, &lib); err != nil {
		t.Fatal(err)
	}
	var note map[string]any
	for _, tl := range lib.Tools {
		if tl["name"] == "note.add" {
			note = tl
		}
	}
	doc, _ := json.Marshal(map[string]any{
		"openplaybook": "1.6",
		"manifest":     map[string]any{"id": "first", "name": "First", "version": "1.0.0", "description": "d", "requiredConnectors": []string{}},
		"requires":     map[string]any{"connections": []any{}, "mcpServers": []any{map[string]any{"name": "srv", "toolNames": []string{}, "capabilities": []string{}}}, "secrets": []any{}},
		"tools":        []any{note},
		"steps":        []any{map[string]any{"id": "write", "kind": "agent", "agent": "clerk", "purpose": "Write a note.", "allowedTools": []string{"note.add"}}},
	})
	write("clerk.json", []byte(`{"steps":{"write":[]}}`), 0o644)
	harness := func(servers map[string]any, seed string) []byte {
		b, _ := json.Marshal(map[string]any{
			"mcpServers": servers,
			"agents":     map[string]any{"clerk": map[string]any{"driver": "transcript", "transcript": "clerk.json"}},
			"store":      map[string]any{"sqlite": "state/store.db", "seed": seed},
		})
		return b
	}
	seed := filepath.Join(root, "examples", "data", "customers.json")
	orig := harness(map[string]any{"srv": map[string]any{"url": url}}, seed)
	hp := write("harness.json", orig, 0o644)
	ctx := context.Background()

	lh, err := launch.Load(hp)
	if err != nil {
		t.Fatal(err)
	}
	st, err := host.OpenStore(ctx, lh.H)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o, ds, err := launch.Open(ctx, lh, launch.Options{Name: "doc.json", Src: doc, Store: st})
	if err != nil {
		t.Fatalf("open: %v %v", err, ds)
	}
	run, err := o.Session.Create(ctx, nil)
	o.Close()
	if err != nil {
		t.Fatal(err)
	}
	before := sessions.Load()

	marker := filepath.Join(dir, "started")
	script := write("server.sh", []byte("#!/bin/sh\necho started >> '"+marker+"'\nexit 1\n"), 0o755)
	other := write("other-seed.json", []byte(`[{"id": "cus_rewritten", "name": "Rewritten", "email": "r@example.com", "plan": "free"}]`), 0o644)
	write("harness.json", harness(map[string]any{"srv": map[string]any{"command": script},
		"spare": map[string]any{"command": script, "env": map[string]any{"K": "${secret:HOSTILE_UNSET_SECRET_Q7}"}}}, other), 0o644)
	lh2, err := launch.Load(hp)
	if err != nil {
		t.Fatal(err)
	}
	o, _, ds, err = launch.OpenRun(ctx, lh2, run, launch.Options{Store: st})
	var hc *runtime.HarnessChangedError
	if !errors.As(err, &hc) || !errors.Is(err, runtime.ErrHarnessChanged) || o != nil || ds != nil {
		t.Fatalf("OpenRun under the rewritten harness: %v (opened %v, %d diagnostics), want a *runtime.HarnessChangedError and nothing else", err, o != nil, len(ds))
	}
	if hc.Run != run || hc.This != lh2.Digest() || hc.Last != lh.Digest() {
		t.Errorf("the error names run %s, last %s, this %s; want %s, %s, %s", hc.Run, hc.Last, hc.This, run, lh.Digest(), lh2.Digest())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the rewritten harness's server command was started")
	}
	if n := sessions.Load() - before; n != 0 {
		t.Errorf("the original server got %d sessions", n)
	}
	if _, err := st.(builtin.Data).GetCustomer(ctx, "cus_rewritten"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the rewritten harness's seed was loaded: %v", err)
	}
	if err := launch.CheckRun(ctx, lh2, st, run, false); !errors.Is(err, runtime.ErrHarnessChanged) {
		t.Errorf("CheckRun: %v", err)
	}
	if err := launch.CheckRun(ctx, lh2, st, "run_missing", false); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CheckRun of a run that does not exist: %v, want store.ErrNotFound", err)
	}

	// Accepted, the rewritten file is used (and its server fails check).
	o, _, _, err = launch.OpenRun(ctx, lh2, run, launch.Options{Store: st, AcceptHarnessChange: true})
	if !errors.Is(err, runtime.ErrNotRunnable) {
		t.Errorf("OpenRun accepting the rewritten harness: %v, want the check to fail", err)
	}
	o.Close()
	if _, err := os.Stat(marker); err != nil {
		t.Error("with the change accepted, the rewritten server command was not started: the probe cannot see a use")
	}
	if _, err := st.(builtin.Data).GetCustomer(ctx, "cus_rewritten"); err != nil {
		t.Errorf("with the change accepted, the rewritten seed was not loaded (%v): the probe cannot see a use", err)
	}

	// The original harness opens the run.
	write("harness.json", orig, 0o644)
	lh3, err := launch.Load(hp)
	if err != nil {
		t.Fatal(err)
	}
	o, got, ds, err := launch.OpenRun(ctx, lh3, run, launch.Options{Store: st})
	if err != nil {
		t.Fatalf("OpenRun with the run's own harness: %v %v", err, ds)
	}
	defer o.Close()
	if got.ID != run || !strings.Contains(string(got.Document), `"first"`) {
		t.Errorf("OpenRun returned run %s", got.ID)
	}
}
