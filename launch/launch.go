// Package launch does what a run does before anything executes, for
// every front end (the CLI's run, resume and retry, the server): read the
// document, connect what it needs from the harness (package host), and
// open the runtime session, which validates and checks it (package
// preflight). An error-level diagnostic anywhere stops it: nothing runs.
//
// [Open] is for a new run; [OpenRun] is the one way to continue an
// existing one, and checks the run's recorded harness before anything of
// the harness is used.
package launch

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/harness"
	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/preflight"
	"github.com/openplaybook/openplaybook/runtime"
	"github.com/openplaybook/openplaybook/store"
)

// Harness is a harness file read for running: what harness.Load returned,
// with the file's bytes (their SHA-256 identifies the harness in a run's
// audit log).
type Harness struct {
	H *harness.Harness
	// Src is the file's bytes; Diags what reading it found.
	Src   []byte
	Diags []diag.Diagnostic
}

// Load reads the harness file at path, once: the harness is parsed from
// the very bytes whose digest identifies it, so a file replaced between
// two reads cannot pass as the one a run recorded. The error is for I/O
// only (as harness.Load).
func Load(path string) (*Harness, error) {
	src, err := readFile(path)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	h, ds := harness.Parse(path, src, dir)
	return &Harness{H: h, Src: src, Diags: ds}, nil
}

// Digest is the SHA-256 of the harness file, hex.
func (h *Harness) Digest() string { return fmt.Sprintf("%x", sha256.Sum256(h.Src)) }

// Options configures [Open].
type Options struct {
	// Name and Src are the document's file name (for positions) and bytes.
	Name string
	Src  []byte
	// Store is the harness's open store. Required.
	Store store.Store
	// External serves agents bound to driver "mcp" (nil: they wait).
	External driver.Driver
	// Progress receives the run's progress lines (nil discards them).
	Progress io.Writer
	// AcceptHarnessChange lets [OpenRun] open a run last run with another
	// harness (resume's and retry's --accept-harness-change); the change
	// is recorded when the run goes on.
	AcceptHarnessChange bool
}

// Opened is a document ready to run: its connected host and its runtime
// session. Close ends the host's sessions.
type Opened struct {
	Doc     *playbook.Document
	Host    *host.Host
	Session *runtime.Session
}

// Close ends every MCP session the host opened.
func (o *Opened) Close() {
	if o != nil && o.Host != nil {
		o.Host.Close()
	}
}

// Unusable returns the harness's diagnostics when one is an error (the
// harness is then not used to open a store, start or contact anything),
// including a store seed that cannot be read; nil when it can be used.
func (h *Harness) Unusable() []diag.Diagnostic {
	ds := append([]diag.Diagnostic(nil), h.Diags...)
	if h.H.Store != nil && h.H.Store.Seed != "" {
		if _, err := store.ReadSeed(h.H.Store.Seed); err != nil {
			ds = append(ds, diag.Diagnostic{File: h.H.Path, Line: 1, Column: 1, Pointer: "/store/seed", Severity: diag.Error,
				Rule: host.RuleStore, Message: fmt.Sprintf("the store seed cannot be used: %v", err)})
		}
	}
	if diag.Count(ds, diag.Error) == 0 {
		return nil
	}
	return ds
}

// ErrHarness is returned (wrapped, with the diagnostics) when the harness
// itself has an error: it is not used to start or contact anything.
var ErrHarness = errors.New("the harness has errors; nothing was started")

