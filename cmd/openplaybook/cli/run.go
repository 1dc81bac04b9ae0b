package cli

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

func (c *CLI) runCommand() *cobra.Command {
	var harnessPath, input string
	var lf logFlags
	format := newChoice("text", []string{"text", "json"})
	cmd := &cobra.Command{
		Use:                   "run [--harness FILE] [--input JSON|@file|@-] [--format text|json] DOC",
		DisableFlagsInUseLine: true,
		Short:                 "Run a playbook with the capability boundary held",
		Long: `Run imports DOC (validate and check against the harness: an error-level
drift or preflight failure stops the run before anything executes), validates
the input against the document's inputSchema, creates a run in the store and
executes steps from the entry step. Progress goes to standard error: each
step, each tool call allowed, refused or waiting for approval.

Every tool call goes through one decision path: the exact name must be on
the executing step's allowedTools, resolve in the registry, and have
arguments valid against its inputSchema; a tool with requiresApproval waits
for 'openplaybook approve'. Everything is recorded in the run's hash-chained
audit log ('openplaybook audit --harness FILE --verify RUN').

The run outlives the process: when it waits for a person, decide with
'openplaybook approve|deny --harness FILE RUN ID' and continue with
'openplaybook resume --harness FILE RUN' (each printed with the harness
used).

Exit status: 0 completed, 3 waits for a person, 4 rejected at a gate,
1 failed (or the document does not pass check), 2 bad usage.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("run takes exactly one DOC")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := ctxOf(cmd)
			in, err := c.readInput(input)
			if err != nil {
				return ioError(fmt.Errorf("reading --input: %w", err))
			}
			s, err := c.importForRun(ctx, harnessPath, args[0], lf)
			if err != nil {
				return c.failRun(format.value, "", err)
			}
			defer s.Close()
			out, err := s.run.Start(ctx, in)
			if out.Run == "" && err != nil {
				var bad *runtime.InputError
				if errors.As(err, &bad) && bad.Syntax {
					return &exitError{code: ExitUsage, err: fmt.Errorf("--input: %w", err)}
				}
				return c.failRun(format.value, "", &exitError{code: ExitProblems, err: err})
			}
			return c.finish(out, err, format.value, harnessPath)
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file (YAML or JSON; see docs/harness.md)")
	cmd.Flags().StringVar(&input, "input", "", "the run's input: a JSON object, @file to read it from a file, or @- from standard input")
	formatFlag(cmd, format, "output format: text or json (json prints {run, status, reason, waiting}, or {run, status: \"error\", error})")
	addLogFlags(cmd, &lf)
	return cmd
}

func (c *CLI) resumeCommand() *cobra.Command {
	var harnessPath string
	var lf logFlags
	var acceptHarness bool
	format := newChoice("text", []string{"text", "json"})
	cmd := &cobra.Command{
		Use:                   "resume [--harness FILE] [--format text|json] RUN",
		DisableFlagsInUseLine: true,
		Short:                 "Continue a run from its last recorded point",
		Long: `Resume continues RUN with the document it was started with (kept in the
store), checked again against the harness. Decisions made with approve and
deny take effect now. Calls the run already made are answered from the store
and never executed twice; a side-effecting call that started but has no
recorded outcome is marked outcome-unknown and waits for a person.

Before anything runs, resume verifies the run's audit chain and that the
store's rows agree with it (a decision flipped in SQLite is refused), and
that the harness file is the one the run was started with (its SHA-256 is
recorded); --accept-harness-change goes on with another, and records that.

Exit status: as run.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := ctxOf(cmd)
			st, _, err := c.storeFor(harnessPath)
			if err != nil {
				return c.failRun(format.value, args[0], err)
			}
			run, err := st.GetRun(ctx, args[0])
			st.Close()
			if err != nil {
				return c.failRun(format.value, args[0], &exitError{code: ExitProblems, err: runError(err, args[0], harnessPath)})
			}
			if run.Status == store.RunFailed {
				return &exitError{code: ExitProblems, err: fmt.Errorf("run %s has failed (%s); resume continues a run that has not ended. To start a new attempt of its failed step: openplaybook retry --harness %s %s", run.ID, run.Reason, harnessPath, run.ID)}
			}
			s, err := c.openRun(ctx, harnessPath, run.ID, acceptHarness, lf)
			if err != nil {
				return c.failRun(format.value, run.ID, err)
			}
			defer s.Close()
			out, err := s.run.Resume(ctx, run.ID)
			return c.finish(out, err, format.value, harnessPath)
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file the run was started with")
	cmd.Flags().BoolVar(&acceptHarness, "accept-harness-change", false, "resume with a harness file other than the one the run was started with (recorded in the audit log)")
	formatFlag(cmd, format, "output format: text or json (as run)")
	addLogFlags(cmd, &lf)
	return cmd
}

func (c *CLI) retryCommand() *cobra.Command {
	var harnessPath, reason, by string
	var lf logFlags
	var acceptHarness, force bool
	format := newChoice("text", []string{"text", "json"})
	cmd := &cobra.Command{
		Use:                   "retry [--harness FILE] [--force] [--reason TEXT] [--by NAME] [--accept-harness-change] [--format text|json] RUN",
		DisableFlagsInUseLine: true,
		Short:                 "Start a new attempt of the step a failed run failed at",
		Long: `Retry starts a new attempt of the step RUN failed at, and runs on from
there as resume does, when the failure was transient: the model API answered
408, 409, 429 or 5xx (after the driver's own retries), a request timed out, or
the connection failed (the step's step.failed record says "transient").
Any other failure (a refused or cut-off reply, a refused key, the turn limit)
is refused with the reason; --force retries it anyway. A cancelled run is
never retried.

The failed attempt's calls stay its own and never run again: the new attempt's
agent is given those that ran with their results, a call it asks again exactly
is answered from the record, and a new side-effecting call to a tool that
already ran waits for a person. The retry is recorded (run.retried,
step.retried) with --by and --reason.

Before anything runs, retry checks the run as resume does (audit chain, store,
document, harness) and the document against the harness.

Exit status: as run (0 completed, 3 waits for a person, 4 rejected, 1 failed
or refused).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := ctxOf(cmd)
			st, _, err := c.storeFor(harnessPath)
			if err != nil {
				return err
			}
			run, err := st.GetRun(ctx, args[0])
			if err == nil && by == "" {
				by = c.userName()
			}
			st.Close()
			if err != nil {
				return &exitError{code: ExitProblems, err: runError(err, args[0], harnessPath)}
			}
			if run.Status != store.RunFailed {
				next := ""
				if !run.Status.Ended() {
					next = fmt.Sprintf("; continue it with: openplaybook resume --harness %s %s", harnessPath, run.ID)
				}
				return &exitError{code: ExitProblems, err: fmt.Errorf("run %s is %s, not failed; retry starts a new attempt only of a failed run's failed step%s", run.ID, run.Status, next)}
			}
			// The harness is checked before anything of it is used (no
			// secret is looked up before); the session redacts by and
			// reason of every secret the run can reach.
			s, err := c.openRun(ctx, harnessPath, run.ID, acceptHarness, lf)
			if err != nil {
				return err
			}
			defer s.Close()
			out, err := s.run.Retry(ctx, run.ID, runtime.RetryOptions{By: by, Reason: reason, Force: force})
			if errors.Is(err, runtime.ErrNotRetryable) {
				return &exitError{code: ExitProblems, err: err}
			}
			return c.finish(out, err, format.value, harnessPath)
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file the run was started with")
	cmd.Flags().BoolVar(&force, "force", false, "retry a step whose failure was not transient (never a cancelled run)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the audit log)")
	cmd.Flags().StringVar(&by, "by", "", "who retries (recorded; default: the OS user name, else $USER, else \"cli\")")
	cmd.Flags().BoolVar(&acceptHarness, "accept-harness-change", false, "retry with a harness file other than the one the run was last run with (recorded in the audit log)")
	formatFlag(cmd, format, "output format: text or json")
	addLogFlags(cmd, &lf)
	return cmd
}

func ctxOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// decideCommand is approve or deny.
func (c *CLI) decideCommand(approve bool) *cobra.Command {
	var harnessPath, reason, by string
	var lf logFlags
	format := newChoice("text", []string{"text", "json"})
	verb := "deny"
	if approve {
		verb = "approve"
	}
	cmd := &cobra.Command{
		Use:                   verb + " [--harness FILE] [--reason TEXT] [--by NAME] [--format text|json] RUN ID",
		DisableFlagsInUseLine: true,
		Short:                 strings.ToUpper(verb[:1]) + verb[1:] + " a gate or a pending tool-call approval of a run",
		Long:                  decideHelp[approve],
		Args:                  cobra.ExactArgs(2),
		ValidArgsFunction:     c.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := ctxOf(cmd)
			runID, id := args[0], args[1]
			o, err := c.observer(ctx, lf)
			if err != nil {
				return err
			}
			st, h, err := c.storeFor(harnessPath)
			if err != nil {
				shutdown(o)
				return err
			}
			defer st.Close()
			st = observed(o, st)
			defer shutdown(o)
			if by == "" {
				by = c.userName()
			}
			if _, err := st.GetRun(ctx, runID); err != nil {
				return &exitError{code: ExitProblems, err: runError(err, runID, harnessPath)}
			}
			// A secret value typed into a reason is never stored.
			redact := secretRedactor(ctx, h, st, runID)
			o.SetRedact(redact)
			v := runtime.Verdict{Approve: approve, Reason: redact(reason), By: redact(by)}
			what, err := runtime.Decide(ctx, st, runID, id, v)
			if err != nil {
				return &exitError{code: ExitProblems, err: decideError(err, runID, id, harnessPath)}
			}
			decision := map[bool]string{true: "approved", false: "denied"}[approve]
			resume := fmt.Sprintf("openplaybook resume --harness %s %s", harnessPath, runID)
			if format.value == "json" {
				b, err := json.Marshal(decided{Run: runID, Kind: what.Kind, ID: what.ID, Decision: decision, By: v.By, Reason: v.Reason, Next: resume},
					jsontext.WithIndent("  "))
				if err != nil {
					return ioError(err)
				}
				fmt.Fprintln(c.stdout(), string(b))
				return nil
			}
			fmt.Fprintf(c.stdout(), "%s %s; continue with: %s\n", what, decision, resume)
			return nil
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file (its store holds the run)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the audit log)")
	cmd.Flags().StringVar(&by, "by", "", "who decides (recorded; default: the OS user name, else $USER, else \"cli\")")
	formatFlag(cmd, format, "output format: text or json (json prints {run, kind, id, decision, by, reason, next})")
	addLogFlags(cmd, &lf)
	return cmd
}

// decided is what approve and deny print with --format json.
type decided struct {
	Run      string `json:"run"`
	Kind     string `json:"kind"` // "gate" or "approval"
	ID       string `json:"id"`
	Decision string `json:"decision"` // "approved" or "denied"
	By       string `json:"by"`
	Reason   string `json:"reason"`
	Next     string `json:"next"` // the command that lets the decision take effect
}

// runError words an error reading run runID: one not found names the
// command that lists runs, with the harness file used.
func runError(err error, runID, harnessPath string) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("run %s not found; 'openplaybook status --harness %s' lists runs", runID, harnessPath)
	}
	return fmt.Errorf("run %s: %w", runID, err)
}

// decideError words an error of [runtime.Decide] (which returns store
// errors as they are) as what to do next.
func decideError(err error, runID, id, harnessPath string) error {
	next := fmt.Sprintf("'openplaybook status --harness %s %s' lists what it waits for", harnessPath, runID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("run %s has no approval %s; %s", runID, id, next)
	case errors.Is(err, store.ErrState):
		return fmt.Errorf("%s; only a pending approval can be decided; %s", trimStorePrefix(err, store.ErrState), next)
	case errors.Is(err, store.ErrExpired):
		return fmt.Errorf("%s; an expired approval can no longer be decided; %s", trimStorePrefix(err, store.ErrExpired), next)
	}
	return err
}

// trimStorePrefix is err's text without the store sentinel's wording
// ("store: wrong state: ...").
func trimStorePrefix(err, sentinel error) string {
	s := err.Error()
	if i := strings.Index(s, sentinel.Error()+": "); i >= 0 {
		return s[:i] + s[i+len(sentinel.Error())+2:]
	}
	return s
}

// userName is who decides when --by is not given: the OS user name, else
// $USER, else "cli".
func (c *CLI) userName() string { return userName(user.Current, c.getenv) }

func userName(current func() (*user.User, error), getenv func(string) string) string {
	if u, err := current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := getenv("USER"); u != "" {
		return u
	}
	return "cli"
}

var decideHelp = map[bool]string{
	true: `ID is a waiting gate's step id, or an approval id (apr_...) that
'openplaybook status --harness FILE RUN' shows with the call's exact
arguments. The decision is recorded in the store and the audit log; it takes
effect when the run is resumed ('openplaybook resume --harness FILE RUN').

Approving a gate follows its "next". Approving a tool call lets exactly that
call (same step, tool, definition and arguments) run once. Approving an
outcome-unknown call runs it again.`,
	false: `ID is a waiting gate's step id, or an approval id (apr_...) that
'openplaybook status --harness FILE RUN' shows. The decision is recorded in
the store and the audit log; it takes effect when the run is resumed
('openplaybook resume --harness FILE RUN').

Denying a gate follows its "onReject", or ends the run rejected when it has
none. Denying a tool call refuses it: it never runs, and the agent is told.
Denying an outcome-unknown call leaves it as it is: it is not run again, and
the agent is told.`,
}

// secretRedactor resolves every secret the harness names and the run's
// document requires, and returns what removes their values from text.
func secretRedactor(ctx context.Context, h *harness.Harness, st store.Store, runID string) func(string) string {
	sec := h.SecretResolver()
	names := h.SecretNames()
	if run, err := st.GetRun(ctx, runID); err == nil {
		doc, _ := playbook.Read("run", run.Document, nil)
		if doc.Requires != nil {
			for _, s := range doc.Requires.Secrets {
				names = append(names, playbook.Str(s.Name))
			}
		}
	}
	for _, n := range names {
		_, _ = sec.Resolve(n)
	}
	return sec.Redact
}
