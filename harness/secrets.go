package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/openplaybook/openplaybook/diag"
)

// Secrets resolves named secrets from the sources a [SecretsConfig] lists.
// It is safe for concurrent use.
//
// Values never leave a Secrets except as the results of [Secrets.Lookup]
// and [Secrets.Expand]: errors and diagnostics name secrets and files,
// never values, and a Secrets formats as a fixed string under fmt (%v,
// %+v, %#v) and log/slog.
type Secrets struct {
	cfg       SecretsConfig
	lookupEnv func(string) (string, bool)
	readFile  func(string) ([]byte, error)

	once    sync.Once
	files   []map[string]string // parsed dotenv files, in cfg.Dotenv order (nil: missing optional file)
	loadErr error               // first problem reading the dotenv files
	dotErrs []*DotenvError      // every malformed line
	ioErrs  []fileError         // files that could not be read

	mu     sync.Mutex
	seen   map[string]bool     // every value handed out, for Redact
	redact func(string) string // Redactor of seen, nil when a value was added since
}

type fileError struct {
	file string
	err  error
}

// SecretsOptions adjusts [NewSecrets]. A nil *SecretsOptions means all
// defaults.
type SecretsOptions struct {
	// LookupEnv reads one environment variable. Nil means os.LookupEnv.
	LookupEnv func(name string) (string, bool)
	// ReadFile reads a dotenv file. Nil means os.ReadFile.
	ReadFile func(path string) ([]byte, error)
}

// NewSecrets returns a resolver for cfg (nil cfg: the process environment
// only). Dotenv files are read on first use, once.
func NewSecrets(cfg *SecretsConfig, opts *SecretsOptions) *Secrets {
	s := &Secrets{cfg: SecretsConfig{Env: true}, lookupEnv: os.LookupEnv, readFile: os.ReadFile, seen: map[string]bool{}}
	if cfg != nil {
		s.cfg = *cfg
		s.cfg.Dotenv = append([]DotenvFile(nil), cfg.Dotenv...)
	}
	if opts != nil {
		if opts.LookupEnv != nil {
			s.lookupEnv = opts.LookupEnv
		}
		if opts.ReadFile != nil {
			s.readFile = opts.ReadFile
		}
	}
	return s
}

// SecretResolver returns a resolver for the harness's secrets section,
// reading the process environment and the dotenv files.
func (h *Harness) SecretResolver() *Secrets { return NewSecrets(h.Secrets, nil) }

// String returns a fixed text: a Secrets never prints its values.
func (s *Secrets) String() string { return "harness.Secrets{[redacted]}" }

// GoString is String, for %#v.
func (s *Secrets) GoString() string { return s.String() }

// LogValue keeps values out of log/slog output.
func (s *Secrets) LogValue() slog.Value { return slog.StringValue(s.String()) }

// load reads the dotenv files once.
func (s *Secrets) load() {
	s.once.Do(func() {
		s.files = make([]map[string]string, len(s.cfg.Dotenv))
		for i, df := range s.cfg.Dotenv {
			src, err := s.readFile(df.Resolved)
			if err != nil {
				if df.Optional && errors.Is(err, fs.ErrNotExist) {
					continue
				}
				s.ioErrs = append(s.ioErrs, fileError{df.Resolved, err})
				if s.loadErr == nil {
					s.loadErr = fmt.Errorf("harness: reading dotenv file %s: %w", df.Resolved, ioCause(err))
				}
				continue
			}
			vals, errs := ParseDotenv(df.Resolved, src)
			s.files[i] = vals
			s.dotErrs = append(s.dotErrs, errs...)
			if len(errs) > 0 && s.loadErr == nil {
				s.loadErr = fmt.Errorf("harness: malformed dotenv file: %w", errs[0])
			}
		}
	})
}

