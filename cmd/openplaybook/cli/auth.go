package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/spf13/cobra"

	"github.com/openplaybook/openplaybook/host"
	"github.com/openplaybook/openplaybook/launch"
	"github.com/openplaybook/openplaybook/mcphost"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/vault"
)

func (c *CLI) authCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:                   "auth COMMAND",
		DisableFlagsInUseLine: true,
		Short:                 "Log in to MCP servers; list, revoke and rekey the OAuth tokens in the credential vault",
		Long: `Auth manages the credential vault (the harness's store.vault): the OAuth
access and refresh tokens that token endpoints issued for the harness's
connections, sealed in the store (docs/identity.md, "The credential
vault"), and logs in to MCP servers a person must consent to. No command
prints a token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(c.stderr())
			_ = cmd.Help()
			return &exitError{code: ExitUsage}
		},
	}
	cmd.AddCommand(c.authLoginCommand(), c.authListCommand(), c.authRevokeCommand(), c.authRekeyCommand())
	return cmd
}

// openVault loads the harness, opens its store and the vault in it.
func (c *CLI) openVault(harnessPath string) (*vault.Vault, store.Store, error) {
	v, st, _, err := c.openVaultOf(harnessPath)
	return v, st, err
}

// openVaultOf is openVault that also returns the harness.
func (c *CLI) openVaultOf(harnessPath string) (_ *vault.Vault, _ store.Store, _ *launch.Harness, err error) {
	lh, err := launch.Load(harnessPath)
	if err != nil {
		return nil, nil, nil, ioError(fmt.Errorf("reading the harness: %w", err))
	}
	for _, d := range lh.Unusable() {
		if d.Severity == 2 {
			return nil, nil, nil, &exitError{code: ExitUsage, err: fmt.Errorf("%s:%d:%d: %s [%s]", d.File, d.Line, d.Column, d.Message, d.Rule)}
		}
	}
	if lh.H.Store == nil || lh.H.Store.Vault == nil {
		return nil, nil, nil, &exitError{code: ExitUsage, err: fmt.Errorf("the harness %s has no credential vault: add store.vault.keySecret (docs/identity.md, \"The credential vault\")", harnessPath)}
	}
	st, err := host.OpenStoreFile(lh.H)
	if err != nil {
		return nil, nil, nil, ioError(err)
	}
	v, err := host.OpenVault(lh.H, lh.H.SecretResolver(), st)
	if err != nil {
		st.Close()
		return nil, nil, nil, &exitError{code: ExitProblems, err: fmt.Errorf("the credential vault: %v", err)}
	}
	return v, st, lh, nil
}

func (c *CLI) authListCommand() *cobra.Command {
	var harnessPath string
	format := newChoice("text", []string{"text", "json"})
	cmd := &cobra.Command{
		Use:                   "list [--harness FILE] [--format text|json]",
		DisableFlagsInUseLine: true,
		Short:                 "List the vault's entries (never their tokens)",
		Long: `List prints each entry of the credential vault: its name
(connection:<provider> or mcp:<server>), the grant it began with, when its
access token expires, whether it holds a refresh token, the scopes granted,
when it was written and the id of the key that sealed it ("old key" when
that is one of store.vault.previousKeySecrets: run auth rekey; "unknown
key" when the harness gives no key that opens it). An entry that does not
open says why. Tokens are never printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v, st, err := c.openVault(harnessPath)
			if err != nil {
				return err
			}
			defer st.Close()
			list, err := v.List(ctxOf(cmd))
			if err != nil {
				return &exitError{code: ExitProblems, err: fmt.Errorf("auth list: %v", err)}
			}
			if format.value == "json" {
				type row struct {
					Name       string    `json:"name"`
					Grant      string    `json:"grant,omitempty"`
					Expires    time.Time `json:"expires,omitzero"`
					Refresh    bool      `json:"refreshToken"`
					Scopes     []string  `json:"scopes,omitempty"`
					Issued     time.Time `json:"issued,omitzero"`
					Updated    time.Time `json:"updated"`
					Version    int64     `json:"version"`
					KeyID      string    `json:"keyId"`
					CurrentKey bool      `json:"currentKey"`
					Error      string    `json:"error,omitempty"`
				}
				rows := []row{}
				for _, e := range list {
					r := row{Name: e.Name, Grant: e.Grant, Expires: e.Expiry, Refresh: e.HasRefresh, Scopes: e.Scopes, Issued: e.Issued, Updated: e.Updated, Version: e.Version, KeyID: e.KeyID, CurrentKey: e.Current}
					if e.Err != nil {
						r.Error = e.Err.Error()
					}
					rows = append(rows, r)
				}
				b, _ := json.Marshal(rows)
				fmt.Fprintln(c.stdout(), string(b))
				return nil
			}
			if len(list) == 0 {
				fmt.Fprintln(c.stdout(), "the credential vault is empty")
				return nil
			}
			w := tabwriter.NewWriter(c.stdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tGRANT\tEXPIRES\tREFRESH\tSCOPES\tUPDATED\tKEY")
			for _, e := range list {
				key := e.KeyID
				switch {
				case errors.Is(e.Err, vault.ErrUnknownKey):
					key += " (unknown key)"
				case !e.Current:
					key += " (old key)"
				}
				if e.Err != nil {
					fmt.Fprintf(w, "%s\t-\t-\t-\t-\t%s\t%s: %s\n", shown(e.Name), e.Updated.UTC().Format(time.RFC3339), key, shown(e.Err.Error()))
					continue
				}
				exp := "-"
				if !e.Expiry.IsZero() {
					exp = e.Expiry.UTC().Format(time.RFC3339)
				}
				refresh := "no"
				if e.HasRefresh {
					refresh = "yes"
				}
				scopes := make([]string, len(e.Scopes))
				for i, sc := range e.Scopes {
					scopes[i] = shown(sc)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", shown(e.Name), shown(e.Grant), exp, refresh, strings.Join(scopes, " "), e.Updated.UTC().Format(time.RFC3339), key)
			}
			return w.Flush()
		},
	}
	optionalHarnessFlag(cmd, &harnessPath, "the harness whose store and store.vault to read"+harnessFlagUsage)
	formatFlag(cmd, format, "output format: text or json")
	return cmd
}

