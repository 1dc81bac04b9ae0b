package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/internal/textsafe"
	"github.com/openplaybook/openplaybook/runtime"
)

// completeRuns completes a command's RUN argument with the run ids in the
// store of its harness (--harness, or the one [CLI.findHarness] finds),
// and approve's and deny's ID argument with what that run waits for. With
// no harness or no store it completes nothing; it never starts anything.
func (c *CLI) completeRuns(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	none := cobra.ShellCompDirectiveNoFileComp
	limit := 1
	if cmd.Name() == "approve" || cmd.Name() == "deny" {
		limit = 2
	}
	if len(args) >= limit {
		return nil, none
	}
	if err := c.resolveHarness(cmd); err != nil {
		return nil, none
	}
	f := cmd.Flags().Lookup("harness")
	if f == nil {
		return nil, none
	}
	st, _, err := c.storeFor(f.Value.String())
	if err != nil {
		return nil, none
	}
	defer st.Close()
	ctx := ctxOf(cmd)
	var out []string
	if len(args) == 0 {
		runs, err := st.ListRuns(ctx)
		if err != nil {
			return nil, none
		}
		for _, r := range runs {
			if strings.HasPrefix(r.ID, toComplete) {
				out = append(out, textsafe.Line(r.ID)+"\t"+textsafe.Line(r.PlaybookID)+" "+string(r.Status))
			}
		}
		return out, none
	}
	ps, err := runtime.Pendings(ctx, st, args[0])
	if err != nil {
		return nil, none
	}
	for _, p := range ps {
		if p.Kind != "resume" && strings.HasPrefix(p.ID, toComplete) {
			out = append(out, textsafe.Line(p.ID)+"\t"+p.Kind+" in step "+textsafe.Line(p.Step))
		}
	}
	return out, none
}
