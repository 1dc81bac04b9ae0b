package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/explain"
)

func (c *CLI) explainCommand() *cobra.Command {
	format := newChoice("text", explain.Formats)
	cmd := &cobra.Command{
		Use:                   "explain [--format " + strings.Join(explain.Formats, "|") + "] FILE",
		DisableFlagsInUseLine: true,
		Short:                 "Tell what a document does: risks, writes, approvals, gates, requirements",
		Long: `Explain reads one document (FILE, or - for standard input) and tells what it
does from the document alone: which steps can move money or contact
customers, what data they write, which MCP servers they call, which tool
calls need approval, which gates a person must pass, and what a harness must
provide. The document's problems (as 'openplaybook validate' finds them)
are listed at the top; explain still explains what it can.

Formats: text, markdown, html, mermaid (a flowchart of the steps), json
(documented in docs/explain.md).

Exit status: 0 when the explanation was written, even if the document has
problems; 2 on bad usage or when FILE cannot be read.`,
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
				src, err = c.readStdin()
			} else {
				if fi, serr := os.Stat(name); serr == nil && fi.IsDir() {
					return ioError(fmt.Errorf("%s is a directory; explain takes one file", name))
				}
				name = filepath.Clean(name)
				src, err = readFile(name)
			}
			doc, problems, err := check(name, src, err)
			if err != nil {
				return ioError(err)
			}
			if err := explain.Render(c.stdout(), explain.Build(doc, problems), format.value); err != nil {
				return ioError(fmt.Errorf("writing the explanation: %w", err))
			}
			return nil
		},
	}
	formatFlag(cmd, format, "output format: "+strings.Join(explain.Formats, ", "))
	return cmd
}
