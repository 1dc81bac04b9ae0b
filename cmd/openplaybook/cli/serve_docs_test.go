package cli

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestServeDocReplicasRuns: docs/serve.md's "Watching a failover on one
// machine" runs as written, in order, in one shell with errexit and
// pipefail, from the repository: a throwaway PostgreSQL cluster, two
// replicas, a run on the first with its agent's calls sent by curl,
// kill -9 of the first, the second's adoption in its log, the agent's
// calls going on there, the gate pending and the audit log verifying.
func TestServeDocReplicasRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command, starts PostgreSQL and two replicas")
	}
	if os.Getenv("OPENPLAYBOOK_TEST_STORE") != "" {
		t.Skip("brings its own PostgreSQL: run once, in the suite's SQLite pass")
	}
	missing := func(what string, err error) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("docs/serve.md's failover walkthrough needs %s: %v", what, err)
		}
		t.Skipf("docs/serve.md's failover walkthrough needs %s: %v", what, err)
	}
	if _, err := os.Stat("/usr/lib/postgresql/15/bin/initdb"); err != nil {
		missing("Debian's postgresql package (apt-get install postgresql)", err)
	}
	for _, tool := range []string{"curl", "jq", "openssl", "node"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(tool, err)
		}
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules/@modelcontextprotocol/server-memory/dist/index.js")); err != nil {
		missing("npm ci (the memory server)", err)
	}
	for _, port := range []string{"7421", "7422"} {
		ln, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			missing("port "+port, err)
		}
		ln.Close()
	}
	blocks, lines := docBlocks(t, "serve.md", "Watching a failover on one machine")
	if len(blocks) != 4 {
		t.Fatalf("docs/serve.md's failover walkthrough has %d sh blocks; want the cluster and replicas, the run, the failover and the clean-up", len(blocks))
	}
	bin := filepath.Join(t.TempDir(), "bin")
	if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "openplaybook"), "../../../cmd/openplaybook").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// Should a block fail, the replicas and the cluster stop all the same.
	const prelude = `cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  if [ -n "${demo:-}" ] && [ -f "$demo/data/postmaster.pid" ]; then ${as:-} ${PGBIN:-}/pg_ctl -D "$demo/data" -m immediate stop >/dev/null 2>&1 || true; fi
  [ -n "${demo:-}" ] && rm -rf "$demo"
  true
}
trap cleanup EXIT
`
	out, err := runDocBlocks(t, "serve.md", blocks, lines, prelude, root, 4*time.Minute, bin)
	if err != nil {
		t.Fatalf("docs/serve.md's failover walkthrough does not run as written: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	for _, want := range []string{
		`{"status":"running","step":"lookup"}`, // asked of the second while the first executes
		"X-Openplaybook-Replica: rep_",         // the events stream forwarded to the owner
		" adopted run run_",
		`{"note":{`, // the agent's call after the failover ran
		`[{"kind":"gate","id":"review"}]`,
		`{"decided":{"kind":"gate","id":"review"}}`, // the gate decided on the survivor
		"\ntrue\n", // the audit log verifies
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("docs/serve.md's failover walkthrough printed no %s:\n%s", want, out)
		}
	}
	// The events stream asked of the second was answered by the first:
	// the replica the survivor adopted the run from (the second names
	// itself on what it serves, so "rep_" alone would pass unforwarded).
	answered := regexp.MustCompile(`(?i)x-openplaybook-replica: (rep_[0-9a-f]+)`).FindSubmatch(out)
	adopted := regexp.MustCompile(`replica (rep_[0-9a-f]+) adopted run run_[0-9a-f]+ from (rep_[0-9a-f]+)`).FindSubmatch(out)
	if answered == nil || adopted == nil || string(answered[1]) != string(adopted[2]) || string(answered[1]) == string(adopted[1]) {
		t.Errorf("the events stream asked of the second replica was answered by %q; want the first, which the second adopted the run from (%q):\n%s", answered, adopted, out)
	}
	// The first replica's log names its id as the one the header gave.
	if joined := regexp.MustCompile(`joined the replicas as (rep_[0-9a-f]+)`).FindSubmatch(out); joined == nil || answered == nil || string(joined[1]) != string(answered[1]) {
		t.Errorf("the first replica's log names %q; want the id the events stream's header gave (%q):\n%s", joined, answered, out)
	}
}
