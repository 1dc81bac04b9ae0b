package mcphost

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/openplaybook/openplaybook/vault"
)

// oauthTimeout bounds each discovery and token request.
const oauthTimeout = 30 * time.Second

// Grants of [OAuthClient.Grant].
const (
	GrantClientCredentials = "client_credentials"
	GrantAuthorizationCode = "authorization_code"
)

// OAuthClient is [ServerConfig.OAuth]: a client registered at Issuer.
// Discovery (the server's protected resource metadata, RFC 9728, then the
// authorization server's metadata, RFC 8414) must arrive at Issuer, or
// nothing is sent; the token requests are RFC 6749 sections 4.4
// (client credentials), 4.1 with PKCE (RFC 7636) and 6 (refresh).
type OAuthClient struct {
	Issuer       string
	ClientID     string
	ClientSecret string // "" for a public client (authorization_code only)
	// Grant is GrantClientCredentials ("" too) or GrantAuthorizationCode.
	Grant string
	// RedirectURL is the loopback URL the authorization server sends the
	// person's browser back to (authorization_code).
	RedirectURL string
	// Vault keeps the authorization_code grant's tokens (entry
	// "mcp:<server>"); required for that grant.
	Vault *vault.Vault
	// Login, set only by `openplaybook auth login`, shows the person
	// authURL and returns what the authorization server redirected back
	// with. Without it a server whose grant needs a person fails with a
	// message that says to run auth login.
	Login func(ctx context.Context, authURL string) (*auth.AuthorizationResult, error)
}

// noRedirectClient follows no redirect: a metadata or token answer that
// redirects is refused, so the client's secret and codes stay with the
// issuer.
func noRedirectClient() *http.Client {
	return &http.Client{
		Timeout: oauthTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			return fmt.Errorf("the authorization server redirected to %s; redirects are refused so that the client's secret and codes are not sent elsewhere", redactURL(req.URL.String()))
		},
	}
}

// oauthHandler is go-sdk's handler for c's grant, pinned to c.Issuer.
func oauthHandler(server string, c *OAuthClient, seen *issued) (auth.OAuthHandler, error) {
	if c.Issuer == "" || c.ClientID == "" {
		return nil, errors.New("oauth needs issuer and clientId")
	}
	hc := noRedirectClient()
	switch c.Grant {
	case "", GrantClientCredentials:
		if c.ClientSecret == "" {
			return nil, errors.New("oauth with client credentials needs clientSecret")
		}
		h, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
			Credentials: &oauthex.ClientCredentials{
				ClientID:         c.ClientID,
				ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: c.ClientSecret},
				Issuer:           c.Issuer,
			},
			HTTPClient: hc,
		})
		if err != nil {
			return nil, fmt.Errorf("oauth: %v", err)
		}
		return &seenHandler{OAuthHandler: h, seen: seen}, nil
	case GrantAuthorizationCode:
	default:
		return nil, fmt.Errorf("oauth grant %q: want client_credentials or authorization_code", c.Grant)
	}
	if c.Vault == nil {
		return nil, errors.New("oauth with authorization_code keeps its tokens in the credential vault: give the harness store.vault (docs/identity.md)")
	}
	vs := &vaultSource{v: c.Vault, name: "mcp:" + server, seed: vault.Fingerprint(GrantAuthorizationCode, c.Issuer, c.ClientID), client: c, hc: hc, seen: seen}
	pre := &oauthex.ClientCredentials{ClientID: c.ClientID, Issuer: c.Issuer}
	if c.ClientSecret != "" {
		pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: c.ClientSecret}
	}
	fetch := func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		if c.Login == nil {
			return nil, fmt.Errorf("MCP server %q needs a person's consent: run openplaybook auth login %s", server, server)
		}
		return c.Login(ctx, args.URL)
	}
	cfg := &auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient:      pre,
		RedirectURL:              c.RedirectURL,
		AuthorizationCodeFetcher: fetch,
		RequestRefreshToken:      true,
		Client:                   hc,
		NewTokenSource: func(ctx context.Context, oc *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
			// The code's tokens are stored before anything uses them.
			seen.add(tok.AccessToken, tok.RefreshToken)
			if err := vs.store(ctx, oc.Endpoint.TokenURL, tok); err != nil {
				return nil, err
			}
			return vs, nil
		},
	}
	if c.Login == nil {
		// A process that is not logging in starts from the vault.
		cfg.InitialTokenSource = vs
	}
	h, err := auth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		return nil, fmt.Errorf("oauth: %v", err)
	}
	return h, nil
}

