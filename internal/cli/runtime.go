package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/drivers"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/report"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// Exit codes of run and resume (docs/cli.md).
const (
	ExitWaiting  = 3 // the run waits for a person (an approval or a gate)
	ExitRejected = 4 // the run ended rejected at a gate
)

// session is an imported document ready to run: its checked environment,
// its store and its engine. Close releases all of them.
type session struct {
	res    *checkResult
	store  *store.Store
	engine *runtime.Engine
}

func (s *session) Close() {
	if s.res != nil && s.res.env != nil {
		s.res.env.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
}

// importForRun does what a run does before anything executes: validate and
// check the document against the harness (an error-level diagnostic stops
// it, and is reported), import it, open the store (loading the harness's
// seed) and build the engine. docPath may be "" when src is given (resume
// runs the document bytes the run was started with).
func (c *CLI) importForRun(ctx context.Context, harnessPath, docPath string, src []byte, srcName string) (*session, error) {
	in := []input{{name: docPath, path: docPath}}
	if src != nil {
		in = []input{{name: srcName, src: src}}
	}
	res, err := c.checkInputs(ctx, harnessPath, in)
	if err != nil {
		return nil, ioError(err)
	}
	s := &session{res: res}
	if diag.Count(res.diags, diag.Error) > 0 {
		s.Close()
		fmt.Fprintln(c.stderr(), "openplaybook: the document does not pass check against the harness; nothing was run:")
		_ = report.Write(c.stderr(), "text", res.files, keep(res.diags, diag.Error), nil)
		return nil, failed
	}
	doc := res.docs[0]
	im, err := runtime.Import(doc, res.env.Registry)
	if err != nil {
		s.Close()
		return nil, &exitError{code: ExitProblems, err: fmt.Errorf("importing %s: %w", doc.File, err)}
	}
	st, err := openStore(ctx, res.h)
	if err != nil {
		s.Close()
		return nil, ioError(err)
	}
	s.store = st
	sec := res.env.Secrets
	setup := &driver.Setup{Secret: sec.Resolve, Expand: sec.Expand, Path: res.h.ResolvePath, PlaybookID: playbook.Str(doc.Manifest.ID)}
	drivers := map[string]driver.Driver{}
	s.engine = runtime.New(im, runtime.Options{
		Store:          st,
		Env:            res.env,
		HarnessPath:    harnessPath,
		Progress:       c.stderr(),
		MaxToolCalls:   res.h.Runtime.MaxToolCalls,
		ApprovalExpiry: res.h.Runtime.ApprovalExpiry,
		Driver: func(agent string) (driver.Driver, error) {
			if d, ok := drivers[agent]; ok {
				return d, nil
			}
			d, err := buildDriver(res.h, agent, setup)
			if err == nil {
				drivers[agent] = d
			}
			return d, err
		},
	})
	return s, nil
}

func keep(ds []diag.Diagnostic, sev diag.Severity) []diag.Diagnostic {
	var out []diag.Diagnostic
	for _, d := range ds {
		if d.Severity >= sev {
			out = append(out, d)
		}
	}
	return out
}

// buildDriver makes the driver the harness binds to an agent.
func buildDriver(h *harness.Harness, agent string, setup *driver.Setup) (driver.Driver, error) {
	b := h.Agents[agent]
	if b == nil {
		return nil, fmt.Errorf("the harness binds no agent %q", agent)
	}
	d, err := drivers.New(b.Driver, b.Settings, setup)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// openStore opens the harness's store and loads its customer seed.
func openStore(ctx context.Context, h *harness.Harness) (*store.Store, error) {
	if err := os.MkdirAll(filepath.Dir(h.Store.SQLite), 0o755); err != nil {
		return nil, err
	}
	st, err := store.Open(h.Store.SQLite)
	if err != nil {
		return nil, err
	}
	if h.Store.Seed != "" {
		cs, err := store.ReadSeed(h.Store.Seed)
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("reading the store seed: %w", err)
		}
		if err := st.SeedCustomers(ctx, cs); err != nil {
			st.Close()
			return nil, err
		}
	}
	return st, nil
}

// readInput reads --input: a JSON text, or @file.
func readInput(v string) (jsontext.Value, error) {
	if v == "" {
		return nil, nil
	}
	if name, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return jsontext.Value(v), nil
}

// finish prints the outcome and maps it to the exit code.
func (c *CLI) finish(out runtime.Outcome, runErr error, format, harnessPath string) error {
	if format == "json" {
		b, err := json.Marshal(out, jsontext.WithIndent("  "))
		if err != nil {
			return ioError(err)
		}
		fmt.Fprintln(c.stdout(), string(b))
	} else if out.Run != "" {
		fmt.Fprintf(c.stdout(), "run %s %s\n", out.Run, out.Status)
		for _, p := range out.Waiting {
			if p.Kind == "resume" {
				fmt.Fprintf(c.stdout(), "  %s\n", p.Summary)
				continue
			}
			fmt.Fprintf(c.stdout(), "  waiting: %s\n    openplaybook approve --harness %s %s %s   (or deny)\n", p.Summary, harnessPath, out.Run, p.ID)
		}
		if out.Status == runtime.Waiting {
			fmt.Fprintf(c.stdout(), "  then: openplaybook resume --harness %s %s\n", harnessPath, out.Run)
		}
		if out.Reason != "" && out.Status != runtime.Waiting {
			fmt.Fprintf(c.stdout(), "  %s\n", out.Reason)
		}
	}
	if runErr != nil {
		return &exitError{code: ExitProblems, err: runErr}
	}
	switch out.Status {
	case runtime.Completed:
		return nil
	case runtime.Waiting:
		return &exitError{code: ExitWaiting}
	case runtime.Rejected:
		return &exitError{code: ExitRejected}
	}
	return failed
}
