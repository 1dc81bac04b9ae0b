package httpconn

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/openplaybook/openplaybook/internal/credential"
	"github.com/openplaybook/openplaybook/internal/redact"
	"github.com/openplaybook/openplaybook/vault"
)

// refresher holds an OAuth access token and refreshes it with the
// refresh token (RFC 6749 section 6) or the client-credentials grant
// through golang.org/x/oauth2. With a vault (connector.Config.Vault) the
// tokens live in the store, sealed: a new process starts from the rotated
// refresh token the last one stored, and a refresh is single-flight
// across every process on the store (package vault). Without one they are
// kept in memory only.
type refresher struct {
	cfg    oauth2.Config
	cc     *clientcredentials.Config // the client-credentials grant instead
	client *http.Client
	expiry time.Time

	// vault and name: where the tokens are kept ("connection:<provider>");
	// seed fingerprints the harness credential the chain begins from.
	vault *vault.Vault
	name  string
	seed  string

	// issued, when set, is told every token the endpoint issues or the
	// vault holds (the connection's redactor learns them).
	issued func(vals ...string)

	mu      sync.Mutex
	current string
	refresh string
	loaded  bool
}

// newClientCredentials returns a refresher that gets its tokens with the
// client-credentials grant (RFC 6749 section 4.4).
func newClientCredentials(tokenURL string, secrets map[string]string, scopes []string, client *http.Client) *refresher {
	return &refresher{
		cc: &clientcredentials.Config{
			ClientID: secrets["clientId"], ClientSecret: secrets["clientSecret"], TokenURL: tokenURL,
			Scopes: scopes, AuthStyle: oauth2.AuthStyleInHeader,
		},
		client: client,
		seed:   vault.Fingerprint("client_credentials", tokenURL, secrets["clientId"], secrets["clientSecret"], strings.Join(scopes, " ")),
	}
}

func newRefresher(tokenURL string, secrets map[string]string, client *http.Client) *refresher {
	return &refresher{
		cfg: oauth2.Config{
			ClientID:     secrets["clientId"],
			ClientSecret: secrets["clientSecret"],
			Endpoint:     oauth2.Endpoint{TokenURL: tokenURL, AuthStyle: oauth2.AuthStyleInParams},
		},
		client:  client,
		refresh: secrets["refreshToken"],
		seed:    vault.Fingerprint("refresh_token", tokenURL, secrets["clientId"], secrets["refreshToken"]),
	}
}

// fresh reports whether an access token expiring at expiry may still be
// sent: one with an expiry is renewed a minute before it.
func fresh(expiry time.Time) bool {
	return expiry.IsZero() || time.Until(expiry) >= time.Minute
}

// token returns the access token to send: the vault's, or the bound one
// until a refresh replaced it; with none, it refreshes first.
func (r *refresher) token(ctx context.Context, bound string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.loaded {
		r.current, r.loaded = bound, true
		if r.vault != nil {
			// What another process (or this one before a restart)
			// stored for this credential comes first.
			t, _, err := r.vault.Get(ctx, r.name)
			switch {
			case errors.Is(err, vault.ErrNotFound):
			case err != nil:
				r.loaded = false
				return "", fmt.Errorf("reading the credential vault: %v", err)
			case t.Seed == r.seed && t.AccessToken != "" && fresh(t.Expiry):
				r.use(t)
			}
		}
	}
	if r.current == "" || !fresh(r.expiry) {
		if err := r.refreshLocked(ctx, ""); err != nil {
			return "", err
		}
	}
	return r.current, nil
}

// force refreshes the access token: the provider refused refused, the
// one a request carried. When another call (or process) has replaced it
// meanwhile, the replacement is used and nothing is refreshed.
func (r *refresher) force(ctx context.Context, refused string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loaded = true
	if r.current != refused && r.current != "" && fresh(r.expiry) {
		return nil
	}
	return r.refreshLocked(ctx, refused)
}

// use makes t the token sent from now on.
func (r *refresher) use(t vault.Token) {
	if r.issued != nil {
		r.issued(t.AccessToken, t.RefreshToken)
	}
	r.current, r.expiry = t.AccessToken, t.Expiry
	if t.RefreshToken != "" {
		r.refresh = t.RefreshToken
	}
}

