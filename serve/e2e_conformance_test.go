package serve_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

// TestConformance runs the server scenarios of the MCP conformance suite
// (npm @modelcontextprotocol/conformance) against the gateway of a run
// whose step is bound to driver mcp. The scenarios that test the suite's
// own reference tools, resources and prompts, which a gateway does not
// have, are listed with the reason in testdata/conformance-baseline.yml;
// the suite fails on any other failing scenario, and on a listed one that
// passes (the baseline is then stale).
//
// The suite's server mode has no option for request headers, so the
// agent token is added by a wrapper in front of the server: a request
// without an Authorization header gets the run's agent token.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the conformance suite")
	}
	node := node22(t)
	entry := npmEntry(t, "@modelcontextprotocol/conformance/dist/index.js")
	r := newRig(t, "")
	ctx := context.Background()
	run, ds, err := r.srv.CreateRun(ctx, "agent.json", readTestdata(t, "agent.json"), []byte(`{"customerId":"cus_ada"}`))
	if err != nil {
		t.Fatalf("create: %v %v", err, ds)
	}
	r.waitStatus(run, "waiting", "agent")
	tok, err := r.srv.IssueAgentToken(ctx, run, "", "conformance")
	if err != nil {
		t.Fatal(err)
	}
	srv := r.srv
	r.ts.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") == "" {
			req.Header.Set("Authorization", "Bearer "+tok.Token)
		}
		srv.ServeHTTP(w, req)
	})

	baseline, err := filepath.Abs(filepath.Join("testdata", "conformance-baseline.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, node, entry, "server", "--url", tok.MCPURL, "--expected-failures", baseline, "-o", confOut(t))
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("conformance server --url %s:\n%s", tok.MCPURL, out.String())
	if err != nil {
		t.Fatalf("the conformance suite: %v (see its output above)", err)
	}
	if !strings.Contains(out.String(), "server-initialize: 1 passed") {
		t.Fatal("the conformance suite did not pass server-initialize")
	}

	// The suite called its reference server's tools: every call was
	// refused and audited, none ran, and the chain verifies.
	au, err := r.srv.Audit(ctx, run, true)
	if err != nil || au.Verified == nil || !*au.Verified {
		t.Fatalf("audit: %v %+v", err, au.Problems)
	}
	count := map[string]int{}
	for _, rec := range au.Records {
		count[rec.Kind]++
	}
	calls, err := r.st.Calls(ctx, run, store.CallFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		if c.State != store.CallRefused {
			t.Errorf("the suite's call to %q is %s, want refused", c.Tool, c.State)
		}
	}
	if len(calls) < 8 || count["call.refused"] != len(calls) || count["call.started"] != 0 {
		t.Fatalf("%d calls in the store; audit records %v", len(calls), count)
	}
	// The suite opens a session per scenario, all with the one token and
	// while one step executes: they are recorded once per step attempt
	// (and once before the step), not once each.
	if count["agent.attached"] > 2 {
		t.Errorf("%d agent.attached records for one token in one step attempt, want at most 2", count["agent.attached"])
	}
}

// confOut is where the suite writes its results: $OPENPLAYBOOK_CONFORMANCE_OUT
// when set (to read them after the test), else a temporary directory.
func confOut(t *testing.T) string {
	if d := os.Getenv("OPENPLAYBOOK_CONFORMANCE_OUT"); d != "" {
		return d
	}
	return t.TempDir()
}
