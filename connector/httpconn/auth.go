package httpconn

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/openplaybook/openplaybook/internal/credential"
	"github.com/openplaybook/openplaybook/internal/redact"
)

// refresher holds an OAuth access token and refreshes it with the
// refresh token (RFC 6749 section 6) through golang.org/x/oauth2. The
// refreshed token is kept in memory only.
type refresher struct {
	cfg    oauth2.Config
	cc     *clientcredentials.Config // the client-credentials grant instead
	client *http.Client
	expiry time.Time

	// issued, when set, is told every token the endpoint issues (the
	// connection's redactor learns them).
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
	}
}

// token returns the access token to send: the bound one until a refresh
// replaced it; with none bound, it refreshes first.
func (r *refresher) token(ctx context.Context, bound string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.loaded {
		r.current, r.loaded = bound, true
	}
	// A token with an expiry is renewed a minute before it.
	if r.current == "" || (!r.expiry.IsZero() && time.Until(r.expiry) < time.Minute) {
		if err := r.refreshLocked(ctx); err != nil {
			return "", err
		}
	}
	return r.current, nil
}

// force refreshes the access token (the provider refused the current one).
func (r *refresher) force(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loaded = true
	return r.refreshLocked(ctx)
}

func (r *refresher) refreshLocked(ctx context.Context) error {
	ctx = context.WithValue(ctx, oauth2.HTTPClient, r.client)
	var tok *oauth2.Token
	var err error
	if r.cc != nil {
		tok, err = r.cc.Token(ctx)
	} else {
		tok, err = r.cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: r.refresh}).Token()
	}
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			msg := "the token endpoint answered " + http.StatusText(re.Response.StatusCode)
			if re.ErrorCode != "" {
				msg += ": " + re.ErrorCode
			}
			return errors.New(msg)
		}
		return errors.New("the token endpoint could not be reached")
	}
	if tok.AccessToken == "" {
		return errors.New("the token endpoint answered no access token")
	}
	if r.issued != nil {
		r.issued(tok.AccessToken, tok.RefreshToken)
	}
	r.current, r.expiry = tok.AccessToken, tok.Expiry
	if tok.RefreshToken != "" {
		r.refresh = tok.RefreshToken
	}
	return nil
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
