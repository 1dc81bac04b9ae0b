package cli

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/driver/transcript"
	"github.com/openplaybook/openplaybook/preflight"
	"github.com/openplaybook/openplaybook/report"
	"github.com/openplaybook/openplaybook/runtime"
)

// ReplayCall is one call of a replayed transcript and what the boundary
// decides about it: the JSON shape of `replay --format json` (an array of
// these). Decision is "allowed" or "refused". Tool is the name exactly as
// recorded.
type ReplayCall struct {
	Step     string `json:"step"`
	Tool     string `json:"tool"`
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
	// Approval is true for an allowed call that would also wait for a
	// person's approval (the tool has requiresApproval).
	Approval bool   `json:"approval,omitempty"`
	Location string `json:"location"`
}

func (c *CLI) replayCommand() *cobra.Command {
	var harnessPath string
	format := newChoice("text", []string{"text", "json"})
	cmd := &cobra.Command{
		Use:                   "replay [--harness FILE] [--format text|json] DOC TRANSCRIPT",
		DisableFlagsInUseLine: true,
		Short:                 "Check a recorded agent session against a playbook without executing anything",
		Long: `Replay takes a transcript (the calls each agent step's agent made: see
docs/drivers.md) and reports, for every call, what the runtime's boundary
would decide: the exact name on the step's allowedTools, resolving in the
registry, arguments valid against the inputSchema. Nothing is executed and
no store is written; MCP servers are only listed.

Calls recorded for a step id the playbook does not have, or for a gate
step, are errors positioned in the transcript (as check and run report them
for a transcript the harness binds); then nothing is replayed.

Exit status: 0 every call would be allowed, 1 any would be refused (or the
document does not pass check), 2 bad usage or unreadable input.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return errors.New("replay takes DOC and TRANSCRIPT")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := ctxOf(cmd)
			tr, err := transcript.Load(args[1])
			if err != nil {
				return ioError(err)
			}
			res, err := c.checkWithHarness(ctx, harnessPath, args[:1], 0)
			if err != nil {
				return ioError(err)
			}
			defer res.env.Close()
			if diag.Count(res.diags, diag.Error) > 0 {
				fmt.Fprintln(c.stderr(), "openplaybook: the document does not pass check against the harness; a run would not start:")
				_ = report.Write(c.stderr(), "text", res.files, keep(res.diags, diag.Error), nil)
				return failed
			}
			// Calls recorded for a step id the playbook does not have, or
			// for a gate, are errors where they stand in the transcript,
			// as check and run report them for a transcript the harness
			// binds.
			if tds := preflight.Transcript(res.docs[0], tr); len(tds) > 0 {
				src, _ := os.ReadFile(args[1]) // for the snippets only
				fmt.Fprintln(c.stderr(), "openplaybook: the transcript does not fit the playbook; nothing was replayed:")
				_ = report.Write(c.stderr(), "text", []report.File{{Name: tr.File, Src: src}}, tds, nil)
				return failed
			}
			im, err := runtime.Import(res.docs[0], res.env.Registry)
			if err != nil {
				return &exitError{code: ExitProblems, err: err}
			}
			calls := replay(im, tr)
			refused := 0
			for _, rc := range calls {
				if rc.Decision == "refused" {
					refused++
				}
			}
			if format.value == "json" {
				if calls == nil {
					calls = []ReplayCall{}
				}
				b, err := json.Marshal(calls, jsontext.WithIndent("  "))
				if err != nil {
					return ioError(err)
				}
				fmt.Fprintln(c.stdout(), string(b))
			} else {
				tw := tabwriter.NewWriter(c.stdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "LOCATION\tSTEP\tTOOL\tDECISION\tREASON")
				for _, rc := range calls {
					reason := rc.Reason
					if rc.Approval {
						reason = "waits for a person's approval (requiresApproval)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", rc.Location, rc.Step, strconv.QuoteToASCII(rc.Tool), rc.Decision, reason)
				}
				tw.Flush()
				fmt.Fprintf(c.stdout(), "%d calls, %d would be refused\n", len(calls), refused)
			}
			if refused > 0 {
				return failed
			}
			return nil
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file (for the registry)")
	formatFlag(cmd, format, "output format: text, or json (an array of {step, tool, decision, reason, approval, location})")
	return cmd
}

// replay decides every call of the transcript, in the playbook's step
// order. Entries for steps the playbook does not have, or for gates, are
// [preflight.Transcript]'s errors, found before.
func replay(im *runtime.Imported, tr *transcript.Transcript) []ReplayCall {
	var out []ReplayCall
	seen := map[string]bool{}
	one := func(step string) {
		seen[step] = true
		for _, e := range tr.Calls(step) {
			d := im.Decide(step, e.Tool, e.Arguments)
			rc := ReplayCall{Step: step, Tool: e.Tool, Decision: "allowed", Reason: d.Reason,
				Location: fmt.Sprintf("%s:%d:%d", tr.File, e.Line, e.Column)}
			if !d.Allowed {
				rc.Decision = "refused"
				rc.Reason = string(d.Code) + ": " + d.Reason
			} else {
				rc.Approval = im.NeedsApproval(e.Tool)
			}
			out = append(out, rc)
		}
	}
	for _, s := range im.Doc.Steps {
		if s.ID != nil && !seen[s.ID.Value] {
			one(s.ID.Value)
		}
	}
	return out
}
