package cli

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/playbook"
)

func (c *CLI) registryCommand() *cobra.Command {
	format := newChoice("text", []string{"text", "json"})
	var harnessPath string
	cmd := &cobra.Command{
		Use:                   "registry [--harness FILE] [--format text|json]",
		DisableFlagsInUseLine: true,
		Short:                 "List every tool the runtime can call: built-ins, connectors and, with --harness, MCP servers",
		Long: `Registry lists every tool this runtime can call, with its full definition:
the built-ins, every connector (its provider, auth kinds, secret roles and
API root), and, with --harness, the tools each MCP server the harness binds
lists now (the servers are started).

--format json prints {"builtins": [DEF...], "providers": [{"provider",
"title", "authKinds", "secrets", "auth", "apiRoot", "tools": [DEF...]}],
"mcpServers": [{"name", "tools": [DEF...], "error"}]} where DEF is the
spec's embedded tool definition; "mcpServers" is there with --harness only.
docs/connectors.md documents the contract.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var h *host.Host
			if harnessPath != "" {
				var err error
				if h, err = c.harnessRegistry(context.Background(), "registry", harnessPath, nil, &host.Options{AllServers: true}); err != nil {
					return err
				}
				defer h.Close()
			}
			cat := host.NewCatalog(h)
			if format.value == "json" {
				b, err := json.Marshal(cat, jsontext.WithIndent("  "), json.Deterministic(true))
				if err == nil {
					_, err = fmt.Fprintln(c.stdout(), string(b))
				}
				if err != nil {
					return ioError(err)
				}
				return nil
			}
			return c.printCatalog(cat)
		},
	}
	formatFlag(cmd, format, "output format: text or json (the contract in docs/connectors.md)")
	optionalHarnessFlag(cmd, &harnessPath, "also list the tools of every MCP server this harness binds (YAML or JSON; see docs/harness.md)")
	return cmd
}

func (c *CLI) printCatalog(cat host.Catalog) error {
	out := c.stdout()
	tools := func(defs []playbook.Definition) error {
		w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
		fmt.Fprintf(w, "  TOOL\tRISK\tEFFECT\tDESCRIPTION\n")
		for _, d := range defs {
			effect := "unstated"
			switch {
			case d.SideEffecting == nil:
			case *d.SideEffecting:
				effect = "write"
			default:
				effect = "read"
			}
			if d.RequiresApproval != nil && *d.RequiresApproval {
				effect += ", approval"
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", d.Name, cmp.Or(d.RiskClass, "unstated"), effect, clipLine(d.Description, 80))
		}
		return w.Flush()
	}
	fmt.Fprintf(out, "Built-in tools (%s)\n", plural(len(cat.Builtins), "tool"))
	if err := tools(cat.Builtins); err != nil {
		return ioError(err)
	}
	n := 0
	for _, p := range cat.Providers {
		n += len(p.Tools)
	}
	fmt.Fprintf(out, "\nConnectors (%s, %s)\n", plural(len(cat.Providers), "provider"), plural(n, "tool"))
	for _, p := range cat.Providers {
		var auth []string
		for _, a := range p.Auth {
			auth = append(auth, fmt.Sprintf("%s (%s)", a.AuthKind, strings.Join(a.Secrets, ", ")))
		}
		fmt.Fprintf(out, "\n%s: %s, %s; auth: %s\n", p.Provider, p.Title, p.APIRoot, strings.Join(auth, "; "))
		if err := tools(p.Tools); err != nil {
			return ioError(err)
		}
	}
	if cat.MCPServers != nil {
		fmt.Fprintf(out, "\nMCP servers (%d)\n", len(cat.MCPServers))
		for _, s := range cat.MCPServers {
			if s.Error != "" {
				fmt.Fprintf(out, "\n%s: unavailable: %s\n", s.Name, clipLine(s.Error, 200))
				continue
			}
			fmt.Fprintf(out, "\n%s: %s\n", s.Name, plural(len(s.Tools), "tool"))
			if err := tools(s.Tools); err != nil {
				return ioError(err)
			}
		}
	}
	return nil
}

// plural is "1 tool", "2 tools".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// clipLine is s on one line, at most n runes.
func clipLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
