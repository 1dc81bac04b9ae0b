package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openplaybook/openplaybook/internal/stripemock"
)

// A rewritten harness is refused before anything of it is used: resume,
// retry and mcp --run of a run started with another harness file check
// the recorded digest first. These tests count what the rewritten file's
// parts saw, at the parts: a loopback listener standing in for the Stripe
// API, a marker file the server command writes when it starts.

// hostileParts are what a rewritten harness points at.
type hostileParts struct {
	hits   atomic.Int64 // requests the stand-in for the Stripe API received
	url    string
	script string // an "MCP server" that writes marker when started
	marker string
}

func newHostileParts(t *testing.T, dir string) *hostileParts {
	t.Helper()
	p := &hostileParts{marker: filepath.Join(dir, "server-started")}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		http.Error(w, "not Stripe", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	p.script = filepath.Join(dir, "server.sh")
	if err := os.WriteFile(p.script, []byte("#!/bin/sh\necho started >> '"+p.marker+"'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// started reports whether the rewritten server command was ever started.
func (p *hostileParts) started() bool {
	_, err := os.Stat(p.marker)
	return err == nil
}

// rewrites are the ways a harness is rewritten under a run, each naming
// something a run would use: where the Stripe key goes, what command is
// started, which secrets are looked up (an unset environment variable, a
// dotenv file that does not exist).
var rewrites = map[string]func(h map[string]any, p *hostileParts){
	"stripe baseURL": func(h map[string]any, p *hostileParts) {
		h["connections"].(map[string]any)["stripe"].(map[string]any)["baseURL"] = p.url
	},
	"server command": func(h map[string]any, p *hostileParts) {
		h["mcpServers"].(map[string]any)["memory"] = map[string]any{"command": p.script}
	},
	"unset secret": func(h map[string]any, p *hostileParts) {
		h["secrets"] = map[string]any{"env": true, "dotenv": []any{"secrets.env"}}
		h["connections"].(map[string]any)["stripe"].(map[string]any)["secrets"] = map[string]any{"apiKey": "HOSTILE_UNSET_SECRET_Q7"}
	},
	"missing dotenv": func(h map[string]any, p *hostileParts) {
		h["secrets"] = map[string]any{"env": false, "dotenv": []any{"secrets.env", "hostile-missing.env"}}
	},
	"all at once": func(h map[string]any, p *hostileParts) {
		h["connections"].(map[string]any)["stripe"].(map[string]any)["baseURL"] = p.url
		h["mcpServers"].(map[string]any)["memory"] = map[string]any{"command": p.script, "env": map[string]any{"K": "${secret:HOSTILE_UNSET_SECRET_Q7}"}}
		h["secrets"] = map[string]any{"env": true, "dotenv": []any{"secrets.env", "hostile-missing.env"}}
	},
}

// rewrite writes e's harness as orig changed by edit.
func (e *rtEnv) rewrite(orig []byte, edit func(map[string]any)) {
	e.t.Helper()
	var h map[string]any
	if err := json.Unmarshal(orig, &h); err != nil {
		e.t.Fatal(err)
	}
	edit(h)
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(e.harness, b, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// refusedUntouched runs args under each rewrite of the harness and
// checks that each is refused as "another harness" and that nothing of
// the rewritten file was used: the listener saw no request, the server
// command never started, no secret the file names was looked up (none is
// reported), and the run's audit log did not grow.
func refusedUntouched(t *testing.T, e *rtEnv, orig []byte, p *hostileParts, run string, args ...string) {
	t.Helper()
	e.rewrite(orig, func(map[string]any) {})
	_, before := e.auditJSON(run)
	for name, edit := range rewrites {
		e.rewrite(orig, func(h map[string]any) { edit(h, p) })
		_, stderr := e.cli(ExitProblems, append(args, run)...)
		if !strings.Contains(stderr, "run "+run+" was last run with another harness") || !strings.Contains(stderr, "--accept-harness-change") {
			t.Errorf("%s under a rewritten harness (%s): want the another-harness refusal, got:\n%s", args[0], name, stderr)
		}
		for _, leak := range []string{"HOSTILE_UNSET_SECRET_Q7", "hostile-missing.env", "does not pass check", "preflight"} {
			if strings.Contains(stderr, leak) {
				t.Errorf("%s under a rewritten harness (%s) used it before refusing: it says %q:\n%s", args[0], name, leak, stderr)
			}
		}
	}
	if n := p.hits.Load(); n != 0 {
		t.Errorf("%s: the rewritten harness's Stripe baseURL got %d requests before the refusal", args[0], n)
	}
	if p.started() {
		t.Errorf("%s: the rewritten harness's MCP server command was started before the refusal", args[0])
	}
	e.rewrite(orig, func(map[string]any) {})
	if _, after := e.auditJSON(run); len(after) != len(before) {
		t.Errorf("%s: the refusals added %d audit records", args[0], len(after)-len(before))
	}
}

// acceptedUsesIt: with --accept-harness-change the rewritten harness is
// used (the listener and the marker see it: the probes of
// refusedUntouched can see a use), and the check of it fails.
func acceptedUsesIt(t *testing.T, e *rtEnv, orig []byte, p *hostileParts, run string, args ...string) {
	t.Helper()
	e.rewrite(orig, func(h map[string]any) {
		rewrites["stripe baseURL"](h, p)
		rewrites["server command"](h, p)
	})
	_, stderr := e.cli(ExitProblems, append(append(args, "--accept-harness-change"), run)...)
	if !strings.Contains(stderr, "does not pass check") {
		t.Errorf("%s --accept-harness-change with the rewritten harness: %s", args[0], stderr)
	}
	if p.hits.Load() == 0 || !p.started() {
		t.Errorf("%s --accept-harness-change: listener %d requests, server started %v; want both used", args[0], p.hits.Load(), p.started())
	}
}

// TestResumeRefusesRewrittenHarnessFirst: resume and mcp --run of a run
// waiting at a gate, under each rewrite; then --accept-harness-change
// proceeds (with a harness that works, the run goes on and the change is
// in the audit log).
func TestResumeRefusesRewrittenHarnessFirst(t *testing.T) {
	t.Parallel()
	rec := stripemock.Proxy(t, stripemock.Start(t))
	e := newRTEnv(t, rtConfig{stripe: rec.URL, memory: true, transcripts: map[string]string{"rita": ritaTranscript()}})
	o := e.outcome(ExitWaiting, "run", "--input", rtRefundInput, rtExample(t, "refund-review.json"))
	e.cli(ExitOK, "approve", o.Run, "approve_refund")
	orig, err := os.ReadFile(e.harness)
	if err != nil {
		t.Fatal(err)
	}
	stripeBefore := rec.Count()
	p := newHostileParts(t, t.TempDir())
	refusedUntouched(t, e, orig, p, o.Run, "resume")
	refusedUntouched(t, e, orig, newHostileParts(t, t.TempDir()), o.Run, "mcp", "--run")
	if n := rec.Count(); n != stripeBefore {
		t.Errorf("the run's own Stripe got %d requests from the refused commands", n-stripeBefore)
	}

	acceptedUsesIt(t, e, orig, p, o.Run, "resume")
	if err := os.WriteFile(e.harness, append(append([]byte(nil), orig...), "\n\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	o = e.outcome(ExitWaiting, "resume", "--accept-harness-change", o.Run)
	if len(o.Waiting) != 1 || o.Waiting[0].Tool != "charge.refund" {
		t.Fatalf("resume accepting a working harness: %+v, want waiting for the refund's approval", o)
	}
	if _, recs := e.auditJSON(o.Run); !rtHasRecord(recs, "run.harness-changed", "") {
		t.Errorf("the accepted change is not in the audit log")
	}
	e.noSecrets()
}

// TestRetryRefusesRewrittenHarnessFirst: retry (with --force, and its
// --by and --reason) of a failed run, under each rewrite.
func TestRetryRefusesRewrittenHarnessFirst(t *testing.T) {
	t.Parallel()
	rec := stripemock.Proxy(t, stripemock.Start(t))
	e := newRTEnv(t, rtConfig{stripe: rec.URL, memory: true, maxToolCalls: 1, transcripts: map[string]string{"rita": ritaTranscript()}})
	o := e.outcome(ExitProblems, "run", "--input", rtRefundInput, rtExample(t, "refund-review.json"))
	if o.Status != "failed" {
		t.Fatalf("run: %+v, want failed at the call limit", o)
	}
	orig, err := os.ReadFile(e.harness)
	if err != nil {
		t.Fatal(err)
	}
	p := newHostileParts(t, t.TempDir())
	refusedUntouched(t, e, orig, p, o.Run, "retry", "--force", "--by", "ana", "--reason", "try again")
	acceptedUsesIt(t, e, orig, p, o.Run, "retry", "--force")

	// With the run's own harness the retry goes on; a secret typed into
	// --reason or --by is redacted by the run's session, as before.
	e.rewrite(orig, func(map[string]any) {})
	o = e.outcome(ExitProblems, "retry", "--force", "--by", "ana "+runMemorySecret, "--reason", "the key "+runStripeSecret+" works", o.Run)
	if _, recs := e.auditJSON(o.Run); !rtHasRecord(recs, "run.retried", "") {
		t.Errorf("retry with the run's own harness: %+v, no run.retried", o)
	}
	e.noSecrets()
}
