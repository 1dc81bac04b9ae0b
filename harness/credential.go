package harness

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/openplaybook/openplaybook/internal/credential"
)

// The harness file never holds a credential: values that need one
// reference a named secret as ${secret:NAME}. Two heuristics enforce it,
// each reporting harness-credential without ever echoing the value:
//
//   - credentialIn recognises the shape of common credentials anywhere in a
//     string: the detector of package internal/credential, shared with the
//     document rule "credential" of package validate (Stripe, GitHub,
//     Slack, AWS, OpenAI and Anthropic keys, bearer tokens, PEM private
//     keys, URLs with a password), with its tolerance for prose and
//     placeholders;
//   - sensitiveEnv, sensitiveHeader and sensitiveQuery recognise slots
//     whose name says they hold a credential (GITHUB_TOKEN, Authorization,
//     ?api_key=): there any literal text is refused, whatever it looks like.
//     These belong to the harness alone.

// credentialIn returns what kind of credential s appears to hold, as a
// message names it ("a Stripe secret key"), or "" when none. It never
// returns any part of s. Secret references must be blanked out of s first
// ([blankRefs]).
func credentialIn(s string) string {
	if kind, ok := credential.Find(s); ok {
		return credential.Describe(kind)
	}
	return ""
}

// sensitiveEnvName matches environment variable names that say they hold a
// credential: GITHUB_TOKEN, STRIPE_API_KEY, DB_PASSWORD, CLIENT_SECRET,
// AWS_SECRET_ACCESS_KEY. Names that only mention one (GITHUB_TOKEN_FILE,
// TOKEN_URL) do not match.
var sensitiveEnvName = regexp.MustCompile(`(?i)(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?|AUTH_?TOKEN)$`)

// sensitiveHeaders are HTTP header names (lower case) whose value is a
// credential.
var sensitiveHeaders = map[string]bool{
	"authorization":       true,
	"proxy-authorization": true,
	"cookie":              true,
	"x-api-key":           true,
	"api-key":             true,
	"x-auth-token":        true,
	"x-access-token":      true,
}

// sensitiveQueryName matches URL query parameter names that carry a
// credential (?api_key=, ?access_token=, ?token=).
var sensitiveQueryName = regexp.MustCompile(`(?i)^(api[_-]?key|key|access[_-]?token|token|auth|secret|password|client[_-]?secret|sig|signature)$`)

// literalInSensitiveSlot reports whether v, the value of a slot whose name
// says it holds a credential, holds literal text: anything but secret
// references, blanks and an empty string. "Bearer ${secret:T}" is fine;
// "Bearer abc" is not.
func literalInSensitiveSlot(v string) bool {
	rest := blankRefs(v)
	for _, w := range strings.Fields(rest) {
		if strings.EqualFold(w, "bearer") || strings.EqualFold(w, "basic") || strings.EqualFold(w, "token") {
			continue
		}
		return true
	}
	return false
}

// sensitiveQueryParam returns the name of a query parameter of the URL u
// (secret references already blanked) that carries a literal credential.
func sensitiveQueryParam(u string) (string, bool) {
	_, q, ok := strings.Cut(u, "?")
	if !ok {
		return "", false
	}
	q, _, _ = strings.Cut(q, "#")
	vals, err := url.ParseQuery(q)
	if err != nil {
		return "", false
	}
	for name, vs := range vals {
		if !sensitiveQueryName.MatchString(name) {
			continue
		}
		for _, v := range vs {
			if strings.TrimSpace(v) != "" {
				return name, true
			}
		}
	}
	return "", false
}
