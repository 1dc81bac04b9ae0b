package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/pin"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/report"
	"github.com/openplaybook/openplaybook/validate"
)

func (c *CLI) pinCommand() *cobra.Command {
	var harnessPath string
	var write bool
	cmd := &cobra.Command{
		Use:                   "pin --harness FILE [--write] DOC",
		DisableFlagsInUseLine: true,
		Short:                 "Bring a document's embedded tool definitions in line with the registry",
		Long: `Pin brings the embedded definitions of DOC in line with what the harness's
registry says (the built-ins, the Stripe connector and the live MCP servers),
as 'go mod tidy' does for imports: each embedded tool the registry knows takes
the registry's values; each allowedTools name the registry knows but DOC does
not embed gets a definition (and is listed in its MCP server's toolNames or
its connection's capabilities). What the registry does not say (an MCP
server's riskClass, permissions or data scopes) keeps the document's value.
Everything else in the file keeps its bytes and order.

Pin prints a unified diff to standard output and a summary to standard
error. It writes the file only with --write, and only when the pinned
document is still valid.

Exit status: 0 the document is in line (or was written), 1 it is not in
line (the diff shows how; run again with --write) or pinning would leave it
invalid, 2 bad usage or unreadable input.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if harnessPath == "" {
				return errors.New("pin needs --harness FILE (the harness file: see docs/harness.md)")
			}
			if len(args) != 1 || args[0] == "-" {
				return errors.New("pin takes exactly one DOC file")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := c.checkWithHarness(cmd.Context(), harnessPath, args)
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
			for _, p := range plan.Problems {
				fmt.Fprintf(c.stderr(), "openplaybook: pin: %s\n", p)
			}
			if len(plan.Changes) == 0 {
				fmt.Fprintf(c.stderr(), "%s: every embedded definition is in line with the registry\n", doc.File)
				return nil
			}
			fmt.Fprint(c.stdout(), pin.Diff(doc.File, doc.Source, plan.Source))
			what := fmt.Sprintf("%d tool definitions differ", len(plan.Changes))
			if len(plan.Changes) == 1 {
				what = "1 tool definition differs"
			}
			fmt.Fprintf(c.stderr(), "%s: %s from the registry:\n%s", doc.File, what, pin.Summary(plan.Changes))

			after, ds := playbook.Read(doc.File, plan.Source, nil)
			ds = append(ds, validate.Document(after, &validate.Options{Registry: res.env.Registry.Has})...)
			diag.Sort(ds)
			if diag.Count(ds, diag.Error) > 0 {
				fmt.Fprintf(c.stderr(), "pinning would leave %s invalid; fix these by hand (the registry does not say enough to decide):\n", doc.File)
				_ = report.Write(c.stderr(), "text", []report.File{{Name: doc.File, Src: plan.Source}}, ds, nil)
				return failed
			}
			if len(plan.Problems) > 0 {
				return failed
			}
			if !write {
				fmt.Fprintf(c.stderr(), "run again with --write to update %s\n", doc.File)
				return failed
			}
			if err := writeAtomic(doc.File, plan.Source); err != nil {
				return ioError(err)
			}
			fmt.Fprintf(c.stderr(), "wrote %s\n", doc.File)
			return nil
		},
	}
	cmd.Flags().StringVar(&harnessPath, "harness", "", "the harness file (YAML or JSON; see docs/harness.md)")
	cmd.Flags().BoolVar(&write, "write", false, "rewrite DOC in place (atomically) when the pinned document is valid")
	return cmd
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