func (c *CLI) authRevokeCommand() *cobra.Command {
	var harnessPath string
	cmd := &cobra.Command{
		Use:                   "revoke [--harness FILE] NAME",
		DisableFlagsInUseLine: true,
		Short:                 "Remove an entry from the vault",
		Long: `Revoke removes the vault entry NAME (as auth list prints it, such as
connection:github): every process on the store stops using its tokens and
starts again from the credential the harness binds. It does not tell the
provider: revoke the grant there too (its settings page, or its RFC 7009
revocation endpoint) when the tokens may have leaked.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, st, err := c.openVault(harnessPath)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := v.Delete(ctxOf(cmd), args[0]); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					return &exitError{code: ExitProblems, err: fmt.Errorf("auth revoke: the vault has no entry %q (openplaybook auth list names them)", args[0])}
				}
				return &exitError{code: ExitProblems, err: fmt.Errorf("auth revoke: %v", err)}
			}
			fmt.Fprintf(c.stdout(), "removed %s from the credential vault\n", args[0])
			return nil
		},
	}
	optionalHarnessFlag(cmd, &harnessPath, "the harness whose store and store.vault to use"+harnessFlagUsage)
	return cmd
}

func (c *CLI) authRekeyCommand() *cobra.Command {
	var harnessPath string
	cmd := &cobra.Command{
		Use:                   "rekey [--harness FILE]",
		DisableFlagsInUseLine: true,
		Short:                 "Seal every vault entry with the current key",
		Long: `Rekey seals again, with the key of store.vault.keySecret, every entry
that a key of store.vault.previousKeySecrets sealed: the last step of a key
rotation (docs/identity.md), after which the old key's secret can be
removed. An entry that no given key opens stops it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v, st, err := c.openVault(harnessPath)
			if err != nil {
				return err
			}
			defer st.Close()
			n, err := v.Rekey(ctxOf(cmd))
			if err != nil {
				return &exitError{code: ExitProblems, err: fmt.Errorf("auth rekey: %v (%s resealed before it)", err, entries(n))}
			}
			fmt.Fprintf(c.stdout(), "resealed %s with the current key\n", entries(n))
			return nil
		},
	}
	optionalHarnessFlag(cmd, &harnessPath, "the harness whose store and store.vault to use"+harnessFlagUsage)
	return cmd
}

// shown is s as auth list prints it: Go-quoted when it holds anything but
// printable characters (the scopes a token endpoint said, the names in
// the store are not to be trusted to be free of terminal escapes).
func shown(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

func entries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}