// OpenRun opens an existing run for resuming or retrying it: every path
// that continues a run (the CLI's resume and retry, a server's resume, an
// agent attaching to a waiting run) comes through here. Before anything
// of the harness is used (no MCP server started, no connection made, no
// secret looked up, no preflight, no store seed loaded) it checks, from
// the store alone, that the run's audit chain verifies and that h is the
// harness the run was last run with ([runtime.CheckHarness]), unless
// opt.AcceptHarnessChange; a changed harness is refused with a
// [*runtime.HarnessChangedError]. Then it loads the harness's store seed
// and opens the run's document, the bytes stored with it (opt.Name and
// opt.Src are ignored), as [Open] does. The run is returned as read
// (its status is the caller's to judge), also with an error after it was
// read.
func OpenRun(ctx context.Context, h *Harness, runID string, opt Options) (*Opened, store.Run, []diag.Diagnostic, error) {
	if opt.Store == nil {
		return nil, store.Run{}, nil, errors.New("launch: OpenRun needs a Store")
	}
	run, err := opt.Store.GetRun(ctx, runID)
	if err != nil {
		return nil, store.Run{}, nil, err
	}
	if err := CheckRun(ctx, h, opt.Store, runID, opt.AcceptHarnessChange); err != nil {
		return nil, run, nil, err
	}
	if h.Unusable() == nil {
		if err := host.SeedStore(ctx, h.H, opt.Store); err != nil {
			return nil, run, nil, err
		}
	}
	opt.Name, opt.Src = "<document of "+runID+">", run.Document
	o, ds, err := Open(ctx, h, opt)
	return o, run, ds, err
}

// CheckRun is the first thing [OpenRun] does, for a front end that
// serves an existing run before it continues it (`openplaybook mcp
// --run`): from st alone, the run's audit chain verifies and h is the
// harness the run was last run with, or accept is set
// ([runtime.CheckHarness]; a changed harness is a
// [*runtime.HarnessChangedError]). Nothing of h but its digest is used.
func CheckRun(ctx context.Context, h *Harness, st store.Store, runID string, accept bool) error {
	_, err := runtime.CheckHarness(ctx, st, runID, h.Digest(), accept)
	return err
}

// Open reads the document, connects what it needs and opens the runtime
// session. It returns every diagnostic found (the harness's, the
// document's, preflight's), with secret values redacted. With an
// error-level one it returns [runtime.ErrNotRunnable] (or [ErrHarness])
// and a nil *Opened; the caller reports the diagnostics.
func Open(ctx context.Context, h *Harness, opt Options) (*Opened, []diag.Diagnostic, error) {
	doc, rds := playbook.Read(opt.Name, opt.Src, nil)
	redactAll := func(ds []diag.Diagnostic, redact func(string) string) []diag.Diagnostic {
		for i := range ds {
			ds[i].Message = redact(ds[i].Message)
		}
		diag.Sort(ds)
		return ds
	}
	hds := append([]diag.Diagnostic(nil), h.Diags...)
	if bad := h.Unusable(); bad != nil {
		return nil, redactAll(append(bad, rds...), h.H.SecretResolver().Redact), ErrHarness
	}
	if opt.Store == nil {
		return nil, nil, errors.New("launch: Open needs a Store")
	}
	var id string // a document without a manifest fails validation below
	if doc.Manifest != nil {
		id = playbook.Str(doc.Manifest.ID)
	}
	hst := host.Connect(ctx, h.H, []*playbook.Document{doc}, &host.Options{Store: opt.Store})
	hst.External = opt.External
	s, ds, err := runtime.Open(ctx, runtime.SessionOptions{
		Document: doc,
		Registry: hst.Registry,
		Store:    opt.Store,
		Driver:   hst.Drivers(id),
		Check: func(ctx context.Context, doc *playbook.Document) []diag.Diagnostic {
			ds := append(append(append([]diag.Diagnostic(nil), hds...), rds...), hst.Diagnostics...)
			return append(ds, preflight.Check(ctx, hst, doc)...)
		},
		Progress:            opt.Progress,
		HarnessPath:         h.H.Path,
		HarnessDigest:       h.Digest(),
		AcceptHarnessChange: opt.AcceptHarnessChange,
		MaxToolCalls:        h.H.Runtime.MaxToolCalls,
		ApprovalExpiry:      h.H.Runtime.ApprovalExpiry,
		Redact:              hst.Secrets.Redact,
		Policy:              h.H.Policy,
	})
	ds = redactAll(ds, hst.Secrets.Redact)
	if err != nil {
		hst.Close()
		return nil, ds, err
	}
	return &Opened{Doc: doc, Host: hst, Session: s}, ds, nil
}

// readFile reads at most harness.MaxSize+1 bytes of path, so that a huge
// file (or a device) is refused by the parser's size limit without being
// read whole.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, harness.MaxSize+1))
}
