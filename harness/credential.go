package harness

import (
	"net/url"
	"regexp"
	"strings"
)

// The harness file never holds a credential: values that need one
// reference a named secret as ${secret:NAME}. Two heuristics enforce it,
// each reporting harness-credential without ever echoing the value:
//
//   - credentialIn recognises the shape of common credentials anywhere in a
//     string (the same kinds, with the same tolerance for prose and
//     placeholders, as the document rule "credential" of package validate,
//     plus OpenAI and Anthropic API keys, which a harness's agent settings
//     attract);
//   - sensitiveEnv, sensitiveHeader and sensitiveQuery recognise slots
//     whose name says they hold a credential (GITHUB_TOKEN, Authorization,
//     ?api_key=): there any literal text is refused, whatever it looks like.
//
// The shape patterns are kept in step with validate/credential_patterns.go
// by hand; they belong in a shared internal package (see the report of the
// change that added this file).

// credentialKind is one kind of credential recognised by shape. token, when
// >= 0, is the subgroup holding the random part, which must pass
// [randomRun] (so placeholders such as sk_live_XXXXXXXXXXXX pass).
type credentialKind struct {
	what    string
	trigger func(s string) bool
	re      *regexp.Regexp
	token   int
}

var credentialKinds = []credentialKind{
	{
		what:    "a Stripe secret key",
		trigger: func(s string) bool { return strings.Contains(s, "sk_live_") || strings.Contains(s, "sk_test_") },
		re:      regexp.MustCompile(`\bsk_(?:live|test)_([0-9A-Za-z]{10,})`),
		token:   1,
	},
	{
		what:    "a Stripe restricted key",
		trigger: func(s string) bool { return strings.Contains(s, "rk_live_") || strings.Contains(s, "rk_test_") },
		re:      regexp.MustCompile(`\brk_(?:live|test)_([0-9A-Za-z]{10,})`),
		token:   1,
	},
	{
		what:    "a Stripe webhook signing secret",
		trigger: func(s string) bool { return strings.Contains(s, "whsec_") },
		re:      regexp.MustCompile(`\bwhsec_([0-9A-Za-z]{20,})`),
		token:   1,
	},
	{
		what:    "a GitHub token",
		trigger: func(s string) bool { return strings.Contains(s, "gh") },
		re:      regexp.MustCompile(`\bgh[pousr]_([0-9A-Za-z]{20,})`),
		token:   1,
	},
	{
		what:    "a GitHub fine-grained personal access token",
		trigger: func(s string) bool { return strings.Contains(s, "github_pat_") },
		re:      regexp.MustCompile(`\bgithub_pat_([0-9A-Za-z_]{22,})`),
		token:   1,
	},
	{
		what:    "a Slack token",
		trigger: func(s string) bool { return strings.Contains(s, "xox") },
		re:      regexp.MustCompile(`\bxox[abprs]-([0-9]+-[0-9A-Za-z-]{10,})`),
		token:   1,
	},
	{
		what:    "an AWS access key id",
		trigger: func(s string) bool { return strings.Contains(s, "AKIA") || strings.Contains(s, "ASIA") },
		re:      regexp.MustCompile(`\b(?:AKIA|ASIA)([0-9A-Z]{16})\b`),
		token:   1,
	},
	{
		what:    "an OpenAI or Anthropic API key",
		trigger: func(s string) bool { return strings.Contains(s, "sk-") },
		re:      regexp.MustCompile(`\bsk-(?:proj-|svcacct-|admin-|ant-[a-z]+[0-9]*-)?([0-9A-Za-z_-]{20,})`),
		token:   1,
	},
	{
		what:    "a PEM private key block",
		trigger: func(s string) bool { return strings.Contains(s, "PRIVATE KEY-----") },
		re:      regexp.MustCompile(`-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----[\s\S]*?[A-Za-z0-9+/=]{24,}`),
		token:   -1,
	},
	{
		what:    "a bearer token",
		trigger: containsBearer,
		re:      regexp.MustCompile(`\b(?i:bearer)[ \t]+([A-Za-z0-9._~+/-]{16,}=*)`),
		token:   1,
	},
}

