package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/obs"
	"github.com/openplaybook/openplaybook/report"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// Exit codes of run, resume and retry (docs/cli.md).
const (
	ExitWaiting  = 3 // the run waits for a person (an approval or a gate)
	ExitRejected = 4 // the run ended rejected at a gate
)

// session is an imported document ready to run: its connected host, its
// store and its runtime session. Close releases all of them.
type session struct {
	opened *launch.Opened
	store  store.Store
	run    *runtime.Session
	// obs, when set, wraps store: decision lines, spans and metrics of
	// what the run commits (--log-format, --log-level, OTEL_*).
	obs *obs.Obs
}

func (s *session) Close() {
	s.opened.Close()
	shutdown(s.obs)
	if s.store != nil {
		s.store.Close()
	}
}

// opener opens a document's session for [CLI.openSession]: it sets the
// session's store, and returns what launch returned and the document's
// bytes (nil when not read), for the report's snippets.
type opener func(ctx context.Context, lh *launch.Harness, s *session) (*launch.Opened, []diag.Diagnostic, []byte, error)

// importForRun does what a run does before anything executes (package
// launch), printing what stops it: load the harness (an error in it stops
// here), read the document, open the store (loading the harness's seed),
// connect what the document needs, and open the runtime session (validate
// and check: an error-level diagnostic stops it).
func (c *CLI) importForRun(ctx context.Context, harnessPath, docPath string, lf logFlags) (*session, error) {
	src, err := readFile(docPath, 0)
	if err != nil {
		return nil, ioError(err)
	}
	return c.openSession(ctx, harnessPath, docPath, lf, func(ctx context.Context, lh *launch.Harness, s *session) (*launch.Opened, []diag.Diagnostic, []byte, error) {
		if lh.Unusable() == nil {
			if s.store, err = host.OpenStore(ctx, lh.H); err != nil {
				return nil, nil, src, ioError(err)
			}
			s.store = observed(s.obs, s.store)
		}
		o, ds, err := launch.Open(ctx, lh, launch.Options{Name: docPath, Src: src, Store: s.store, Progress: c.stderr()})
		return o, ds, src, err
	})
}

// openRun opens the existing run runID for resume or retry
// ([launch.OpenRun]): the harness is checked against the one the run was
// last run with before anything of it is used, then the run's document
// (the bytes stored with it) is opened as importForRun opens one.
// acceptHarnessChange is --accept-harness-change.
func (c *CLI) openRun(ctx context.Context, harnessPath, runID string, acceptHarnessChange bool, lf logFlags) (*session, error) {
	name := "<document of " + runID + ">"
	return c.openSession(ctx, harnessPath, name, lf, func(ctx context.Context, lh *launch.Harness, s *session) (*launch.Opened, []diag.Diagnostic, []byte, error) {
		if bad := lh.Unusable(); bad != nil {
			return nil, bad, nil, launch.ErrHarness
		}
		var err error
		if s.store, err = host.OpenStoreFile(lh.H); err != nil {
			return nil, nil, nil, ioError(err)
		}
		s.store = observed(s.obs, s.store)
		o, run, ds, err := launch.OpenRun(ctx, lh, runID, launch.Options{Store: s.store, Progress: c.stderr(), AcceptHarnessChange: acceptHarnessChange})
		if errors.Is(err, store.ErrNotFound) {
			err = runError(err, runID, harnessPath)
		}
		return o, ds, run.Document, err
	})
}

