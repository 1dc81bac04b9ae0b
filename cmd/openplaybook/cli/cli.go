// Package cli is the openplaybook command. A [CLI] holds the standard
// streams; [CLI.Main] runs one command line and returns the exit code, so
// tests run the whole command in process, with buffers for streams.
//
// Each command is one file (validate.go, schema.go, ...) with a method
// returning its *cobra.Command; [CLI.root] lists them explicitly. docs/cli.md
// documents every command, flag and exit code.
package cli

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of every command (docs/cli.md, "Exit codes").
const (
	// ExitOK: the command did what was asked and found no problem that
	// fails it.
	ExitOK = 0
	// ExitProblems: the documents have problems (errors; warnings too
	// under --strict).
	ExitProblems = 1
	// ExitUsage: bad usage (unknown command or flag, a bad flag value,
	// missing arguments) or an input that cannot be read (a missing or
	// unreadable file, a directory without *.json files).
	ExitUsage = 2
	// ExitInternal: openplaybook itself failed; this is a bug.
	ExitInternal = 70
)

// Version is the openplaybook version that `openplaybook version` and
// SARIF output report. Release builds set it with
//
//	-ldflags "-X github.com/openplaybook/openplaybook/cmd/openplaybook/cli.Version=v1.2.3"
//
// When it is empty the module version from the build information is used
// (set by `go install ...@version`), else "(devel)".
var Version = ""

// CLI is the openplaybook command with its streams.
type CLI struct {
	// Stdin is read by commands given "-" as a path, and by run --input @-.
	// Nil reads as empty.
	Stdin io.Reader
	// Stdout receives command output (reports, the schema, help). Nil
	// discards it.
	Stdout io.Writer
	// Stderr receives error messages and usage hints. Nil discards them.
	Stderr io.Writer
	// Version overrides the package-level [Version] when not empty.
	Version string
	// Getenv reads the environment (OPENPLAYBOOK_HARNESS, USER). Nil
	// reads the process's, with os.Getenv.
	Getenv func(string) string
	// Dir is the working directory where a harness file is looked for
	// when neither --harness nor OPENPLAYBOOK_HARNESS names one. Empty is
	// the process's working directory.
	Dir string
}

// Main runs the command line args (without the program name) and returns
// the exit code: [ExitOK], [ExitProblems], [ExitUsage] or [ExitInternal].
// It never calls os.Exit and never panics.
func (c *CLI) Main(args []string) (code int) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(c.stderr(), "openplaybook: internal error: %v; this is a bug in openplaybook, please report it\n%s", p, debug.Stack())
			code = ExitInternal
		}
	}()
	root := c.root()
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		c.printErrors(ee.err)
		return ee.code
	}
	// Anything else comes from cobra or a command's Args check: usage.
	fmt.Fprintf(c.stderr(), "openplaybook: %v\n", err)
	if cmd == nil {
		cmd = root
	}
	fmt.Fprintf(c.stderr(), "Run '%s --help' for usage.\n", cmd.CommandPath())
	return ExitUsage
}

// printErrors prints err to stderr as "openplaybook: err", one line for
// each error an [errors.Join] holds.
func (c *CLI) printErrors(err error) {
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			c.printErrors(e)
		}
		return
	}
	fmt.Fprintf(c.stderr(), "openplaybook: %v\n", err)
}

// root builds the command tree. Every command is listed here.
func (c *CLI) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "openplaybook",
		Short: "Validate, explain, check and run OpenPlaybook documents",
		Long: `openplaybook checks OpenPlaybook 1.6 JSON documents against the format and
its consistency rules, explains what a document does, checks it against a
harness (registry, drift, preflight) and runs it with each step's
allowedTools held as its capability boundary.

Exit codes: 0 no problems, 1 problems found, 2 bad usage or unreadable input,
70 internal error. run and resume add 3 (waits for a person) and 4 (rejected
at a gate).`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Every command with --harness finds its harness the same way.
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error { return c.resolveHarness(cmd) },
		// With no command: print help to stderr, exit 2.
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(c.stderr())
			_ = cmd.Help()
			return &exitError{code: ExitUsage}
		},
	}
	// cobra's completion command: bash, zsh, fish, powershell.
	root.CompletionOptions.HiddenDefaultCmd = false
	// --version prints what `openplaybook version` prints.
	root.Version = c.versionText()
	root.SetVersionTemplate("{{.Version}}")
	root.SetIn(c.stdin())
	root.SetOut(c.stdout())
	root.SetErr(c.stderr())
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return err })
	root.AddCommand(
		c.validateCommand(),
		c.checkCommand(),
		c.pinCommand(),
		c.runCommand(),
		c.resumeCommand(),
		c.retryCommand(),
		c.decideCommand(true),
		c.decideCommand(false),
		c.statusCommand(),
		c.auditCommand(),
		c.todayCommand(),
		c.replayCommand(),
		c.explainCommand(),
		c.schemaCommand(),
		c.rulesCommand(),
		c.versionCommand(),
		c.registryCommand(),
		c.serveCommand(),
		c.mcpCommand(),
		c.agentTokenCommand(),
		c.storeCommand(),
		c.authCommand(),
		c.docsCommand(),
	)
	// cobra's completion command (bash, zsh, fish, powershell), added here
	// rather than at Execute so that it is in the tree like the others.
	root.InitDefaultCompletionCmd()
	for _, cmd := range root.Commands() {
		if cmd.Name() == "completion" {
			// With no shell, or an unknown one: usage, as with no command.
			cmd.RunE = root.RunE
			cmd.Args = func(_ *cobra.Command, args []string) error {
				if len(args) > 0 {
					return fmt.Errorf("unknown shell %q; completion takes bash, zsh, fish or powershell", args[0])
				}
				return nil
			}
		}
	}
	return root
}

// exitError ends a command with an exit code. err, when not nil, is
// printed to stderr as "openplaybook: err".
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// failed is the result of a command whose input has problems: exit 1,
// nothing more printed.
var failed = &exitError{code: ExitProblems}

// ioError ends a command with exit 2 and err on stderr.
func ioError(err error) error { return &exitError{code: ExitUsage, err: err} }

func (c *CLI) stdin() io.Reader {
	if c.Stdin == nil {
		return strings.NewReader("")
	}
	return c.Stdin
}

func (c *CLI) stdout() io.Writer {
	if c.Stdout == nil {
		return io.Discard
	}
	return c.Stdout
}

func (c *CLI) stderr() io.Writer {
	if c.Stderr == nil {
		return io.Discard
	}
	return c.Stderr
}

// version returns the version this binary reports.
func (c *CLI) version() string {
	if c.Version != "" {
		return c.Version
	}
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// choice is a flag value that must be one of a fixed list, so a bad value
// is a usage error at parse time that names the valid ones.
type choice struct {
	value string
	valid []string
}

func newChoice(def string, valid []string) *choice { return &choice{value: def, valid: valid} }

func (f *choice) String() string { return f.value }
func (f *choice) Type() string   { return "string" }

func (f *choice) Set(s string) error {
	if !slices.Contains(f.valid, s) {
		return fmt.Errorf("must be one of %s", strings.Join(f.valid, ", "))
	}
	f.value = s
	return nil
}

// formatFlag registers -f, --format on cmd as the choice format, with
// shell completion of its values.
func formatFlag(cmd *cobra.Command, format *choice, usage string) {
	cmd.Flags().VarP(format, "format", "f", usage)
	_ = cmd.RegisterFlagCompletionFunc("format", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return slices.Clone(format.valid), cobra.ShellCompDirectiveNoFileComp
	})
}
