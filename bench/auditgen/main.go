// Command auditgen writes a store holding one completed run with a long
// audit log, for measuring `openplaybook audit` and `audit --verify` on
// it (bench/auditmem.sh): a run of one agent step making -calls read
// calls of a tool that does nothing, through the runtime, so that the
// log, the rows and their agreement are what a real run leaves. Each
// call leaves two records; with the run's own, -calls 500000 gives a log
// of about a million records.
//
//	go run ./bench/auditgen -calls 500000 -dir /tmp/audit1m
//
// It writes DIR/store.db and DIR/harness.yaml (whose store is that
// file) and prints the run's id.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store/sqlite"
)

const doc = `{"openplaybook": "1.6",
 "manifest": {"id": "auditgen", "name": "Audit log generator", "version": "1.0.0", "description": "Calls a tool that does nothing, many times.", "requiredConnectors": []},
 "requires": {"connections": [], "mcpServers": [], "secrets": []},
 "tools": [
  {"name": "records.read", "source": "primitive", "description": "Does nothing.", "permissions": [],
   "inputSchema": {"type": "object", "properties": {"i": {"type": "integer"}}}, "outputSchema": {"type": "object"},
   "riskClass": "read", "sideEffecting": false, "requiresApproval": false}],
 "steps": [{"id": "work", "kind": "agent", "agent": "gen", "purpose": "Call the tool.", "allowedTools": ["records.read"]}]}`

type nop struct{}

func (nop) Call(context.Context, jsontext.Value) (registry.Result, error) {
	return registry.Result{Content: jsontext.Value(`{"ok":true}`)}, nil
}

type gen struct{ n int }

func (g gen) RunStep(ctx context.Context, in driver.StepInput, c driver.Caller) (jsontext.Value, error) {
	for i := range g.n {
		r, err := c.Call(ctx, driver.Call{Name: "records.read", Arguments: jsontext.Value(fmt.Sprintf(`{"i":%d}`, i))})
		if err != nil {
			return nil, err
		}
		if r.Error != "" {
			return nil, fmt.Errorf("call %d: %s", i, r.Error)
		}
	}
	return jsontext.Value(`{"done":true}`), nil
}

func main() {
	calls := flag.Int("calls", 500000, "read calls to make")
	dir := flag.String("dir", "", "directory to write store.db and harness.yaml in (required)")
	flag.Parse()
	if *dir == "" || *calls < 0 {
		fmt.Fprintln(os.Stderr, "auditgen: -dir is required and -calls must be at least 0")
		os.Exit(2)
	}
	if err := run(*dir, *calls); err != nil {
		fmt.Fprintln(os.Stderr, "auditgen:", err)
		os.Exit(1)
	}
}

func run(dir string, calls int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, "store.db")
	if err := os.WriteFile(filepath.Join(dir, "harness.yaml"), []byte("store:\n  sqlite: store.db\n"), 0o644); err != nil {
		return err
	}
	st, err := sqlite.Open(path, &sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		return err
	}
	defer st.Close()
	d, ds := playbook.Read("auditgen.json", []byte(doc), nil)
	if d == nil {
		return fmt.Errorf("the document does not read: %v", ds)
	}
	reg := registry.New()
	for _, t := range d.Tools {
		if err := reg.Add(t.Definition([]byte(doc)), registry.Origin{Kind: registry.Builtin}, nop{}); err != nil {
			return err
		}
	}
	sess, ds, err := runtime.Open(context.Background(), runtime.SessionOptions{Document: d, Registry: reg, Store: st, MaxToolCalls: calls + 1,
		Driver: func(string) (driver.Driver, error) { return gen{calls}, nil }})
	if err != nil {
		return fmt.Errorf("%w %v", err, ds)
	}
	out, err := sess.Start(context.Background(), nil)
	if err != nil {
		return err
	}
	if out.Status != runtime.Completed {
		return fmt.Errorf("run %s: %s %s", out.Run, out.Status, out.Reason)
	}
	fmt.Println(out.Run)
	return nil
}
