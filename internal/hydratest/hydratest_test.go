package hydratest

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestCodeFlow: a person's code flow gives a JWT access token for the
// asked audience with their claims at the top level, and the code is
// refused the second time.
func TestCodeFlow(t *testing.T) {
	h := Start(t)
	c := Client{ID: "cli", AuthMethod: "none", Scope: "openid profile email", RedirectURIs: []string{"http://127.0.0.1:9/cb"}, Audience: []string{"api"}}
	h.CreateClient(c)
	h.SetUser(User{Subject: "alice", Name: "Alice", Email: "alice@example.com", Groups: []string{"finance"}})
	tok, code := h.CodeFlow(c, "api")
	parts := strings.Split(tok.AccessToken, ".")
	if len(parts) != 3 {
		t.Fatalf("the access token is not a JWT: %q", tok.AccessToken)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Sub    string   `json:"sub"`
		Aud    []string `json:"aud"`
		Groups []string `json:"groups"`
		Email  string   `json:"email"`
	}
	if err := json.Unmarshal(b, &claims); err != nil {
		t.Fatal(err)
	}
	if claims.Sub != "alice" || !slices.Contains(claims.Aud, "api") || !slices.Equal(claims.Groups, []string{"finance"}) || claims.Email != "alice@example.com" {
		t.Fatalf("claims %s", b)
	}
	if h.Logins() != 1 {
		t.Fatalf("%d logins", h.Logins())
	}
	_, status := h.Token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {c.RedirectURIs[0]}, "client_id": {c.ID}, "code_verifier": {"x"}})
	if status == 200 {
		t.Fatal("a used code was exchanged again")
	}
}
