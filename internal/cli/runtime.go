package cli

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/preflight"
	"github.com/openplaybook/openplaybook/report"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// Exit codes of run and resume (docs/cli.md).
const (
	ExitWaiting  = 3 // the run waits for a person (an approval or a gate)
	ExitRejected = 4 // the run ended rejected at a gate
)

// session is an imported document ready to run: its connected host, its
// store and its runtime session. Close releases all of them.
type session struct {
	host  *host.Host
	store *store.Store
	run   *runtime.Session
}

func (s *session) Close() {
	if s.host != nil {
		s.host.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
}

// importForRun does what a run does before anything executes, printing
// what stops it: load the harness (an error in it stops here), read the
// document, open the store (loading the harness's seed), connect what the
// document needs, and open the runtime session (validate and check: an
// error-level diagnostic stops it). docPath may be "" when src is given
// (resume runs the document bytes the run was started with).
//
// acceptHarnessChange is resume's --accept-harness-change.
func (c *CLI) importForRun(ctx context.Context, harnessPath, docPath string, src []byte, srcName string, acceptHarnessChange bool) (*session, error) {
	h, hds, err := harness.Load(harnessPath)
	if err != nil {
		return nil, ioError(fmt.Errorf("reading the harness: %w", err))
	}
	hsrc, err := os.ReadFile(harnessPath)
	if err != nil {
		return nil, ioError(fmt.Errorf("reading the harness: %w", err))
	}
	name := docPath
	if src == nil {
		if src, err = readFile(docPath); err != nil {
			return nil, ioError(err)
		}
	} else {
		name = srcName
	}
	files := []report.File{{Name: harnessPath, Src: hsrc}, {Name: name, Src: src}}
	doc, rds := playbook.Read(name, src, nil)
	stop := func(ds []diag.Diagnostic, redact func(string) string) error {
		for i := range ds {
			ds[i].Message = redact(ds[i].Message)
		}
		diag.Sort(ds)
		fmt.Fprintln(c.stderr(), "openplaybook: the document does not pass check against the harness; nothing was run:")
		_ = report.Write(c.stderr(), "text", files, keep(ds, diag.Error), nil)
		return failed
	}
	if diag.Count(hds, diag.Error) > 0 {
		// A harness with errors (a credential written into it, a bad
		// binding) is not used to start or contact anything.
		return nil, stop(append(hds, rds...), h.SecretResolver().Redact)
	}
	s := &session{}
	if h.Store != nil && h.Store.Seed != "" {
		if _, err := store.ReadSeed(h.Store.Seed); err != nil {
			s.host = host.Offline(h)
			return nil, stop(append(hds, diag.Diagnostic{File: h.Path, Line: 1, Column: 1, Pointer: "/store/seed", Severity: diag.Error,
				Rule: host.RuleStore, Message: fmt.Sprintf("the store seed cannot be used: %v", err)}), s.host.Secrets.Redact)
		}
	}
	if s.store, err = host.OpenStore(ctx, h); err != nil {
		return nil, ioError(err)
	}
	s.host = host.Connect(ctx, h, []*playbook.Document{doc}, &host.Options{Store: s.store})
	redact := s.host.Secrets.Redact
	var ds []diag.Diagnostic
	s.run, ds, err = runtime.Open(ctx, runtime.SessionOptions{
		Document: doc,
		Registry: s.host.Registry,
		Store:    s.store,
		Driver:   s.host.Drivers(playbook.Str(doc.Manifest.ID)),
		Check: func(ctx context.Context, doc *playbook.Document) []diag.Diagnostic {
			ds := append(append(append([]diag.Diagnostic(nil), hds...), rds...), s.host.Diagnostics...)
			return append(ds, preflight.Check(ctx, s.host, doc)...)
		},
		Progress:            c.stderr(),
		HarnessPath:         harnessPath,
		HarnessDigest:       fmt.Sprintf("%x", sha256.Sum256(hsrc)),
		AcceptHarnessChange: acceptHarnessChange,
		MaxToolCalls:        h.Runtime.MaxToolCalls,
		ApprovalExpiry:      h.Runtime.ApprovalExpiry,
		Redact:              redact,
	})
	if errors.Is(err, runtime.ErrNotRunnable) {
		s.Close()
		return nil, stop(ds, redact)
	}
	if err != nil {
		s.Close()
		return nil, &exitError{code: ExitProblems, err: err}
	}
	return s, nil
}

func keep(ds []diag.Diagnostic, sev diag.Severity) []diag.Diagnostic {
	var out []diag.Diagnostic
	for _, d := range ds {
		if d.Severity >= sev {
			out = append(out, d)
		}
	}
	return out
}

// readInput reads --input: a JSON text, @file, or @- for standard input.
func (c *CLI) readInput(v string) (jsontext.Value, error) {
	if v == "" {
		return nil, nil
	}
	if v == "@-" {
		return c.readStdin()
	}
	if name, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return jsontext.Value(v), nil
}

// finish prints the outcome and maps it to the exit code.
func (c *CLI) finish(out runtime.Outcome, runErr error, format, harnessPath string) error {
	if format == "json" {
		b, err := json.Marshal(out, jsontext.WithIndent("  "))
		if err != nil {
			return ioError(err)
		}
		fmt.Fprintln(c.stdout(), string(b))
	} else if out.Run != "" && out.Status != "" {
		fmt.Fprintf(c.stdout(), "run %s %s\n", out.Run, out.Status)
		for _, p := range out.Waiting {
			if p.Kind == "resume" {
				fmt.Fprintf(c.stdout(), "  %s\n", p.Summary)
				continue
			}
			fmt.Fprintf(c.stdout(), "  waiting: %s\n    openplaybook approve --harness %s %s %s   (or deny)\n", p.Summary, harnessPath, out.Run, p.ID)
		}
		if out.Status == runtime.Waiting {
			fmt.Fprintf(c.stdout(), "  then: openplaybook resume --harness %s %s\n", harnessPath, out.Run)
		}
		if out.Reason != "" && out.Status != runtime.Waiting {
			fmt.Fprintf(c.stdout(), "  %s\n", out.Reason)
		}
	}
	if runErr != nil {
		return &exitError{code: ExitProblems, err: runErr}
	}
	switch out.Status {
	case runtime.Completed:
		return nil
	case runtime.Waiting:
		return &exitError{code: ExitWaiting}
	case runtime.Rejected:
		return &exitError{code: ExitRejected}
	}
	return failed
}
