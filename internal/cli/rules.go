package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/report"
)

func (c *CLI) rulesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "rules",
		Short: "List the rule ids validate reports, with what each checks",
		Long: `Rules lists every rule id that 'openplaybook validate' can show in brackets
after a message, in the order they run: first the reader's (JSON syntax and
the document model), then the validator's. docs/rules.md documents each one
with an example.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			w := tabwriter.NewWriter(c.stdout(), 0, 8, 2, ' ', 0)
			for _, r := range report.Catalog() {
				fmt.Fprintf(w, "%s\t%s\n", r.ID, r.Description)
			}
			if err := w.Flush(); err != nil {
				return ioError(err)
			}
			return nil
		},
	}
}
