package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

func (c *CLI) runCommand() *cobra.Command {
	var harnessPath, input string
	format := newChoice("text", []string{"text", "json"})
	cmd := &cobra.Command{
		Use:                   "run [--harness FILE] [--input JSON|@file] [--format text|json] DOC",
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
audit log ('openplaybook audit RUN --verify').

The run outlives the process: when it waits for a person, decide with
'openplaybook approve|deny RUN ID' and continue with 'openplaybook resume RUN'.

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
			in, err := readInput(input)
			if err != nil {
				return ioError(fmt.Errorf("reading --input: %w", err))
			}
			s, err := c.importForRun(ctx, harnessPath, args[0], nil, "", false)
			if err != nil {
				return err
			}
			defer s.Close()
			out, err := s.run.Start(ctx, in)
			if out.Run == "" && err != nil {
				var bad *runtime.InputError
				if errors.As(err, &bad) && bad.Syntax {
					return &exitError{code: ExitUsage, err: fmt.Errorf("--input: %w", err)}
				}
				return &exitError{code: ExitProblems, err: err}
			}
			return c.finish(out, err, format.value, harnessPath)
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file (YAML or JSON; see docs/harness.md)")
	cmd.Flags().StringVar(&input, "input", "", "the run's input: a JSON object, or @file to read it from a file")
	formatFlag(cmd, format, "output format: text or json (json prints {run, status, reason, waiting})")
	return cmd
}

func (c *CLI) resumeCommand() *cobra.Command {
	var harnessPath string
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
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := ctxOf(cmd)
			st, h, err := c.storeFor(harnessPath)
			if err != nil {
				return err
			}
			run, err := st.GetRun(ctx, args[0])
			st.Close()
			_ = h
			if err != nil {
				return &exitError{code: ExitProblems, err: fmt.Errorf("run %s: %w", args[0], err)}
			}
			s, err := c.importForRun(ctx, harnessPath, "", run.Document, "<document of "+run.ID+">", acceptHarness)
			if err != nil {
				return err
			}
			defer s.Close()
			out, err := s.run.Resume(ctx, run.ID)
			return c.finish(out, err, format.value, harnessPath)
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file the run was started with")
	cmd.Flags().BoolVar(&acceptHarness, "accept-harness-change", false, "resume with a harness file other than the one the run was started with (recorded in the audit log)")
	formatFlag(cmd, format, "output format: text or json")
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
	verb := "deny"
	if approve {
		verb = "approve"
	}
	cmd := &cobra.Command{
		Use:                   verb + " [--harness FILE] [--reason TEXT] [--by NAME] RUN ID",
		DisableFlagsInUseLine: true,
		Short:                 strings.ToUpper(verb[:1]) + verb[1:] + " a gate or a pending tool-call approval of a run",
		Long:                  decideHelp[approve],
		Args:                  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, h, err := c.storeFor(harnessPath)
			if err != nil {
				return err
			}
			defer st.Close()
			if by == "" {
				by = "cli"
			}
			// A secret value typed into a reason is never stored.
			redact := secretRedactor(ctxOf(cmd), h, st, args[0])
			what, err := runtime.Decide(ctxOf(cmd), st, args[0], args[1], runtime.Verdict{Approve: approve, Reason: redact(reason), By: redact(by)})
			if err != nil {
				return &exitError{code: ExitProblems, err: err}
			}
			fmt.Fprintf(c.stdout(), "%s %s; continue with: openplaybook resume --harness %s %s\n", what, map[bool]string{true: "approved", false: "denied"}[approve], harnessPath, args[0])
			return nil
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file (its store holds the run)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the audit log)")
	cmd.Flags().StringVar(&by, "by", "", "who decides (recorded; default \"cli\")")
	return cmd
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
func secretRedactor(ctx context.Context, h *harness.Harness, st *store.Store, runID string) func(string) string {
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
