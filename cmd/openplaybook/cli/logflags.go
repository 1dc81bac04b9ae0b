package cli

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/obs"
	"github.com/openplaybook/openplaybook/store"
)

// logFlags are --log-format and --log-level of the commands that execute
// or decide runs (run, resume, retry, approve, deny): decision lines on
// stderr as serve writes them (docs/operate.md), besides the progress
// text. Without either flag (or its environment form,
// OPENPLAYBOOK_LOG_FORMAT, OPENPLAYBOOK_LOG_LEVEL) there are none.
type logFlags struct {
	format, level string
}

func addLogFlags(cmd *cobra.Command, lf *logFlags) {
	cmd.Flags().StringVar(&lf.format, "log-format", "", "also write a structured decision line per audit record on stderr: json or text (env OPENPLAYBOOK_LOG_FORMAT)")
	cmd.Flags().StringVar(&lf.level, "log-level", "", "the decision lines' level: debug, info, warn or error (env OPENPLAYBOOK_LOG_LEVEL; default info when --log-format is given)")
}

// observer returns the [obs.Obs] the command's store is wrapped with, or
// nil when neither logs nor traces nor metrics are asked for (the run
// then pays nothing). Logs go to stderr only when a log flag (or its
// environment form) is set; with OTEL_* variables alone spans and
// metrics are exported and no line is written. An invalid setting is a
// usage error.
func (c *CLI) observer(ctx context.Context, lf logFlags) (*obs.Obs, error) {
	if lf.format == "" {
		lf.format = c.getenv("OPENPLAYBOOK_LOG_FORMAT")
	}
	if lf.level == "" {
		lf.level = c.getenv("OPENPLAYBOOK_LOG_LEVEL")
	}
	logs := lf.format != "" || lf.level != ""
	if !logs && !obs.Exporting(c.getenv) {
		return nil, nil
	}
	var stderr io.Writer = io.Discard
	if logs {
		stderr = c.stderr()
	}
	o, err := obs.New(ctx, obs.Config{LogFormat: lf.format, LogLevel: lf.level, Stderr: stderr, Getenv: c.getenv, Version: c.version()})
	if err != nil {
		return nil, &exitError{code: ExitUsage, err: err}
	}
	return o, nil
}

// observed wraps st with o (nil: st as it is).
func observed(o *obs.Obs, st store.Store) store.Store {
	if o == nil {
		return st
	}
	return o.Store(st)
}

// shutdown flushes o's lines and spans (at most 5 s).
func shutdown(o *obs.Obs) {
	if o == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = o.Shutdown(ctx)
}