func (c *CLI) authLoginCommand() *cobra.Command {
	var harnessPath string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:                   "login [--harness FILE] [--timeout DURATION] SERVER",
		DisableFlagsInUseLine: true,
		Short:                 "Consent for an MCP server behind OAuth (authorization code with PKCE)",
		Long: `Login authorizes openplaybook at the MCP server SERVER, whose harness
binding has oauth with grant authorization_code: it connects, and when
the server asks for authorization it prints the authorization server's
URL on standard error for a person to open in a browser, listens on the
binding's redirectUrl (a loopback address) for the redirect back,
exchanges the code with its PKCE verifier (RFC 7636) and stores the
tokens in the credential vault (entry mcp:SERVER), before anything uses
them. Every process on the store then uses and refreshes them.

The authorization server must be the binding's issuer. Nothing is
printed of the tokens.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, st, lh, err := c.openVaultOf(harnessPath)
			if err != nil {
				return err
			}
			defer st.Close()
			name := args[0]
			bound := lh.H.MCPServers[name]
			if bound == nil || bound.OAuth == nil || bound.OAuth.Grant != mcphost.GrantAuthorizationCode {
				return &exitError{code: ExitUsage, err: fmt.Errorf("auth login: the harness binds no MCP server %q with oauth grant authorization_code (docs/identity.md, \"MCP servers behind OAuth\")", name)}
			}
			expanded, err := bound.Expand(lh.H.SecretResolver())
			if err != nil {
				return &exitError{code: ExitProblems, err: fmt.Errorf("auth login: %v", err)}
			}
			oc := host.OAuthClient(expanded.OAuth, v)
			// A refusal ends the login: go-sdk may ask again (another
			// request of the connection), and a person who was refused
			// once is not sent a second URL to wait on.
			var (
				mu      sync.Mutex
				refused error
			)
			oc.Login = func(ctx context.Context, authURL string) (*auth.AuthorizationResult, error) {
				mu.Lock()
				defer mu.Unlock()
				if refused != nil {
					return nil, refused
				}
				res, err := c.loopbackLogin(ctx, name, authURL, expanded.OAuth.RedirectURL)
				if err != nil {
					refused = err
				}
				return res, err
			}
			ctx, cancel := context.WithTimeout(ctxOf(cmd), timeout)
			defer cancel()
			s, err := mcphost.Connect(ctx, mcphost.ServerConfig{Name: name, URL: expanded.URL, Headers: expanded.Headers, Timeout: timeout, OAuth: oc})
			if err != nil {
				return &exitError{code: ExitProblems, err: fmt.Errorf("auth login: %v", err)}
			}
			defer s.Close()
			tools, err := s.Tools(ctx)
			if err != nil {
				return &exitError{code: ExitProblems, err: fmt.Errorf("auth login: listing the tools: %v", err)}
			}
			if _, _, err := v.Get(ctx, "mcp:"+name); errors.Is(err, store.ErrNotFound) {
				fmt.Fprintf(c.stdout(), "MCP server %s asked for no authorization (it lists %s); nothing was stored\n", name, plural(len(tools), "tool"))
				return nil
			}
			fmt.Fprintf(c.stdout(), "logged in to MCP server %s: its tokens are in the credential vault as mcp:%s; it lists %s\n", name, name, plural(len(tools), "tool"))
			return nil
		},
	}
	optionalHarnessFlag(cmd, &harnessPath, "the harness that binds SERVER"+harnessFlagUsage)
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the person to consent")
	return cmd
}

// loopbackLogin shows authURL and waits on redirect (a loopback URL) for
// the authorization server's redirect back (RFC 8252 section 7.3): one
// request with code and state, or error.
func (c *CLI) loopbackLogin(ctx context.Context, server, authURL, redirect string) (*auth.AuthorizationResult, error) {
	u, err := url.Parse(redirect)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("listening on the redirect URL %s: %v", redirect, err)
	}
	type answer struct {
		res *auth.AuthorizationResult
		err error
	}
	got := make(chan answer, 1)
	mux := http.NewServeMux()
	path := u.Path
	if path == "" {
		path = "/"
	}
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var a answer
		switch {
		case q.Get("error") != "":
			a.err = fmt.Errorf("the authorization server refused: %s", clipLine(q.Get("error")+" "+q.Get("error_description"), 200))
		case q.Get("code") == "":
			http.Error(w, "no code", http.StatusBadRequest)
			return
		default:
			a.res = &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if a.err != nil {
			io.WriteString(w, "openplaybook: the authorization was refused. You may close this window.\n")
		} else {
			io.WriteString(w, "openplaybook: authorized. You may close this window.\n")
		}
		select {
		case got <- a:
		default:
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	// Shutdown, not Close: the handler hands its answer over before it
	// returns, and Close would cut the browser's connection before the
	// page that says what happened is sent.
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	fmt.Fprintf(c.stderr(), "To let openplaybook use MCP server %s, open this URL in a browser and consent:\n\n  %s\n\nWaiting for the redirect to %s ...\n", server, authURL, redirect)
	select {
	case a := <-got:
		return a.res, a.err
	case <-ctx.Done():
		return nil, fmt.Errorf("no consent arrived in time: %v", ctx.Err())
	}
}
