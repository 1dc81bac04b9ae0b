package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/obs"
	"github.com/openplaybook/openplaybook/serve"
	"github.com/openplaybook/openplaybook/store"
)

// DefaultListen is serve's default address.
const DefaultListen = "127.0.0.1:7420"

func (c *CLI) serveCommand() *cobra.Command {
	var harnessPath, listen, certFile, keyFile, publicURL, proxies, logFormat, logLevel, metricsListen, advertiseURL string
	var insecure bool
	var liveness time.Duration
	var maxAdopt int
	cmd := &cobra.Command{
		Use:                   "serve [--harness FILE] [--listen ADDR] [--tls-cert FILE --tls-key FILE] [--insecure-listen] [--public-url URL] [--trusted-proxies LIST] [--log-format json|text] [--log-level LEVEL] [--metrics-listen ADDR] [--advertise-url URL] [--replica-liveness DURATION] [--max-adopt N]",
		DisableFlagsInUseLine: true,
		Short:                 "Serve the console, the HTTP API and MCP endpoints for external agents",
		Long: `Serve runs one process over the harness's store: the web console at /, the
HTTP API at /api/v1/ (docs/api.md) and, at /mcp/runs/{run}, an MCP endpoint
(streamable HTTP) where an external agent (Claude Code, Cursor, any MCP
client) is the agent of the run's steps bound to 'driver: mcp'. Every call
such an agent makes goes through the same decision path as a model's.

The API and the console need the operator token: the value of the secret
serve.operatorTokenSecret names (default OPENPLAYBOOK_OPERATOR_TOKEN).

It listens on 127.0.0.1:7420 by default. Any address that is not loopback
needs TLS (--tls-cert and --tls-key) or, knowingly, --insecure-listen.
Stop it with Ctrl-C: runs it was executing stay resumable. See docs/serve.md.

Behind an ingress, --public-url is the address clients use: the MCP URLs it
hands out begin with it and it is the origin it trusts; --trusted-proxies
lists the proxies whose X-Forwarded-* and Forwarded headers it believes.
It logs to stderr (--log-format, --log-level); OpenTelemetry traces and
metrics follow the OTEL_* variables; /healthz and /readyz answer probes.
On a PostgreSQL store, several serve processes are replicas of one
service: each claims the runs it executes, and the others adopt them when
it dies (--advertise-url, --replica-liveness, --max-adopt; docs/serve.md,
"Running several replicas").
Every flag has an environment form: OPENPLAYBOOK_ and its name in capitals,
with _ for - (OPENPLAYBOOK_PUBLIC_URL). See docs/operate.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.flagsFromEnv(cmd); err != nil {
				return &exitError{code: ExitUsage, err: err}
			}
			o, err := obs.New(cmd.Context(), obs.Config{LogFormat: logFormat, LogLevel: logLevel, Stderr: c.stderr(), Getenv: c.getenv, Version: c.version()})
			if err != nil {
				return &exitError{code: ExitUsage, err: err}
			}
			defer func() {
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = o.Shutdown(sctx)
			}()
			trusted, err := obs.ParseProxies(proxies)
			if err != nil {
				return &exitError{code: ExitUsage, err: fmt.Errorf("--trusted-proxies: %w", err)}
			}
			if publicURL != "" {
				if u, err := url.Parse(publicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
					return &exitError{code: ExitUsage, err: fmt.Errorf("--public-url %q: write the scheme and host clients use, such as https://playbooks.example.com (no path)", publicURL)}
				}
				publicURL = strings.TrimSuffix(publicURL, "/")
			}
			if (certFile == "") != (keyFile == "") {
				return &exitError{code: ExitUsage, err: errors.New("--tls-cert and --tls-key go together")}
			}
			host_, _, err := net.SplitHostPort(listen)
			if err != nil {
				return &exitError{code: ExitUsage, err: fmt.Errorf("--listen %q: %v (write host:port, such as 127.0.0.1:7420)", listen, err)}
			}
			ip := net.ParseIP(host_)
			loopback := host_ == "localhost" || (ip != nil && ip.IsLoopback())
			if !loopback && certFile == "" && !insecure {
				return &exitError{code: ExitUsage, err: fmt.Errorf("--listen %s is not a loopback address: give --tls-cert and --tls-key, or --insecure-listen to serve plain HTTP to the network anyway", listen)}
			}
			lh, st0, err := c.openForServe(cmd.Context(), harnessPath, "")
			if err != nil {
				return err
			}
			defer st0.Close()
			if publicURL == "" {
				publicURL = lh.H.Serve.PublicURL
			}
			if proxies == "" && len(lh.H.Serve.TrustedProxies) > 0 {
				if trusted, err = obs.ParseProxies(strings.Join(lh.H.Serve.TrustedProxies, ",")); err != nil {
					return &exitError{code: ExitUsage, err: fmt.Errorf("serve.trustedProxies: %w", err)}
				}
			}
			st := o.Store(st0)
			gcForCalls()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return ioError(err)
			}
			scheme := "http"
			if certFile != "" {
				scheme = "https"
			}
			addr := ln.Addr().String()
			if h, p, err := net.SplitHostPort(addr); err == nil && (h == "127.0.0.1" || h == "::1") && host_ == "localhost" {
				addr = net.JoinHostPort("localhost", p)
			}
			base := scheme + "://" + addr
			if publicURL != "" {
				base = publicURL
			}
			srv, err := serve.New(serve.Options{Harness: lh, Store: st, BaseURL: base, Version: c.version(), Log: o.LineWriter(slog.LevelWarn)})
			if err != nil {
				ln.Close()
				return &exitError{code: ExitProblems, err: err}
			}
			// Requests must arrive whole within 30 s (a slow or stalled
			// client cannot hold connections open), idle keep-alive
			// connections close after 2 minutes; answers have no time
			// limit (event streams, calls that wait for approval).
			hs := &http.Server{Handler: srv.Operated(o, trusted), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if advertiseURL != "" {
				if u, err := url.Parse(advertiseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					ln.Close()
					return &exitError{code: ExitUsage, err: fmt.Errorf("--advertise-url %q: write the scheme and host the other replicas reach this one at, such as http://10.0.0.5:7420", advertiseURL)}
				}
			}
			if err := srv.StartReplicas(ctx, serve.ReplicaOptions{AdvertiseURL: advertiseURL, Liveness: liveness, MaxAdopt: maxAdopt}); err != nil {
				ln.Close()
				srv.Close()
				return ioError(err)
			}
			srv.ResumeWaiting(ctx)
			errc := make(chan error, 1)
			go func() {
				if certFile != "" {
					hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
					errc <- hs.ServeTLS(ln, certFile, keyFile)
				} else {
					errc <- hs.Serve(ln)
				}
			}()
			var ms *http.Server
			if metricsListen != "" {
				mh := o.MetricsHandler()
				if mh == nil {
					return &exitError{code: ExitUsage, err: errors.New("--metrics-listen needs OTEL_METRICS_EXPORTER=prometheus (the metrics it serves)")}
				}
				mln, err := net.Listen("tcp", metricsListen)
				if err != nil {
					return ioError(err)
				}
				mux := http.NewServeMux()
				mux.Handle("GET /metrics", mh)
				ms = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
				go func() { _ = ms.Serve(mln) }()
				o.Log.Info("openplaybook serve: metrics on http://" + mln.Addr().String() + "/metrics")
			}
			o.Log.Info(fmt.Sprintf("openplaybook serve: listening on %s (console %s/, API %s/api/v1/, MCP %s/mcp/runs/RUN)", base, base, base, base),
				"listen", ln.Addr().String(), "publicURL", base, "tracing", o.Tracing())
			select {
			case err = <-errc:
			case <-ctx.Done():
				o.Log.Info("openplaybook serve: stopping; the runs it was executing stay resumable")
			}
			if ms != nil {
				_ = ms.Close()
			}
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Close()
			_ = hs.Shutdown(sctx)
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				return ioError(err)
			}
			return nil
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file (YAML or JSON; see docs/harness.md)")
	cmd.Flags().StringVar(&listen, "listen", DefaultListen, "the address to listen on (host:port; port 0 picks a free one)")
	cmd.Flags().StringVar(&certFile, "tls-cert", "", "serve HTTPS with this certificate (PEM)")
	cmd.Flags().StringVar(&keyFile, "tls-key", "", "the certificate's private key (PEM)")
	cmd.Flags().BoolVar(&insecure, "insecure-listen", false, "allow plain HTTP on an address that is not loopback")
	cmd.Flags().StringVar(&publicURL, "public-url", "", "the URL clients reach the server at, behind an ingress (https://host): MCP URLs begin with it, and it is the origin trusted")
	cmd.Flags().StringVar(&proxies, "trusted-proxies", "", "comma-separated IPs and CIDR prefixes of the proxies whose X-Forwarded-* and Forwarded headers are believed")
	cmd.Flags().StringVar(&logFormat, "log-format", "", "log format on stderr: json or text (default: text on a terminal, else json)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	cmd.Flags().StringVar(&advertiseURL, "advertise-url", "", "on a PostgreSQL store: the URL the other replicas reach this one at (default: the listen or public URL)")
	cmd.Flags().DurationVar(&liveness, "replica-liveness", 0, "on a PostgreSQL store: how long this replica may go unconfirmed before the others adopt its runs (default 5s, at least 1s)")
	cmd.Flags().IntVar(&maxAdopt, "max-adopt", 0, "on a PostgreSQL store: the most runs this replica adopts and executes in one adoption round (default 50)")
	cmd.Flags().StringVar(&metricsListen, "metrics-listen", "", "also serve /metrics, unauthenticated, on this address (with OTEL_METRICS_EXPORTER=prometheus)")
	return cmd
}

// flagsFromEnv sets each flag of cmd not given on the command line from
// its environment form, OPENPLAYBOOK_<NAME> (the name in capitals, - as
// _), when that is set. A value the flag refuses is an error naming the
// variable.
func (c *CLI) flagsFromEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" {
			return
		}
		name := "OPENPLAYBOOK_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v := c.getenv(name)
		if v == "" {
			return
		}
		if e := f.Value.Set(v); e != nil {
			err = fmt.Errorf("%s=%q: %v", name, v, e)
		}
	})
	return err
}

func (c *CLI) mcpCommand() *cobra.Command {
	var harnessPath, run string
	cmd := &cobra.Command{
		Use:                   "mcp [--harness FILE] --run RUN",
		DisableFlagsInUseLine: true,
		Short:                 "Serve a run's MCP endpoint over stdio, for clients that launch commands",
		Long: `Mcp serves run RUN's MCP endpoint over standard input and output, for MCP
clients that only launch commands (Claude Desktop): the client is the agent
of the run's steps bound to 'driver: mcp', exactly as at serve's
/mcp/runs/RUN. The agent token is read from OPENPLAYBOOK_AGENT_TOKEN (issue
one with 'openplaybook agent-token --harness FILE RUN' or the API). The run executes in
this process while the client is connected. See docs/serve.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if run == "" {
				return &exitError{code: ExitUsage, err: errors.New("mcp needs --run RUN")}
			}
			lh, st, err := c.openForServe(cmd.Context(), harnessPath, run)
			if err != nil {
				return err
			}
			defer st.Close()
			srv, err := serve.New(serve.Options{Harness: lh, Store: st, AgentsOnly: true, Version: c.version(), Log: c.stderr()})
			if err != nil {
				return &exitError{code: ExitProblems, err: err}
			}
			defer srv.Close()
			ctx, stop := signal.NotifyContext(ctxOf(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := srv.ServeStdio(ctx, run, c.getenv("OPENPLAYBOOK_AGENT_TOKEN"), c.stdin(), c.stdout()); err != nil {
				return &exitError{code: ExitProblems, err: err}
			}
			return nil
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file the run was started with")
	cmd.Flags().StringVar(&run, "run", "", "the run to serve")
	return cmd
}

func (c *CLI) agentTokenCommand() *cobra.Command {
	var harnessPath, by, agent string
	var revoke bool
	format := newChoice("text", []string{"text", "json"})
	cmd := &cobra.Command{
		Use:                   "agent-token [--harness FILE] [--agent NAME] [--revoke] [--format text|json] RUN",
		DisableFlagsInUseLine: true,
		Short:                 "Issue (or revoke) the bearer token of a run's external agent",
		Long: `Agent-token issues a bearer token for the external agent (an MCP client) of
RUN and prints it once: the store keeps only its SHA-256. The token is
valid for RUN only, until it is revoked, expires (7 days) or the run ends;
with --agent, only for the steps of that agent.
--revoke revokes every token of RUN. Issuing and revoking are audited.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			lh, st, err := c.openForServe(cmd.Context(), harnessPath, "")
			if err != nil {
				return err
			}
			defer st.Close()
			srv, err := serve.New(serve.Options{Harness: lh, Store: st, AgentsOnly: true, BaseURL: "http://" + DefaultListen, Version: c.version()})
			if err != nil {
				return &exitError{code: ExitProblems, err: err}
			}
			defer srv.Close()
			if by == "" {
				by = c.userName()
			}
			ctx := ctxOf(cmd)
			if revoke {
				n, err := srv.RevokeAgentTokens(ctx, args[0], "", by)
				if err != nil {
					return &exitError{code: ExitProblems, err: runError(err, args[0], harnessPath)}
				}
				if format.value == "json" {
					b, _ := json.Marshal(map[string]any{"run": args[0], "revoked": n})
					fmt.Fprintln(c.stdout(), string(b))
				} else {
					fmt.Fprintf(c.stdout(), "revoked %d agent token(s) of run %s\n", n, args[0])
				}
				return nil
			}
			tok, err := srv.IssueAgentToken(ctx, args[0], agent, by)
			if err != nil {
				return &exitError{code: ExitProblems, err: runError(err, args[0], harnessPath)}
			}
			if format.value == "json" {
				b, _ := json.Marshal(tok, jsontext.WithIndent("  "))
				fmt.Fprintln(c.stdout(), string(b))
				return nil
			}
			fmt.Fprintf(c.stdout(), "%s\n", tok.Token)
			fmt.Fprintf(c.stderr(), "agent token %s for run %s (shown once; expires %s or when the run ends)\n  MCP over HTTP: %s (with openplaybook serve)\n  MCP over stdio: OPENPLAYBOOK_AGENT_TOKEN=<token> openplaybook mcp --harness %s --run %s\n",
				tok.ID, args[0], tok.Expires, tok.MCPURL, harnessPath, args[0])
			return nil
		},
	}
	harnessFlag(cmd, &harnessPath, "the harness file the run was started with")
	cmd.Flags().BoolVar(&revoke, "revoke", false, "revoke every agent token of RUN")
	cmd.Flags().StringVar(&agent, "agent", "", "the agent name (a step's agent) the token is for; default every agent bound to driver mcp")
	cmd.Flags().StringVar(&by, "by", "", "who issues it (default: the OS user)")
	formatFlag(cmd, format, "output format: text or json")
	return cmd
}

// openForServe loads the harness (an error in it stops here) and opens
// its store. With run set (mcp --run), the run's recorded harness is
// checked (launch.CheckRun) before the store's seed is loaded, and so
// before anything else of the harness is used.
func (c *CLI) openForServe(ctx context.Context, harnessPath, run string) (*launch.Harness, store.Store, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	lh, err := launch.Load(harnessPath)
	if err != nil {
		return nil, nil, ioError(fmt.Errorf("reading the harness: %w", err))
	}
	if bad := lh.Unusable(); bad != nil {
		for _, d := range bad {
			if d.Severity == 2 {
				return nil, nil, &exitError{code: ExitUsage, err: fmt.Errorf("%s:%d:%d: %s [%s]", d.File, d.Line, d.Column, d.Message, d.Rule)}
			}
		}
	}
	st, err := host.OpenStoreFile(lh.H)
	if err != nil {
		return nil, nil, ioError(err)
	}
	if run != "" {
		if err := launch.CheckRun(ctx, lh, st, run, false); err != nil {
			st.Close()
			if errors.Is(err, store.ErrNotFound) {
				err = runError(err, run, harnessPath)
			}
			return nil, nil, &exitError{code: ExitProblems, err: err}
		}
	}
	if err := host.SeedStore(ctx, lh.H, st); err != nil {
		st.Close()
		return nil, nil, ioError(err)
	}
	return lh, st, nil
}
