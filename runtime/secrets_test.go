package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/mcphost/mcptest"
	"github.com/openplaybook/openplaybook/runtime"
)

// Distinctive secret values: the Stripe key (stripe-mock accepts any
// sk_test_ key), an environment secret of server-memory, and one the echo
// server hands back to the agent.
const (
	stripeSecret = "sk_test_4eC39HqLyjWDarjtT1zdp7dcSECRETVALUE"
	memorySecret = "mem-Secret-Token-42xyzQ"
	echoSecret   = "echo-Secret-Value-99qqZ"
)

// buildEcho builds runtime/testdata/echoenv and returns the binary.
func buildEcho(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "echoenv")
	cmd := exec.Command("go", "build", "-o", bin, "./runtime/testdata/echoenv")
	cmd.Dir = mcptest.RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the echo server: %v\n%s", err, out)
	}
	return bin
}

// secretForms are the ways a value could be written: as is, JSON-escaped
// and URL-escaped.
func secretForms(vals ...string) [][]byte {
	var out [][]byte
	for _, v := range vals {
		j, _ := json.Marshal(v)
		for _, f := range []string{v, string(j[1 : len(j)-1]), url.QueryEscape(v), url.PathEscape(v)} {
			if !slices.ContainsFunc(out, func(b []byte) bool { return string(b) == f }) {
				out = append(out, []byte(f))
			}
		}
	}
	return out
}

// leaks returns which secret forms b holds.
func leaks(b []byte, forms [][]byte) []string {
	var out []string
	for _, f := range forms {
		if bytes.Contains(b, f) {
			out = append(out, string(f))
		}
	}
	return out
}

// TestSecretsNeverWritten runs a playbook whose agent puts the secrets
// the harness resolved everywhere it can (note bodies and tags, a Today
// item, the knowledge graph, search queries, Stripe ids, a refused tool
// name, invalid arguments, the error of a failed call) and gets one back
// from an MCP tool's result. No secret value may be in any file of the
// store's directory, the progress output, the audit log or the outcome.
func TestSecretsNeverWritten(t *testing.T) {
	t.Parallel()
	url, _ := stripeMock(t)
	echo := buildEcho(t)
	doc := buildDoc(t, "secrets",
		agentStep("leak", "spy", []string{"mcp.echo.reveal", "note.add", "today.surface", "mcp.memory.create_entities", "mcp.memory.search_nodes",
			"customer.search", "customer.get", "billing_customer.get", "charge.refund"}, ""),
	)
	r := newRig(t, rigConfig{
		memory:    true,
		memoryEnv: map[string]string{"MEMORY_API_TOKEN": "${secret:MEMORY_TOKEN}"},
		stdio:     map[string]stdioServer{"echo": {command: echo, env: map[string]string{"ECHO_SECRET": "${secret:ECHO_SECRET}"}}},
		stripe:    url,
		secrets:   map[string]string{"STRIPE_API_KEY": stripeSecret, "MEMORY_TOKEN": memorySecret, "ECHO_SECRET": echoSecret},
	}, doc)
	all := "stripe " + stripeSecret + " echo " + echoSecret + " memory " + memorySecret
	tr := map[string]string{"spy": transcriptOf(map[string][]tcall{"leak": {
		{"mcp.echo.reveal", map[string]any{}},
		{"note.add", map[string]any{"customerId": "cus_ada", "body": all, "tags": []string{stripeSecret, "t-" + echoSecret}}},
		{"today.surface", map[string]any{"title": "key " + stripeSecret, "summary": all, "priority": "high",
			"customerId": memorySecret, "link": "https://example.com/x?k=" + echoSecret}},
		{"mcp.memory.create_entities", map[string]any{"entities": []any{map[string]any{"name": "Leak " + memorySecret, "entityType": "secret", "observations": []string{all}}}}},
		{"mcp.memory.search_nodes", map[string]any{"query": memorySecret}},
		{"customer.search", map[string]any{"query": stripeSecret}},
		{"customer.get", map[string]any{"customerId": echoSecret}}, // fails: the error names the id
		{"billing_customer.get", map[string]any{"customerId": "cus_" + memorySecret}},
		{"customer.search", map[string]any{"query": 5, "note": stripeSecret}}, // refused: invalid arguments
		{echoSecret, map[string]any{"x": memorySecret}},                       // refused: not on the list
		{"charge.refund", map[string]any{"chargeId": "ch_" + echoSecret, "reason": "duplicate"}},
	}})}
	ctx := context.Background()
	seen := &agentLog{}
	out, err := r.engine(0, tr, seen, nil).Start(ctx, jsontext.Value(`{}`))
	wantOutcome(t, "start", out, err, runtime.Waiting)
	// The echo tool returns its secret; the agent is handed the result
	// with it redacted (a tool result is redacted before any driver sees
	// it), and the server really did send it (its result was redacted,
	// not empty).
	if s := seen.of("leak"); len(s) == 0 || bytes.Contains(s[0].Res.Content, []byte(echoSecret)) || !bytes.Contains(s[0].Res.Content, []byte(`"value":"[redacted]"`)) {
		t.Fatalf("the agent was handed %+v, want the echo tool's result with its secret redacted", s)
	}
	r.mustDecide(out.Run, r.onlyApproval(out.Run).ID, true)
	res, err := r.engine(0, tr, seen, nil).Resume(ctx, out.Run)
	wantOutcome(t, "resume", res, err, runtime.Completed)

	// The refused call named after a secret is recorded, redacted.
	redacted := false
	for _, rec := range r.auditOf(out.Run) {
		if rec.Kind == "call.refused" && rec.Tool == "[redacted]" && bytes.Contains(rec.Data, []byte(`"toolRedacted":true`)) {
			redacted = true
		}
	}
	if !redacted {
		t.Errorf("no call.refused record with the tool name redacted and data.toolRedacted")
	}

	forms := secretForms(stripeSecret, memorySecret, echoSecret)
	check := func(what string, b []byte) {
		t.Helper()
		if l := leaks(b, forms); len(l) > 0 {
			t.Errorf("%s holds secret values %q", what, l)
		}
	}
	check("the progress output", []byte(r.progress.String()))
	check("the outcomes", jsonBytes(t, []any{out, res}))
	recs := r.auditOf(out.Run)
	check("the audit log", jsonBytes(t, recs))
	check("the calls", jsonBytes(t, r.calls(out.Run)))
	notes, _ := r.st.ListNotes(ctx, "", "", 100)
	check("the notes", jsonBytes(t, notes))
	items, _ := r.st.ListToday(ctx, true)
	check("the Today items", jsonBytes(t, items))
	steps, _ := r.st.Steps(ctx, out.Run)
	check("the steps", jsonBytes(t, steps))
	dump, err := r.st.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("the store's dump", dump)
	for _, f := range storeFiles(t, r) { // with the WAL still there
		b, _ := os.ReadFile(f)
		check(filepath.Base(f)+" (store open)", b)
	}
	r.st.Close()
	for _, f := range storeFiles(t, r) {
		b, _ := os.ReadFile(f)
		check(filepath.Base(f)+" (store closed)", b)
	}
}

func jsonBytes(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
