package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (c *CLI) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the openplaybook version and the formats it reads",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintf(c.stdout(), "openplaybook %s\nreads OpenPlaybook 1.0 to 1.6\n", c.version())
			if err != nil {
				return ioError(err)
			}
			return nil
		},
	}
}