// openSession loads the harness and opens a session with open, printing
// what stops it: the harness's or the document's error-level
// diagnostics.
func (c *CLI) openSession(ctx context.Context, harnessPath, name string, lf logFlags, open opener) (*session, error) {
	lh, err := launch.Load(harnessPath)
	if err != nil {
		return nil, ioError(fmt.Errorf("reading the harness: %w", err))
	}
	s := &session{}
	if s.obs, err = c.observer(ctx, lf); err != nil {
		return nil, err
	}

	gcForCalls()
	var (
		ds  []diag.Diagnostic
		src []byte
	)
	s.opened, ds, src, err = open(ctx, lh, s)
	if errors.Is(err, runtime.ErrNotRunnable) || errors.Is(err, launch.ErrHarness) {
		s.Close()
		fmt.Fprintln(c.stderr(), "openplaybook: the document does not pass check against the harness; nothing was run:")
		files := []report.File{{Name: harnessPath, Src: lh.Src}, {Name: name, Src: src}}
		_ = report.Write(c.stderr(), "text", files, keep(ds, diag.Error), nil)
		return nil, failed
	}
	if err != nil {
		s.Close()
		var ee *exitError
		if errors.As(err, &ee) {
			return nil, err
		}
		return nil, &exitError{code: ExitProblems, err: err}
	}
	s.run = s.opened.Session
	if s.opened.Host != nil && s.opened.Host.Secrets != nil {
		// Every line passes the secret redactor of the harness's
		// resolved secrets, as the audit log's values do.
		s.obs.SetRedact(s.opened.Host.Secrets.Redact)
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
		return c.readStdin(0)
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

// runFailure is what run and resume print with --format json when the
// command fails (exit 1) with no outcome of the run to show: the document
// does not pass check, the run is not found or is being executed by
// another process, the store is altered, a store error. Status is always
// [statusError]; Run is "" when no run was created.
type runFailure struct {
	Run    string `json:"run"`
	Status string `json:"status"`
	Error  string `json:"error"`
}

// statusError is the status of a [runFailure]: not a status of the run
// (the run's own status is unchanged), but that the command failed.
const statusError = "error"

// notRunnable is the error of a document that does not pass check: its
// diagnostics are on standard error.
const notRunnable = "the document does not pass check against the harness; nothing was run (the diagnostics are on standard error)"

// failRun ends run or resume with err (an *exitError). With --format
// json, a failure that is not a usage error (exit 2, which prints nothing
// on standard output) also prints a [runFailure] for run runID ("" when
// none) on standard output.
func (c *CLI) failRun(format, runID string, err error) error {
	var ee *exitError
	if format != "json" || !errors.As(err, &ee) || ee.code == ExitUsage {
		return err
	}
	msg := notRunnable
	if ee.err != nil {
		msg = ee.err.Error()
	}
	if b, jerr := json.Marshal(runFailure{Run: runID, Status: statusError, Error: msg}, jsontext.WithIndent("  ")); jerr == nil {
		fmt.Fprintln(c.stdout(), string(b))
	}
	return err
}

// finish prints the outcome and maps it to the exit code. With an error
// (runErr), the JSON output is a [runFailure].
func (c *CLI) finish(out runtime.Outcome, runErr error, format, harnessPath string) error {
	if format == "json" && runErr != nil {
		return c.failRun(format, out.Run, &exitError{code: ExitProblems, err: runErr})
	}
	if format == "json" {
		b, err := json.Marshal(out, jsontext.WithIndent("  "))
		if err != nil {
			return ioError(err)
		}
		fmt.Fprintln(c.stdout(), string(b))
	} else if out.Run != "" && out.Status != "" {
		fmt.Fprintf(c.stdout(), "run %s %s\n", out.Run, out.Status)
		for _, p := range out.Waiting {
			switch p.Kind {
			case "resume":
				fmt.Fprintf(c.stdout(), "  %s\n", p.Summary)
				continue
			case "agent":
				fmt.Fprintf(c.stdout(), "  waiting: %s\n    %s\n", p.Summary, agentHint(harnessPath, out.Run))
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
		if out.Retry {
			fmt.Fprintf(c.stdout(), "  the failure is transient; to try the step again: openplaybook retry --harness %s %s\n", harnessPath, out.Run)
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

// agentHint is the command line that connects a waiting run's external
// agent (a step waits for it, nothing for a person to approve): the
// stdio MCP endpoint, or serve's with the run's agent token
// (docs/serve.md).
func agentHint(harnessPath, run string) string {
	return fmt.Sprintf("connect it: openplaybook mcp --harness %s --run %s   (or serve's /mcp/runs/%s with openplaybook agent-token %s)", harnessPath, run, run, run)
}
