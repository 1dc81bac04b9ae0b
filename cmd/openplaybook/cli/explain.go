package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/explain"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/report"
)

func (c *CLI) explainCommand() *cobra.Command {
	format := newChoice("text", explain.Formats)
	var harnessPath string
	maxSize := newSizeFlag()
	cmd := &cobra.Command{
		Use:                   "explain [--format " + strings.Join(explain.Formats, "|") + "] [--harness FILE] [--max-size BYTES] FILE",
		DisableFlagsInUseLine: true,
		Short:                 "Tell what a document does: risks, writes, approvals, gates, requirements",
		Long: `Explain reads one document (FILE, or - for standard input) and tells what it
does from the document alone: which steps can move money or contact
customers, what data they write, which MCP servers they call, which tool
calls need approval, which gates a person must pass, and what a harness must
provide. The document's problems (as 'openplaybook validate' finds them)
are listed at the top; explain still explains what it can. The document's
SHA-256 (of its bytes as read, the digest a run records) ties a review to
the exact bytes.

Without --harness, explain contacts nothing and everything it shows is as
the document claims. With --harness FILE (never found on its own, unlike
the other commands' harness), it builds the harness's registry as check
does (the built-ins, the connectors, the MCP servers the document names,
which are started or contacted to list their tools) and marks every value
of a tool definition the registry does not confirm as a claim.

Formats: text, markdown, html, mermaid (a flowchart of the steps), json
(documented in docs/explain.md).

Exit status: 0 when the explanation was written, even if the document has
problems; 2 on bad usage, when FILE cannot be read, or when the harness
cannot be read or has errors.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("explain takes exactly one FILE (or - for standard input), got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var (
				name = args[0]
				src  []byte
				err  error
			)
			if name == "-" {
				name = StdinName
				src, err = c.readStdin(maxSize.bytes)
			} else {
				if fi, serr := os.Stat(name); serr == nil && fi.IsDir() {
					return ioError(fmt.Errorf("%s is a directory; explain takes one file", name))
				}
				name = filepath.Clean(name)
				src, err = readFile(name, maxSize.bytes)
			}
			doc, problems, err := check(name, src, err, maxSize.bytes)
			if err != nil {
				return ioError(err)
			}
			var opts *explain.Options
			if harnessPath != "" {
				env, err := c.explainRegistry(ctxOf(cmd), harnessPath, doc)
				if err != nil {
					return err
				}
				defer env.Close()
				opts = &explain.Options{Registry: env.Registry, Source: "the registry of " + harnessPath + " (" + env.Describe() + ")", Unavailable: unavailable(env, doc), Policy: env.Harness.Policy}
			}
			if err := explain.Render(c.stdout(), explain.BuildWith(doc, problems, opts), format.value); err != nil {
				return ioError(fmt.Errorf("writing the explanation: %w", err))
			}
			return nil
		},
	}
	formatFlag(cmd, format, "output format: "+strings.Join(explain.Formats, ", "))
	// Not harnessFlag: explain finds no harness on its own, so that
	// without the flag it never contacts anything.
	optionalHarnessFlag(cmd, &harnessPath, "check the tool definitions against this harness's registry (YAML or JSON; see docs/harness.md); not found on its own: without it, everything is as the document claims")
	maxSizeFlag(cmd, maxSize)
	return cmd
}

// explainRegistry loads the harness and connects what doc names, for its
// registry. A harness that cannot be read or has errors is a usage error
// (exit 2) with its diagnostics on standard error: explain is not asked
// about the harness, and a half-built registry would mark claims wrongly.
func (c *CLI) explainRegistry(ctx context.Context, harnessPath string, doc *playbook.Document) (*host.Host, error) {
	return c.harnessRegistry(ctx, "explain", harnessPath, doc, nil)
}

// harnessRegistry is explainRegistry for command cmd, with host options.
func (c *CLI) harnessRegistry(ctx context.Context, cmd, harnessPath string, doc *playbook.Document, o *host.Options) (*host.Host, error) {
	h, hds, err := harness.Load(harnessPath)
	if err != nil {
		return nil, ioError(fmt.Errorf("reading the harness: %w", err))
	}
	if diag.Count(hds, diag.Error) > 0 {
		hsrc, _ := os.ReadFile(harnessPath)
		fmt.Fprintln(c.stderr(), "openplaybook: the harness has errors; its registry was not consulted:")
		_ = report.Write(c.stderr(), "text", []report.File{{Name: harnessPath, Src: hsrc}}, keep(hds, diag.Error), nil)
		return nil, &exitError{code: ExitUsage, err: fmt.Errorf("fix the harness, or %s without --harness", cmd)}
	}
	var docs []*playbook.Document
	if doc != nil {
		docs = append(docs, doc)
	}
	return host.Connect(ctx, h, docs, o), nil
}

// unavailable lists the MCP servers doc requires whose tools are not in
// the registry (the harness binds none, or it could not be listed), sorted,
// each with why; secret values the harness resolves are redacted.
func unavailable(env *host.Host, doc *playbook.Document) []string {
	var out []string
	for name, err := range env.ServerErrs {
		out = append(out, env.Secrets.Redact(fmt.Sprintf("MCP server %q: %v", name, err)))
	}
	if doc != nil && doc.Requires != nil {
		for _, m := range doc.Requires.MCPServers {
			if n := playbook.Str(m.Name); n != "" && env.Harness.MCPServers[n] == nil {
				out = append(out, fmt.Sprintf("MCP server %q: the harness binds none", n))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
