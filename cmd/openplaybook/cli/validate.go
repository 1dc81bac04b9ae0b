package cli

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/report"
	"github.com/openplaybook/openplaybook/syntax"
	"github.com/openplaybook/openplaybook/validate"
)

func (c *CLI) validateCommand() *cobra.Command {
	format := newChoice("text", report.Formats)
	var strict bool
	maxSize := newSizeFlag()
	cmd := &cobra.Command{
		Use:                   "validate [--format " + strings.Join(report.Formats, "|") + "] [--strict] [--max-size BYTES] PATH...",
		DisableFlagsInUseLine: true,
		Short:                 "Check documents against the format and its consistency rules",
		Long: `Validate reads each document strictly and checks it against every rule of
OpenPlaybook 1.6 (see 'openplaybook rules'), then reports what it found.

A PATH is a file, a directory (the *.json files directly in it, not its
subdirectories) or - for standard input (named <stdin> in the report).
Documents are checked in parallel; the report is sorted by file, then by
position. A document larger than --max-size (default 16MiB) is not read;
it gets one "limit" error.

Formats: text (for people; a source snippet under each problem and a count
at the end), json (an array of {file, line, column, pointer, severity,
rule, message}), sarif (SARIF 2.1.0 for GitHub code scanning), github
(GitHub Actions annotations).

Exit status: 0 no errors (warnings allowed, unless --strict), 1 errors
found (or warnings under --strict), 2 bad usage or a path that cannot be
read (nothing is reported then).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("validate needs at least one PATH: a file, a directory (its *.json files) or - for standard input")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			inputs, err := expand(args)
			if err != nil {
				return ioError(err)
			}
			files, diags, err := c.checkAll(inputs, maxSize.bytes)
			if err != nil {
				return ioError(err)
			}
			if err := report.Write(c.stdout(), format.value, files, diags, &report.Options{ToolVersion: c.version()}); err != nil {
				return ioError(fmt.Errorf("writing the report: %w", err))
			}
			if diag.Count(diags, diag.Error) > 0 || strict && diag.Count(diags, diag.Warning) > 0 {
				return failed
			}
			return nil
		},
	}
	formatFlag(cmd, format, "output format: "+strings.Join(report.Formats, ", "))
	cmd.Flags().BoolVar(&strict, "strict", false, "fail (exit 1) on warnings too")
	maxSizeFlag(cmd, maxSize)
	return cmd
}

// checked is the outcome of reading and checking one input.
type checked struct {
	src   []byte
	diags []diag.Diagnostic
	err   error
}

// checkAll reads and checks every input, in parallel on at most
// GOMAXPROCS workers. It returns the files read and all diagnostics,
// sorted with [diag.Sort]; or, when any input cannot be read, every such
// error joined (in input order) and nothing else, so that a report never
// silently leaves a file out.
func (c *CLI) checkAll(inputs []input, limit int) ([]report.File, []diag.Diagnostic, error) {
	results := make([]checked, len(inputs))
	// Standard input is read here, before the workers start.
	for i, in := range inputs {
		if in.stdin {
			src, err := c.readStdin(limit)
			results[i] = checked{src: src, err: err}
		}
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(inputs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				results[i] = checkOne(inputs[i], results[i], limit)
			}
		}()
	}
	for i := range inputs {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	var (
		files []report.File
		diags []diag.Diagnostic
		errs  []error
	)
	for i, r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		files = append(files, report.File{Name: inputs[i].name, Src: r.src})
		diags = append(diags, r.diags...)
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	diag.Sort(diags)
	return files, diags, nil
}

// checkOne reads one input (unless r already holds standard input) and
// checks it with [check], with the size limit limit (0: the default). A panic is turned into an "internal" error
// diagnostic on the file.
func checkOne(in input, r checked, limit int) (out checked) {
	defer func() {
		if p := recover(); p != nil {
			out = checked{src: r.src, diags: []diag.Diagnostic{{
				File: in.name, Line: 1, Column: 1, Severity: diag.Error, Rule: "internal",
				Message: fmt.Sprintf("checking this file failed: %v; this is a bug in openplaybook, please report it", p),
			}}}
		}
	}()
	if !in.stdin {
		r.src, r.err = readFile(in.path, limit)
	}
	_, ds, err := check(in.name, r.src, r.err, limit)
	return checked{src: r.src, diags: ds, err: err}
}

// check reads and validates one document the way every command does: the
// reader's diagnostics, then the validator's, sorted. readErr is the error
// of reading src: an [errTooLarge] becomes one "limit" error diagnostic
// (and a nil document); any other is returned as is. limit is the size
// limit (0: syntax.DefaultMaxSize).
func check(name string, src []byte, readErr error, limit int) (*playbook.Document, []diag.Diagnostic, error) {
	var tooLarge errTooLarge
	if errors.As(readErr, &tooLarge) {
		return nil, []diag.Diagnostic{{
			File: name, Line: 1, Column: 1, Severity: diag.Error, Rule: syntax.RuleLimit, Message: tooLarge.Error(),
		}}, nil
	}
	if readErr != nil {
		return nil, nil, readErr
	}
	doc, ds := playbook.Read(name, src, &playbook.ReadOptions{Limits: syntax.Limits{MaxSize: orDefault(limit)}})
	ds = append(ds, validate.Document(doc, nil)...)
	diag.Sort(ds)
	return doc, ds, nil
}
