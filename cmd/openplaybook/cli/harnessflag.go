package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// HarnessEnv is the environment variable naming the harness file when a
// command is given no --harness.
const HarnessEnv = "OPENPLAYBOOK_HARNESS"

// harnessNames are the files looked for in the working directory when
// neither --harness nor [HarnessEnv] names the harness, in this order.
var harnessNames = []string{"openplaybook.yaml", "openplaybook.yml", "openplaybook.json"}

// harnessFlagUsage is the end of every --harness flag's help.
const harnessFlagUsage = " (default: $" + HarnessEnv + ", else ./openplaybook.yaml, .yml or .json)"

// harnessFlag registers --harness on cmd, into path. [CLI.root]'s
// PersistentPreRunE fills an empty one with [CLI.findHarness] before the
// command runs.
func harnessFlag(cmd *cobra.Command, path *string, usage string) {
	cmd.Flags().StringVar(path, "harness", "", usage+harnessFlagUsage)
	_ = cmd.MarkFlagFilename("harness", "yaml", "yml", "json")
}

// noDiscovery is the annotation of a --harness flag that is optional and
// never filled by [CLI.findHarness] (explain's: without it, explain
// contacts nothing).
const noDiscovery = "openplaybook-no-harness-discovery"

// optionalHarnessFlag registers --harness on cmd, into path, with no
// discovery: empty unless given.
func optionalHarnessFlag(cmd *cobra.Command, path *string, usage string) {
	cmd.Flags().StringVar(path, "harness", "", usage)
	_ = cmd.MarkFlagFilename("harness", "yaml", "yml", "json")
	_ = cmd.Flags().SetAnnotation("harness", noDiscovery, []string{"true"})
}

// resolveHarness sets an empty --harness of cmd (if it has one, and it is
// not an [optionalHarnessFlag]) to the harness [CLI.findHarness] finds.
func (c *CLI) resolveHarness(cmd *cobra.Command) error {
	f := cmd.Flags().Lookup("harness")
	if f == nil || f.Value.String() != "" || f.Annotations[noDiscovery] != nil {
		return nil
	}
	p, err := c.findHarness()
	if err != nil {
		return fmt.Errorf("%s: %w", cmd.Name(), err)
	}
	return f.Value.Set(p)
}

// findHarness returns the harness file a command uses without --harness:
// $OPENPLAYBOOK_HARNESS when set, else the one of ./openplaybook.yaml,
// .yml or .json that exists in the working directory. None, or more than
// one of those, is an error naming all three ways.
func (c *CLI) findHarness() (string, error) {
	if p := c.getenv(HarnessEnv); p != "" {
		return p, nil
	}
	var found []string
	for _, n := range harnessNames {
		p := n
		if c.Dir != "" {
			p = filepath.Join(c.Dir, n)
		}
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", errors.New("no harness: give --harness FILE, set " + HarnessEnv + ", or put openplaybook.yaml (or .yml, .json) in the working directory (see docs/harness.md)")
	}
	return "", fmt.Errorf("no harness: the working directory has %q and %q; give --harness FILE or set %s to choose", found[0], found[1], HarnessEnv)
}

func (c *CLI) getenv(name string) string {
	if c.Getenv != nil {
		return c.Getenv(name)
	}
	return os.Getenv(name)
}