// refreshLocked gets a new access token; refused is the one the provider
// refused ("" when none was).
func (r *refresher) refreshLocked(ctx context.Context, refused string) error {
	if r.vault == nil {
		t, err := r.fetch(ctx, r.refresh)
		if err != nil {
			return err
		}
		r.use(t)
		return nil
	}
	usable := func(t vault.Token) bool {
		return t.AccessToken != "" && t.AccessToken != refused && fresh(t.Expiry)
	}
	t, err := r.vault.Refresh(ctx, r.name, r.seed, usable, func(ctx context.Context, cur *vault.Token) (vault.Token, error) {
		rt := r.refresh // the bound one, or the last this process used
		if cur != nil && cur.RefreshToken != "" {
			rt = cur.RefreshToken // the rotated one, stored by whoever refreshed last
		}
		return r.fetch(ctx, rt)
	})
	if err != nil {
		return err
	}
	r.use(t)
	return nil
}

// fetch asks the token endpoint once: the refresh-token grant with rt, or
// the client-credentials grant.
func (r *refresher) fetch(ctx context.Context, rt string) (vault.Token, error) {
	ctx = context.WithValue(ctx, oauth2.HTTPClient, r.client)
	var tok *oauth2.Token
	var err error
	grant := "refresh_token"
	if r.cc != nil {
		grant = "client_credentials"
		tok, err = r.cc.Token(ctx)
	} else {
		if r.issued != nil {
			// Redacted before it is sent: a refresh token read from the
			// vault (another process rotated it) is one this
			// connection's redactor has not seen, and a hostile
			// endpoint may echo it in its error.
			r.issued(rt)
		}
		tok, err = r.cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: rt}).Token()
	}
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			msg := "the token endpoint answered " + http.StatusText(re.Response.StatusCode)
			if re.ErrorCode != "" {
				msg += ": " + vault.ErrorCode(re.ErrorCode)
			}
			return vault.Token{}, errors.New(msg)
		}
		if ctx.Err() != nil {
			return vault.Token{}, fmt.Errorf("the token endpoint did not answer in time: %v", ctx.Err())
		}
		return vault.Token{}, errors.New("the token endpoint could not be reached")
	}
	if tok.AccessToken == "" {
		return vault.Token{}, errors.New("the token endpoint answered no access token")
	}
	if r.issued != nil {
		r.issued(tok.AccessToken, tok.RefreshToken) // redacted even if it is never stored
	}
	t := vault.Token{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: tok.TokenType, Expiry: tok.Expiry.UTC(), Grant: grant}
	if !headerSafe(t.AccessToken) {
		// Never sent (authorize refuses it), and kept as spent: the
		// next call refreshes, from the refresh token this answer
		// rotated, instead of every process on the vault refusing it
		// until it expires (never, when no expiry was said).
		t.Expiry = time.Now().UTC()
	}
	if t.RefreshToken == "" && grant == "refresh_token" {
		t.RefreshToken = rt // the endpoint did not rotate it: it stays valid
	}
	if sc, ok := tok.Extra("scope").(string); ok && sc != "" {
		t.Scopes = strings.Fields(sc)
	}
	return t, nil
}

// redactor removes the connection's secret values, the tokens its token
// endpoint issued since, and anything the credential detector recognises,
// from a message. Values are found as [redact.New] finds them: as is, hex
// or base64, each byte also percent-encoded or JSON-escaped (a provider
// that echoes a token in a URL it writes).
type redactor struct {
	mu   sync.Mutex
	vals []string
	fn   func(string) string // redact.New(vals)
}

func newRedactor(secrets map[string]string) *redactor {
	r := &redactor{fn: redact.New(nil)}
	for _, v := range secrets {
		r.add(v)
	}
	return r
}

// add makes r redact vals too (values shorter than [redact.MinLen] bytes
// are not redacted: they would match ordinary text).
func (r *redactor) add(vals ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := slices.Clone(r.vals) // redact may be reading the old list
	for _, v := range vals {
		if len(v) >= redact.MinLen && !slices.Contains(next, v) {
			next = append(next, v)
		}
	}
	if len(next) != len(r.vals) {
		r.vals, r.fn = next, redact.New(next)
	}
}

func (r *redactor) redact(s string) string {
	return credential.Redact(r.values(s))
}

// values removes the secret values and issued tokens only (not what the
// detector recognises): what a result may not carry.
func (r *redactor) values(s string) string {
	r.mu.Lock()
	fn := r.fn
	r.mu.Unlock()
	return fn(s)
}

// redactResult replaces the secret values and issued tokens in every
// string of a result (a provider that echoes the credential): the
// runtime redacts the harness's secrets, but not the tokens a token
// endpoint issued.
func (r *redactor) redactResult(v any) any {
	switch v := v.(type) {
	case string:
		return r.values(v)
	case []any:
		for i, e := range v {
			v[i] = r.redactResult(e)
		}
	case *object:
		for _, k := range v.keys {
			v.vals[k] = r.redactResult(v.vals[k])
		}
	}
	return v
}
