package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/schema"
)

func (c *CLI) schemaCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of OpenPlaybook 1.6",
		Long: `Schema prints the published JSON Schema (draft 2020-12) of OpenPlaybook 1.6
documents, byte for byte as embedded in this binary, for editors and other
implementations. The schema checks the shape of a document; 'openplaybook
validate' also checks the consistency rules between fields.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := c.stdout().Write(schema.JSON()); err != nil {
				return ioError(fmt.Errorf("writing the schema: %w", err))
			}
			return nil
		},
	}
}