// vaultSource is an oauth2.TokenSource over the vault entry of one MCP
// server: the stored access token while it is fresh, else one refresh
// (single-flight across processes, the rotated refresh token stored
// before it is used; package vault).
type vaultSource struct {
	v      *vault.Vault
	name   string
	seed   string
	client *OAuthClient
	hc     *http.Client

	seen *issued // the server's redactor learns every token used

	mu     sync.Mutex
	cached *oauth2.Token // the last token, while fresh: no store read per request
}

func (s *vaultSource) store(ctx context.Context, tokenURL string, tok *oauth2.Token) error {
	t := vault.Token{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: tok.TokenType, Expiry: tok.Expiry.UTC(),
		Grant: GrantAuthorizationCode, Seed: s.seed, TokenURL: tokenURL, Issued: time.Now().UTC()}
	if sc, ok := tok.Extra("scope").(string); ok {
		t.Scopes = strings.Fields(sc)
	}
	for range 3 {
		_, version, err := s.v.Get(ctx, s.name)
		if err != nil && !errors.Is(err, vault.ErrNotFound) && !errors.Is(err, vault.ErrUnknownKey) {
			return fmt.Errorf("the credential vault: %v", err)
		}
		if _, err = s.v.Put(ctx, s.name, t, version); err == nil {
			return nil
		}
	}
	return fmt.Errorf("the tokens of %s could not be stored in the credential vault, so they are not used", s.name)
}

// Token implements oauth2.TokenSource.
func (s *vaultSource) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.cached; c != nil && (c.Expiry.IsZero() || time.Until(c.Expiry) > time.Minute) {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*oauthTimeout)
	defer cancel()
	usable := func(t vault.Token) bool {
		return t.AccessToken != "" && (t.Expiry.IsZero() || time.Until(t.Expiry) > time.Minute)
	}
	t, err := s.v.Refresh(ctx, s.name, s.seed, usable, func(ctx context.Context, cur *vault.Token) (vault.Token, error) {
		server := strings.TrimPrefix(s.name, "mcp:")
		if cur == nil || cur.RefreshToken == "" || cur.TokenURL == "" {
			return vault.Token{}, fmt.Errorf("MCP server %q has no usable token in the credential vault: run openplaybook auth login %s", server, server)
		}
		// Redacted before it is sent: another process may have rotated
		// it, and a hostile endpoint may echo it in its error.
		s.seen.add(cur.RefreshToken)
		oc := &oauth2.Config{ClientID: s.client.ClientID, ClientSecret: s.client.ClientSecret, Endpoint: oauth2.Endpoint{TokenURL: cur.TokenURL}}
		tok, err := oc.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, s.hc), &oauth2.Token{RefreshToken: cur.RefreshToken}).Token()
		if err != nil {
			var re *oauth2.RetrieveError
			if errors.As(err, &re) && re.ErrorCode != "" {
				return vault.Token{}, fmt.Errorf("refreshing the token of MCP server %q: the token endpoint answered %s; run openplaybook auth login %s", server, vault.ErrorCode(re.ErrorCode), server)
			}
			return vault.Token{}, fmt.Errorf("refreshing the token of MCP server %q: the token endpoint could not be reached", server)
		}
		n := *cur
		n.AccessToken, n.TokenType, n.Expiry, n.Issued = tok.AccessToken, tok.TokenType, tok.Expiry.UTC(), time.Time{}
		if tok.RefreshToken != "" {
			n.RefreshToken = tok.RefreshToken
		}
		return n, nil
	})
	if err != nil {
		return nil, err
	}
	s.seen.add(t.AccessToken, t.RefreshToken)
	s.cached = &oauth2.Token{AccessToken: t.AccessToken, TokenType: "Bearer", Expiry: t.Expiry}
	return s.cached, nil
}

// seenHandler tells the server's redactor every token its handler's token
// source gives out.
type seenHandler struct {
	auth.OAuthHandler
	seen *issued
}

func (h *seenHandler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	ts, err := h.OAuthHandler.TokenSource(ctx)
	if ts == nil || err != nil {
		return ts, err
	}
	return seenSource{ts, h.seen}, nil
}

type seenSource struct {
	oauth2.TokenSource
	seen *issued
}

func (s seenSource) Token() (*oauth2.Token, error) {
	t, err := s.TokenSource.Token()
	if t != nil {
		s.seen.add(t.AccessToken, t.RefreshToken)
	}
	return t, err
}
