package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/report"
)

func (c *CLI) rulesCommand() *cobra.Command {
	format := newChoice("text", []string{"text", "json"})
	cmd := &cobra.Command{
		Use:                   "rules [--format text|json]",
		DisableFlagsInUseLine: true,
		Short:                 "List the rule ids validate reports, with what each checks",
		Long: `Rules lists every rule id that 'openplaybook validate' can show in brackets
after a message, in the order they run: first the reader's (JSON syntax and
the document model), then the validator's. docs/rules.md documents each one
with an example.

--format json prints an array of {id, description}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if format.value == "json" {
				type rule struct {
					ID          string `json:"id"`
					Description string `json:"description"`
				}
				out := []rule{}
				for _, r := range report.Catalog() {
					out = append(out, rule{r.ID, r.Description})
				}
				b, err := json.Marshal(out, jsontext.WithIndent("  "))
				if err == nil {
					_, err = fmt.Fprintln(c.stdout(), string(b))
				}
				if err != nil {
					return ioError(err)
				}
				return nil
			}
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
	formatFlag(cmd, format, "output format: text or json (an array of {id, description})")
	return cmd
}
