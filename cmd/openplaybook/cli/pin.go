package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/pin"
	"github.com/openplaybook/openplaybook/report"
)

func (c *CLI) pinCommand() *cobra.Command {
	var harnessPath string
	var write bool
	cmd := &cobra.Command{
		Use:                   "pin [--harness FILE] [--write] DOC",
		DisableFlagsInUseLine: true,
		Short:                 "Bring a document's embedded tool definitions in line with the registry",
		Long: `Pin brings the embedded definitions of DOC in line with what the harness's
registry says (the built-ins, the tools of every connector, one per provider,
and the live MCP servers), as 'go mod tidy' does for imports: each embedded tool the
registry knows takes the registry's values; each allowedTools name the
registry knows but DOC does not embed gets a definition (and is listed in its MCP server's toolNames or
its connection's capabilities). What the registry does not say (an MCP
server's riskClass, permissions or data scopes) keeps the document's value.
Pin never lowers a risk the document states: a lower riskClass, or
sideEffecting or requiresApproval false where DOC says true, keeps DOC's
value, with a note naming the member. Everything else in the file keeps its
bytes and order.

Pin prints a unified diff to standard output and a summary to standard
error. It writes the file only with --write. What it writes is always valid
JSON with no name listed twice; an edit that would make the document
invalid (a member only a person can decide) is left out, the rest is
written, and pin names the tool and the member to fill by hand.

Exit status: 0 the document is in line (or was written in full), 1 it is
not in line (the diff shows how; run again with --write) or something is
left for a person to fill (written or not, the list says what), 2 bad usage
or unreadable input.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || args[0] == "-" {
				return errors.New("pin takes exactly one DOC file")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := c.checkWithHarness(cmd.Context(), harnessPath, args, 0)
			if err != nil {
				return ioError(err)
			}
			defer res.env.Close()
			if hd := inFile(res.diags, harnessPath); diag.Count(hd, diag.Error) > 0 {
				// A harness with errors contacts nothing, so the registry
				// lacks its MCP tools: pinning against it would be wrong.
				fmt.Fprintf(c.stderr(), "openplaybook: the harness has errors; nothing was pinned:\n")
				_ = report.Write(c.stderr(), "text", res.files, hd, nil)
				return &exitError{code: ExitUsage}
			}
			doc := res.docs[0]
			plan, err := pin.Plan(doc, res.env.Registry)
			if err != nil {
				return &exitError{code: ExitProblems, err: err}
			}
			for _, n := range plan.Notes {
				fmt.Fprintf(c.stderr(), "openplaybook: pin: note: %s\n", n)
			}
			if len(plan.Changes) == 0 {
				if len(plan.Problems) == 0 {
					fmt.Fprintf(c.stderr(), "%s: every embedded definition is in line with the registry\n", doc.File)
					return nil
				}
				fmt.Fprintf(c.stderr(), "%s: nothing pin can decide on its own is left to pin\n", doc.File)
				c.pinProblems(plan.Problems)
				return failed
			}
			if jsontext.Value(doc.Source).IsValid() && !jsontext.Value(plan.Source).IsValid() {
				// Plan never produces this; refuse rather than write it.
				return &exitError{code: ExitProblems, err: fmt.Errorf("pin: the pinned %s would not be valid JSON; nothing was written (this is a bug in openplaybook, please report it)", doc.File)}
			}
			fmt.Fprint(c.stdout(), pin.Diff(doc.File, doc.Source, plan.Source))
			what := fmt.Sprintf("%d tool definitions differ", len(plan.Changes))
			if len(plan.Changes) == 1 {
				what = "1 tool definition differs"
			}
			fmt.Fprintf(c.stderr(), "%s: %s from the registry:\n%s", doc.File, what, pin.Summary(plan.Changes))
			if !write {
				c.pinProblems(plan.Problems)
				fmt.Fprintf(c.stderr(), "run again with --write to update %s\n", doc.File)
				return failed
			}
			if err := writeAtomic(doc.File, plan.Source); err != nil {
				return ioError(err)
			}
			fmt.Fprintf(c.stderr(), "wrote %s\n", doc.File)
			if len(plan.Problems) > 0 {
				c.pinProblems(plan.Problems)
				return failed
			}
			return nil
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file (YAML or JSON; see docs/harness.md)")
	cmd.Flags().BoolVar(&write, "write", false, "rewrite DOC in place (atomically) when the pinned document is valid")
	return cmd
}

// pinProblems prints what pin left for a person to fill.
func (c *CLI) pinProblems(problems []string) {
	if len(problems) == 0 {
		return
	}
	fmt.Fprintf(c.stderr(), "pin left these for a person to fill (the registry does not say enough to decide):\n")
	for _, p := range problems {
		fmt.Fprintf(c.stderr(), "  %s\n", strings.ReplaceAll(p, "\n", "\n    "))
	}
}

// writeAtomic replaces path with data through a temporary file in the same
// directory and a rename, keeping the file's mode, so that a crash never
// leaves half a document.
func writeAtomic(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".pin-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// inFile returns the diagnostics about file.
func inFile(ds []diag.Diagnostic, file string) []diag.Diagnostic {
	var out []diag.Diagnostic
	for _, d := range ds {
		if d.File == file {
			out = append(out, d)
		}
	}
	return out
}