// ioCause strips the path from an *fs.PathError (the caller names the
// file itself).
func ioCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Lookup returns the value of the named secret. Sources are tried in
// order: the process environment (when SecretsConfig.Env; the name with
// SecretsConfig.Prefix prepended), then each dotenv file in the order
// listed. The first non-empty value wins; a source that defines the name
// with an empty value is passed over. ok is false when no source defines
// the name; it is true with value "" when sources define it only empty.
//
// err is non-nil, whatever the name, when a dotenv file is malformed or a
// required one cannot be read (a missing optional file is skipped), and
// when name is not a secret name (^[A-Za-z_][A-Za-z0-9_]*$). A broken
// source fails every lookup, so that which source answers never depends
// on which file happens to be readable.
func (s *Secrets) Lookup(name string) (value string, ok bool, err error) {
	if !secretName.MatchString(name) {
		return "", false, errNotName
	}
	s.load()
	if s.loadErr != nil {
		return "", false, s.loadErr
	}
	if s.cfg.Env {
		if v, found := s.lookupEnv(s.cfg.Prefix + name); found {
			ok = true
			if v != "" {
				s.remember(v)
				return v, true, nil
			}
		}
	}
	for _, vals := range s.files {
		if v, found := vals[name]; found {
			ok = true
			if v != "" {
				s.remember(v)
				return v, true, nil
			}
		}
	}
	return "", ok, nil
}

func (s *Secrets) remember(v string) {
	s.mu.Lock()
	if !s.seen[v] {
		s.seen[v] = true
		s.redact = nil
	}
	s.mu.Unlock()
}

// errNotName does not quote the offending name: a caller passing a value
// where a name belongs must not see it printed.
var errNotName = errors.New("harness: not a secret name (a secret name is ^[A-Za-z_][A-Za-z0-9_]*$)")

// SecretError is the error of a secret that cannot be resolved. It names
// the secret and where it was looked for; it never holds a value.
type SecretError struct {
	// Name is the secret's name.
	Name string
	// Reason completes the sentence "secret NAME ...": "is not set (looked
	// in ...)" or "is empty (...)".
	Reason string
}

func (e *SecretError) Error() string { return fmt.Sprintf("harness: secret %q %s", e.Name, e.Reason) }

// sources describes where a name was looked for, for messages.
func (s *Secrets) sources(name string) string {
	var src []string
	if s.cfg.Env {
		src = append(src, "the environment variable "+s.cfg.Prefix+name)
	}
	for i, df := range s.cfg.Dotenv {
		if s.files != nil && s.files[i] == nil && df.Optional {
			src = append(src, df.Resolved+" (optional, missing)")
		} else {
			src = append(src, df.Resolved)
		}
	}
	if len(src) == 0 {
		return "no sources: the harness's secrets section has env: false and no dotenv file"
	}
	return strings.Join(src, ", ")
}

// Resolve is Lookup for a secret that must have a value: a secret that is
// not set or set only empty is a *[SecretError] naming the secret and the
// sources looked in.
func (s *Secrets) Resolve(name string) (string, error) {
	v, ok, err := s.Lookup(name)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "", &SecretError{Name: name, Reason: "is not set (looked in " + s.sources(name) + ")"}
	case v == "":
		return "", &SecretError{Name: name, Reason: "is empty (in " + s.sources(name) + ")"}
	}
	return v, nil
}

// Expand returns v with every ${secret:NAME} replaced by the secret's
// value (see [Secrets.Resolve]) and every "$${" by "${". A secret that is
// not set or is empty, and a malformed reference, are errors naming the
// secret; no error ever holds a value, v's expansion included.
func (s *Secrets) Expand(v string) (string, error) {
	return expandRefs(v, s.Resolve)
}

// Check reads the dotenv files and reports their problems as diagnostics
// (rule harness-dotenv): a malformed line at its file, line and column; an
// unreadable required file at the file. Messages never quote values.
func (s *Secrets) Check() []diag.Diagnostic {
	s.load()
	var ds []diag.Diagnostic
	for _, fe := range s.ioErrs {
		ds = append(ds, diag.Diagnostic{File: fe.file, Severity: diag.Error, Rule: RuleDotenv,
			Message: fmt.Sprintf("cannot read the dotenv file: %v", ioCause(fe.err))})
	}
	for _, e := range s.dotErrs {
		ds = append(ds, diag.Diagnostic{File: e.File, Line: e.Line, Column: e.Column, Severity: diag.Error, Rule: RuleDotenv, Message: e.Msg})
	}
	diag.Sort(ds)
	return ds
}

