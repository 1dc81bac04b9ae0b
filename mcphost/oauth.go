package mcphost

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// oauthTimeout bounds each discovery and token request.
const oauthTimeout = 30 * time.Second

// oauthHandler is go-sdk's client-credentials handler for c, pinned to
// c.Issuer, over a client that follows no redirect (a metadata or token
// answer that redirects is refused: the client secret stays with the
// issuer's token endpoint).
func oauthHandler(c *OAuthClient) (auth.OAuthHandler, error) {
	if c.Issuer == "" || c.ClientID == "" || c.ClientSecret == "" {
		return nil, errors.New("oauth needs issuer, clientId and clientSecret")
	}
	hc := &http.Client{
		Timeout: oauthTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			return fmt.Errorf("the authorization server redirected to %s; redirects are refused so that the client secret is not sent elsewhere", redactURL(req.URL.String()))
		},
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
	return h, nil
}
