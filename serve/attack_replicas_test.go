package serve_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAttackReplicaAddressToAnonymous: the owner of a run (replica A)
// cannot be reached at the address it registered (here a closed port on
// loopback, written into its replicas row). A request without any
// credential for the run's MCP URL through replica B is answered 502,
// saying the run's replica could not be reached, without naming where
// it lives: the replicas' internal addresses are not the client's to
// learn (the proxy answers before any authentication).
func TestAttackReplicaAddressToAnonymous(t *testing.T) {
	_, _, baseB, run, db := replicasAtGate(t)
	const hidden = "127.0.0.1:1"
	if _, err := db.Exec(context.Background(), `UPDATE replicas SET address = 'http://`+hidden+`' WHERE id = (SELECT owner FROM runs WHERE id = $1)`, run); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(baseB + "/mcp/runs/" + run)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(string(body), hidden) || !strings.Contains(string(body), run) {
		t.Errorf("anonymous request through B to an unreachable owner: %d %s; want 502 naming the run, not the owner's address", resp.StatusCode, body)
	}
}