// CheckSecrets is the preflight of the harness's secrets: the problems of
// the dotenv files ([Secrets.Check]), then, for each use of a secret in
// the harness ([Harness.SecretRefs]), an error at the use (rule
// harness-secret-missing) when the secret is not set or is empty. Only the
// names given in only are checked, when only is non-empty (the secrets one
// playbook needs).
func (h *Harness) CheckSecrets(s *Secrets, only ...string) []diag.Diagnostic {
	ds := s.Check()
	if len(ds) > 0 {
		return ds
	}
	want := map[string]bool{}
	for _, n := range only {
		want[n] = true
	}
	for _, r := range h.refs {
		if len(want) > 0 && !want[r.Name] {
			continue
		}
		if _, err := s.Resolve(r.Name); err != nil {
			msg := err.Error()
			if se, ok := err.(*SecretError); ok {
				msg = fmt.Sprintf("secret %q %s", se.Name, se.Reason)
			}
			ds = append(ds, diag.Diagnostic{File: h.Path, Line: r.Pos.Line, Column: r.Pos.Column, Pointer: r.Pos.Pointer,
				Severity: diag.Error, Rule: RuleSecretMissing, Message: msg})
		}
	}
	diag.Sort(ds)
	return ds
}

// Redact replaces every secret value this Secrets has handed out so far
// (by Lookup, Resolve or Expand) with "[redacted]"; see [Redactor] for the
// forms and lengths covered.
//
// The redactor is built once for the values handed out so far and built
// again only when another value is handed out.
func (s *Secrets) Redact(text string) string {
	s.mu.Lock()
	r := s.redact
	if r == nil {
		vals := make([]string, 0, len(s.seen))
		for v := range s.seen {
			vals = append(vals, v)
		}
		r = Redactor(vals)
		s.redact = r
	}
	s.mu.Unlock()
	return r(text)
}

// Expand returns a copy of the server binding with every ${secret:NAME}
// in Args, Env values, URL and Headers values replaced by the secret's
// value (see [Secrets.Expand]); s is not modified. The copy holds
// credentials: hand it to the MCP client and drop it, never print it. The
// error names the first secret that cannot be resolved and where it is
// used ("env FOO of MCP server \"acme\""), never a value.
//
// It fails closed: a reference to a secret that is not among
// [MCPServer.BoundSecrets] is a *[BindingError], and no secret of that
// value is looked up, even when the harness was built by hand rather than
// read by [Parse].
func (s *MCPServer) Expand(sec *Secrets) (*MCPServer, error) {
	out := *s
	out.Args = nil
	out.Env = nil
	out.Headers = nil
	where := func(what string) string { return fmt.Sprintf("%s of MCP server %q", what, s.Name) }
	wrap := func(what string, err error) error { return fmt.Errorf("%s: %w", where(what), err) }
	dest := Destination("mcp", s.Name)
	lookup := func(name string) (string, error) {
		if !slices.Contains(s.BoundSecrets, name) {
			return "", &BindingError{Name: name, For: dest}
		}
		return sec.Resolve(name)
	}
	expand := func(v string) (string, error) { return expandRefs(v, lookup) }
	var err error
	if s.Args != nil {
		out.Args = make([]string, len(s.Args))
		for i, a := range s.Args {
			if out.Args[i], err = expand(a); err != nil {
				return nil, wrap(fmt.Sprintf("argument %d", i+1), err)
			}
		}
	}
	if s.Env != nil {
		out.Env = make(map[string]string, len(s.Env))
		for k, v := range s.Env {
			if out.Env[k], err = expand(v); err != nil {
				return nil, wrap("env "+k, err)
			}
		}
	}
	if out.URL, err = expand(s.URL); err != nil {
		return nil, wrap("url", err)
	}
	if s.Headers != nil {
		out.Headers = make(map[string]string, len(s.Headers))
		for k, v := range s.Headers {
			if out.Headers[k], err = expand(v); err != nil {
				return nil, wrap("header "+k, err)
			}
		}
	}
	if s.OAuth != nil {
		o := *s.OAuth
		if o.ClientID, err = expand(s.OAuth.ClientID); err != nil {
			return nil, wrap("oauth clientId", err)
		}
		if o.ClientSecret, err = expand(s.OAuth.ClientSecret); err != nil {
			return nil, wrap("oauth clientSecret", err)
		}
		out.OAuth = &o
	}
	return &out, nil
}
