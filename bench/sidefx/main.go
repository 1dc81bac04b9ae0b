// Command sidefx is issue 20's whole-process benchmark of side-effecting
// calls: `openplaybook run` of a playbook whose one agent step makes n
// built-in note.add calls (sideEffecting: true, each recorded started
// before it runs and with its outcome after), against raw SQLite commits
// (internal/rawcommit: one tiny INSERT per transaction, WAL,
// synchronous=FULL) in the same directory. The run's cost per call is
// (t(n) - t(0)) / n, t the wall time of a whole `openplaybook run`
// process, so start-up, the document's checks and the run's own records
// cancel out; the figure is calls/s over commits/s, each round's two runs
// and its raw commits taken back to back (BENCHMARKS.md, issue 20).
//
//	go build -o /tmp/opb ./cmd/openplaybook
//	go run ./bench/sidefx -bin /tmp/opb -calls 2000 -rounds 5
//
// Each round prints t(0), t(n), the calls/s, the commits/s and their
// ratio; the last line is the median ratio. A run that does not complete
// (exit status other than 0) or makes another number of calls stops it
// with the run's output.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/openplaybook/openplaybook/internal/rawcommit"
)

func main() {
	bin := flag.String("bin", "", "the openplaybook binary (required)")
	calls := flag.Int("calls", 2000, "note.add calls in the step")
	rounds := flag.Int("rounds", 5, "rounds (each: a run of 0 calls, a run of -calls calls, -calls raw commits)")
	dir := flag.String("dir", "", "directory for the stores (default: a new temporary one, removed at the end)")
	flag.Parse()
	if *bin == "" || *calls < 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "usage: sidefx -bin OPENPLAYBOOK [-calls N] [-rounds R] [-dir DIR]")
		os.Exit(2)
	}
	if err := run(*bin, *calls, *rounds, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "sidefx:", err)
		os.Exit(1)
	}
}

func run(bin string, n, rounds int, dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "sidefx-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	if err := write(dir, n); err != nil {
		return err
	}
	var ratios []float64
	for r := range rounds {
		t := map[int]time.Duration{}
		order := []int{0, n}
		if r%2 == 1 {
			order = []int{n, 0}
		}
		for _, k := range order {
			d, err := timeRun(bin, dir, k)
			if err != nil {
				return err
			}
			t[k] = d
		}
		raw := filepath.Join(dir, fmt.Sprintf("raw-%d.db", r))
		db, err := rawcommit.Open(raw)
		if err != nil {
			return err
		}
		t0 := time.Now()
		if err := db.Commit(n); err != nil {
			return err
		}
		tr := time.Since(t0)
		db.Close()
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(raw + suffix)
		}
		per := (t[n] - t[0]).Seconds() / float64(n)
		callsPerS, commitsPerS := 1/per, float64(n)/tr.Seconds()
		ratios = append(ratios, callsPerS/commitsPerS)
		fmt.Printf("round %d: t(0) %.3f s, t(%d) %.3f s: %.0f calls/s; raw %.0f commits/s; ratio %.3f\n",
			r+1, t[0].Seconds(), n, t[n].Seconds(), callsPerS, commitsPerS, callsPerS/commitsPerS)
	}
	slices.Sort(ratios)
	fmt.Printf("median ratio %.3f (%d rounds, %d calls)\n", ratios[len(ratios)/2], rounds, n)
	return nil
}

// timeRun runs the playbook with the transcript of k calls on a new store
// and returns its wall time; it checks that the run completed and that
// the store holds k notes' calls.
func timeRun(bin, dir string, k int) (time.Duration, error) {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(filepath.Join(dir, fmt.Sprintf("store-%d.db", k)+suffix))
	}
	cmd := exec.Command(bin, "run", "--harness", filepath.Join(dir, fmt.Sprintf("harness-%d.yaml", k)), "--input", "{}", filepath.Join(dir, "playbook.json"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("the run of %d calls: %v\n%s", k, err, out.String())
	}
	if got := strings.Count(out.String(), "note.add"); k > 0 && got < k {
		return 0, fmt.Errorf("the run of %d calls printed %d lines naming note.add, want at least %d:\n%.2000s", k, got, k, out.String())
	}
	return d, nil
}

// write puts the playbook, the transcripts and the harnesses in dir.
func write(dir string, n int) error {
	noteAdd := map[string]any{
		"name": "note.add", "source": "primitive",
		"description": "Append a note to the workspace's notes, optionally attached to a customer. Notes are internal and never shown to customers.",
		"permissions": []string{"notes:write"}, "riskClass": "internal", "sideEffecting": true, "requiresApproval": false,
		"dataScopeResources": []string{"notes"}, "dataScopeWrites": []string{"notes"},
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{
			"customerId": map[string]any{"type": "string", "description": "Customer to attach the note to, if any."},
			"body":       map[string]any{"type": "string", "description": "Note text (Markdown)."},
			"tags":       map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Tags for filtering notes later."},
		}, "required": []string{"body"}, "additionalProperties": false},
		"outputSchema": map[string]any{"type": "object", "properties": map[string]any{"note": map[string]any{"type": "object", "properties": map[string]any{
			"id":         map[string]any{"type": "string", "description": "Note id."},
			"customerId": map[string]any{"type": "string", "description": "Customer the note is about, if any."},
			"body":       map[string]any{"type": "string", "description": "Note text."},
			"createdAt":  map[string]any{"type": "string", "format": "date-time", "description": "When the note was written."},
		}, "required": []string{"id", "body", "createdAt"}, "additionalProperties": false}}, "required": []string{"note"}, "additionalProperties": false},
	}
	pb := map[string]any{
		"openplaybook": "1.6",
		"manifest":     map[string]any{"id": "sidefx", "name": "Side effects", "version": "1.0.0", "description": "One agent step that adds notes.", "requiredConnectors": []string{}},
		"inputSchema":  map[string]any{"type": "object"},
		"requires":     map[string]any{"connections": []any{}, "mcpServers": []any{}, "secrets": []any{}},
		"tools":        []any{noteAdd},
		"steps":        []any{map[string]any{"id": "write", "kind": "agent", "agent": "writer", "purpose": "Add the notes.", "allowedTools": []string{"note.add"}}},
	}
	if err := writeJSON(filepath.Join(dir, "playbook.json"), pb); err != nil {
		return err
	}
	for _, k := range []int{0, n} {
		cs := make([]any, k)
		for i := range cs {
			cs[i] = map[string]any{"tool": "note.add", "arguments": map[string]any{"body": fmt.Sprintf("note %d", i)}}
		}
		if err := writeJSON(filepath.Join(dir, fmt.Sprintf("transcript-%d.json", k)), map[string]any{"steps": map[string]any{"write": cs}}); err != nil {
			return err
		}
		h := fmt.Sprintf("agents:\n  writer: {driver: transcript, transcript: transcript-%d.json}\nstore:\n  sqlite: store-%d.db\nruntime:\n  maxToolCalls: %d\n", k, k, n+10)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("harness-%d.yaml", k)), []byte(h), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