// minCredentialLen is the length of the shortest string any kind matches.
const minCredentialLen = 8

// minTokenRun is the shortest run of letters and digits a token must hold.
const minTokenRun = 10

// credentialIn returns what kind of credential s appears to hold ("a
// Stripe secret key"), or "" when none. It never returns any part of s.
// Secret references must be blanked out of s first ([blankRefs]).
func credentialIn(s string) string {
	if len(s) < minCredentialLen {
		return ""
	}
	if randomRun(s) {
		for i := range credentialKinds {
			k := &credentialKinds[i]
			if !k.trigger(s) {
				continue
			}
			for _, m := range k.re.FindAllStringSubmatchIndex(s, -1) {
				if k.token < 0 || randomRun(s[m[2*k.token]:m[2*k.token+1]]) {
					return k.what
				}
			}
		}
	}
	if urlUserInfoCredential(s) {
		return "a URL with credentials in its user info"
	}
	return ""
}

func containsBearer(s string) bool {
	for i := 0; i+6 <= len(s); {
		j := strings.IndexAny(s[i:], "bB")
		if j < 0 {
			return false
		}
		i += j
		if i+6 <= len(s) && strings.EqualFold(s[i:i+6], "bearer") {
			return true
		}
		i++
	}
	return false
}

// urlUserInfoCredential reports whether s holds a URL whose user info is a
// credential: a password ("scheme://user:pass@host") or a lone user part
// that looks like a token. A plain user name ("ssh://git@github.com") is
// not, nor are placeholders ("${...}", "<password>") and masks ("****").
func urlUserInfoCredential(s string) bool {
	for off := 0; ; {
		at := strings.IndexByte(s[off:], '@')
		if at < 0 {
			return false
		}
		at += off
		off = at + 1
		start := at
		for start > 0 && !strings.ContainsRune(" \t\r\n/?#@", rune(s[start-1])) {
			start--
		}
		if start < 3 || s[start-3:start] != "://" || !hasScheme(s[:start-3]) {
			continue
		}
		info := s[start:at]
		if info == "" || strings.ContainsAny(info, "${}<>*") {
			continue
		}
		if _, pass, ok := strings.Cut(info, ":"); ok {
			if pass != "" {
				return true
			}
			continue
		}
		if len(info) >= 16 && randomRun(info) {
			return true
		}
	}
}

func hasScheme(s string) bool {
	i := len(s)
	for i > 0 {
		c := s[i-1]
		if tokenClass[c] == 0 && c != '+' && c != '-' && c != '.' {
			break
		}
		i--
	}
	return i < len(s) && tokenClass[s[i]]&(classLower|classUpper) != 0
}

const (
	classLower = 1 << iota
	classUpper
	classDigit
)

var tokenClass = func() (t [256]uint8) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = classLower
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = classUpper
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = classDigit
	}
	return t
}()

// randomRun reports whether s holds a run of at least [minTokenRun]
// letters and digits that looks generated: it mixes letters and digits, or
// has lower-case letters and at least three upper-case letters after its
// first byte.
func randomRun(s string) bool {
	run, letters, digits, lower, upper := 0, 0, 0, 0, 0
	for i := 0; i < len(s); i++ {
		c := tokenClass[s[i]]
		switch c {
		case 0:
			run = 0
			continue
		case classDigit:
			digits++
		default:
			letters++
			if run > 0 && c == classUpper {
				upper++
			} else if c == classLower {
				lower++
			}
		}
		if run == 0 {
			letters, digits, lower, upper = 0, 0, 0, 0
			if c == classDigit {
				digits = 1
			} else {
				letters = 1
				if c == classLower {
					lower = 1
				}
			}
		}
		run++
		if run >= minTokenRun && (digits > 0 && letters > 0 || upper >= 3 && lower > 0) {
			return true
		}
	}
	return false
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
