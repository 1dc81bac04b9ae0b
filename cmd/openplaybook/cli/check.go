package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/preflight"
	"github.com/openplaybook/openplaybook/report"
	"github.com/openplaybook/openplaybook/syntax"
	"github.com/openplaybook/openplaybook/validate"
)

func (c *CLI) checkCommand() *cobra.Command {
	format := newChoice("text", report.Formats)
	var strict bool
	var harnessPath string
	maxSize := newSizeFlag()
	cmd := &cobra.Command{
		Use:                   "check [--harness FILE] [--format " + strings.Join(report.Formats, "|") + "] [--strict] [--max-size BYTES] [DOC...]",
		DisableFlagsInUseLine: true,
		Short:                 "Validate documents and check them against a harness: registry, drift, preflight",
		Long: `Check does everything validate does, then checks each document against
what the harness provides, as a run would before executing anything:

  resolution  every allowedTools name is a tool this runtime can call
              (the built-ins, the tools of every connector, one per
              provider, and the harness's MCP servers)
  drift       each embedded tool definition compared with the registry's,
              field by field (rules drift-*; see docs/drift.md)
  preflight   every connection bound with the declared authKind and scopes,
              its credential resolving and its scopes covering the embedded
              tools' permissions (each provider is asked once); every MCP
              server starts or answers and lists the declared toolNames;
              every named secret resolves to a non-empty value; every
              model agent's API answers, accepts the key and knows the
              model (one request per binding; rules preflight-*; see
              docs/check.md)

MCP servers are contacted concurrently, each within its harness timeout
(default 10 s). Secret values are never printed.

With no DOC, check checks the harness alone: the file itself, every secret
it uses, every connection (each provider is asked once), every MCP server it binds
(each is started or contacted and lists its tools) and every agent's
driver.

Formats and exit status are those of validate: 0 no errors, 1 errors (or
warnings under --strict), 2 bad usage or unreadable input.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			check := func(ctx context.Context, harnessPath string, paths []string) (*checkResult, error) {
				return c.checkWithHarness(ctx, harnessPath, paths, maxSize.bytes)
			}
			if len(args) == 0 {
				check = c.checkHarnessAlone
			}
			res, err := check(cmd.Context(), harnessPath, args)
			if err != nil {
				return ioError(err)
			}
			res.env.Close()
			if err := report.Write(c.stdout(), format.value, res.files, res.diags, &report.Options{ToolVersion: c.version()}); err != nil {
				return ioError(fmt.Errorf("writing the report: %w", err))
			}
			if diag.Count(res.diags, diag.Error) > 0 || strict && diag.Count(res.diags, diag.Warning) > 0 {
				return failed
			}
			return nil
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file (YAML or JSON; see docs/harness.md)")
	formatFlag(cmd, format, "output format: "+strings.Join(report.Formats, ", "))
	cmd.Flags().BoolVar(&strict, "strict", false, "fail (exit 1) on warnings too")
	maxSizeFlag(cmd, maxSize)
	return cmd
}

// checked documents with their environment, as check, pin and run use them.
type checkResult struct {
	env   *host.Host
	h     *harness.Harness
	docs  []*playbook.Document
	files []report.File
	diags []diag.Diagnostic
}

// checkWithHarness loads the harness, reads and validates every document
// (against the registry), connects what the documents need, and adds the
// resolution, drift and preflight diagnostics. The error is for I/O only.
// The caller closes res.env. limit is the documents' size limit (0:
// syntax.DefaultMaxSize).
func (c *CLI) checkWithHarness(ctx context.Context, harnessPath string, paths []string, limit int) (*checkResult, error) {
	inputs, err := expand(paths)
	if err != nil {
		return nil, err
	}
	return c.checkInputs(ctx, harnessPath, inputs, limit)
}

// checkHarnessAlone loads the harness and checks it with no document:
// its diagnostics, then, when it has no error, every server, connection,
// secret and agent it binds ([preflight.Harness]). The error is for I/O
// only. The caller closes res.env.
func (c *CLI) checkHarnessAlone(ctx context.Context, harnessPath string, _ []string) (*checkResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	h, hds, err := harness.Load(harnessPath)
	if err != nil {
		return nil, fmt.Errorf("reading the harness: %w", err)
	}
	hsrc, err := os.ReadFile(harnessPath)
	if err != nil {
		return nil, fmt.Errorf("reading the harness: %w", err)
	}
	res := &checkResult{h: h, files: []report.File{{Name: harnessPath, Src: hsrc}}}
	res.diags = append(res.diags, hds...)
	if diag.Count(hds, diag.Error) > 0 {
		// As with documents: a harness with errors contacts nothing.
		res.env = host.Offline(h)
		return res, nil
	}
	res.env = host.Connect(ctx, h, nil, &host.Options{AllServers: true})
	res.diags = append(res.diags, res.env.Diagnostics...)
	res.diags = append(res.diags, preflight.Harness(ctx, res.env)...)
	res.diags = append(res.diags, preflight.Store(ctx, res.env)...)
	for i := range res.diags {
		res.diags[i].Message = res.env.Secrets.Redact(res.diags[i].Message)
	}
	diag.Sort(res.diags)
	return res, nil
}

// checkInputs is checkWithHarness over inputs already expanded; an input
// with src set is not read again.
func (c *CLI) checkInputs(ctx context.Context, harnessPath string, inputs []input, limit int) (*checkResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	h, hds, err := harness.Load(harnessPath)
	if err != nil {
		return nil, fmt.Errorf("reading the harness: %w", err)
	}
	hsrc, err := os.ReadFile(harnessPath)
	if err != nil {
		return nil, fmt.Errorf("reading the harness: %w", err)
	}
	res := &checkResult{h: h, files: []report.File{{Name: harnessPath, Src: hsrc}}}
	res.diags = append(res.diags, hds...)
	var readDiags [][]diag.Diagnostic
	for _, in := range inputs {
		var src []byte
		var rerr error
		switch {
		case in.src != nil:
			src = in.src
		case in.stdin:
			src, rerr = c.readStdin(limit)
		default:
			src, rerr = readFile(in.path, limit)
		}
		if rerr != nil {
			return nil, rerr
		}
		doc, rds := playbook.Read(in.name, src, &playbook.ReadOptions{Limits: syntax.Limits{MaxSize: orDefault(limit)}})
		res.docs = append(res.docs, doc)
		readDiags = append(readDiags, rds)
		res.files = append(res.files, report.File{Name: in.name, Src: src})
	}
	if diag.Count(hds, diag.Error) > 0 {
		// A harness with errors (a credential written into it, a bad
		// binding) is not used to start or contact anything.
		res.env = host.Offline(h)
	} else {
		res.env = host.Connect(ctx, h, res.docs, nil)
	}
	res.diags = append(res.diags, res.env.Diagnostics...)
	if diag.Count(hds, diag.Error) == 0 {
		res.diags = append(res.diags, preflight.Store(ctx, res.env)...)
	}
	for i, doc := range res.docs {
		res.diags = append(res.diags, readDiags[i]...)
		res.diags = append(res.diags, validate.Document(doc, &validate.Options{Registry: res.env.Registry.Has})...)
		if diag.Count(hds, diag.Error) == 0 {
			res.diags = append(res.diags, preflight.Check(ctx, res.env, doc)...)
		}
	}
	// Last line of defence: no secret value the harness resolved is ever
	// printed, whichever check produced the message.
	for i := range res.diags {
		res.diags[i].Message = res.env.Secrets.Redact(res.diags[i].Message)
	}
	diag.Sort(res.diags)
	return res, nil
}
