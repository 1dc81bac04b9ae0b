package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/store/engine"
	"github.com/openplaybook/openplaybook/store/migrate"
)

// DatabaseURLEnv is the environment variable `store migrate` takes the
// target URL from when --url is not given (the name docs/store.md uses
// for the harness's secret too).
const DatabaseURLEnv = "OPENPLAYBOOK_DATABASE_URL"

func (c *CLI) storeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:                   "store COMMAND",
		DisableFlagsInUseLine: true,
		Short:                 "Manage the store: copy it to another engine",
		Long: `Store manages the store itself (where runs, approvals and the audit log
live). Its one command today is migrate.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(c.stderr())
			_ = cmd.Help()
			return &exitError{code: ExitUsage}
		},
	}
	cmd.AddCommand(c.storeMigrateCommand())
	return cmd
}

func (c *CLI) storeMigrateCommand() *cobra.Command {
	var harnessPath, to, dbURL, from string
	cmd := &cobra.Command{
		Use:                   "migrate --to postgres [--url URL] [--from FILE] [--harness FILE]",
		DisableFlagsInUseLine: true,
		Short:                 "Copy an SQLite store into an empty PostgreSQL database",
		Long: `Migrate copies an SQLite store into an empty PostgreSQL store, table by
table and verbatim, in one transaction: every run, step, call, approval,
gate, agent token, audit record and built-in record, so each audit chain's
hashes are unchanged and 'openplaybook audit --verify' passes on every run
afterwards (migrate checks that itself after the commit). A target that
already holds any row is refused; on any error nothing is kept there.
Stop the runs that use the SQLite store first.

The source is --from FILE, else the harness's store.sqlite. The target is
--url, else $` + DatabaseURLEnv + `, else the harness's store.postgres.url
(resolved like every secret). Prefer the environment variable to --url: a
command line is visible to other users of the machine. The URL is never
printed. Afterwards, point the harness at the database:

  store:
    postgres:
      url: "${secret:` + DatabaseURLEnv + `}"

Exit status: 0 copied and verified, 1 refused or failed (nothing kept
unless the verification after the commit failed), 2 bad usage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if to != "postgres" {
				return &exitError{code: ExitUsage, err: fmt.Errorf("store migrate: --to %q: the one target engine is postgres (--to postgres)", to)}
			}
			var h *harness.Harness
			loadHarness := func() (*harness.Harness, error) {
				if h != nil {
					return h, nil
				}
				p := harnessPath
				if p == "" {
					var err error
					if p, err = c.findHarness(); err != nil {
						return nil, &exitError{code: ExitUsage, err: fmt.Errorf("store migrate: %w", err)}
					}
				}
				hh, hds, err := harness.Load(p)
				if err != nil {
					return nil, ioError(fmt.Errorf("reading the harness: %w", err))
				}
				for _, d := range hds {
					if d.Severity == 2 {
						return nil, &exitError{code: ExitUsage, err: fmt.Errorf("%s:%d:%d: %s [%s]", d.File, d.Line, d.Column, d.Message, d.Rule)}
					}
				}
				h = hh
				return h, nil
			}
			if dbURL == "" {
				dbURL = c.getenv(DatabaseURLEnv)
			}
			if dbURL == "" {
				hh, err := loadHarness()
				if err != nil {
					return err
				}
				if hh.Store.Postgres == nil {
					return &exitError{code: ExitUsage, err: fmt.Errorf("store migrate: no target: give --url, set $%s, or use a harness with store.postgres", DatabaseURLEnv)}
				}
				if dbURL, err = hh.Store.Postgres.Expand(hh.SecretResolver()); err != nil {
					return &exitError{code: ExitUsage, err: fmt.Errorf("store migrate: %w", err)}
				}
			}
			if !harness.PostgresURL(dbURL) {
				return &exitError{code: ExitUsage, err: errors.New("store migrate: the target is not a postgres:// or postgresql:// URL (not shown: it may hold a password)")}
			}
			if from == "" {
				hh, err := loadHarness()
				if err != nil {
					return err
				}
				if hh.Store.Postgres != nil {
					return &exitError{code: ExitUsage, err: fmt.Errorf("store migrate: the harness %s keeps its store in PostgreSQL: give the SQLite file with --from FILE", hh.Path)}
				}
				from = hh.Store.SQLite
			}
			if _, err := os.Stat(from); err != nil {
				return ioError(fmt.Errorf("store migrate: the SQLite store: %w", err))
			}
			rep, err := migrate.SQLiteToPostgres(ctxOf(cmd), from, dbURL)
			if err != nil {
				return &exitError{code: ExitProblems, err: fmt.Errorf("store migrate: %s", engine.ScrubText(err.Error(), dbURL))}
			}
			var parts []string
			for _, t := range migrate.Tables {
				parts = append(parts, fmt.Sprintf("%s %d", t, rep.Rows[t]))
			}
			fmt.Fprintf(c.stdout(), "copied %s into PostgreSQL (%s); every run's audit chain verifies there (%s)\n", from, strings.Join(parts, ", "), plural(rep.Runs, "run"))
			return nil
		},
	}
	optionalHarnessFlag(cmd, &harnessPath, "the harness whose store.sqlite is the source (or whose store.postgres is the target)"+harnessFlagUsage)
	cmd.Flags().StringVar(&to, "to", "", "the target engine: postgres")
	cmd.Flags().StringVar(&dbURL, "url", "", "the target database's postgres:// URL (default $"+DatabaseURLEnv+", else the harness's store.postgres.url)")
	cmd.Flags().StringVar(&from, "from", "", "the SQLite store file to copy (default: the harness's store.sqlite)")
	_ = cmd.MarkFlagFilename("from", "db")
	return cmd
}
