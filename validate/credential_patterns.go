package validate

import (
	"regexp"
	"strings"
)

// credentialKind describes one kind of credential the credential rule
// recognises. The patterns need enough token characters that prose
// mentioning a prefix ("Stripe secret keys start with sk_live_") does not
// match, and the token part must also look random (see [randomRun]), so
// placeholders such as "sk_live_XXXXXXXXXXXX" pass.
//
// All patterns are RE2 (package regexp): matching is linear in the length
// of the string, whatever the input.
type credentialKind struct {
	// what names the kind in messages ("a Stripe secret key").
	what string
	// trigger is a cheap test run before the pattern: most strings fail
	// it, so the pattern runs on few of them.
	trigger func(s string) bool
	// re matches a candidate; token, when >= 0, is the index of the
	// subgroup holding the random part, which must pass [randomRun].
	re    *regexp.Regexp
	token int
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
		what:    "a PEM private key block",
		trigger: func(s string) bool { return strings.Contains(s, "PRIVATE KEY-----") },
		// The header alone (as in "paste the block that starts with
		// -----BEGIN PRIVATE KEY-----") is not a key; it must be followed
		// by key material.
		re:    regexp.MustCompile(`-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----[\s\S]*?[A-Za-z0-9+/=]{24,}`),
		token: -1,
	},
	{
		what:    "a bearer token (an Authorization header value)",
		trigger: containsBearer,
		re:      regexp.MustCompile(`\b(?i:bearer)[ \t]+([A-Za-z0-9._~+/-]{16,}=*)`),
		token:   1,
	},
}

// minCredentialLen is the length of the shortest string any kind can
// match ("a://b:c@"); shorter strings are not scanned.
const minCredentialLen = 8

// minTokenRun is the shortest run of letters and digits a token must hold
// (see [randomRun]).
const minTokenRun = 10

// credentialIn returns what kind of credential s appears to hold ("a
// Stripe secret key"), or "" when it holds none. It never returns any part
// of s.
//
// It is built to be fast on the strings of real documents, which hold no
// credential: every kind but URL user info needs a run of letters and
// digits that looks random ([randomRun]), and one pass over the bytes
// finds whether there is one; only then are the kinds' triggers and
// patterns tried.
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

// containsBearer reports whether s contains "bearer" in any ASCII case.
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
// that looks like a token ("https://<token>@github.com"). A plain user
// name ("ssh://git@github.com") is not a credential, nor are template
// placeholders ("${PASSWORD}", "<password>", "{{token}}") and masks
// ("****").
func urlUserInfoCredential(s string) bool {
	for off := 0; ; {
		at := strings.IndexByte(s[off:], '@')
		if at < 0 {
			return false
		}
		at += off
		off = at + 1
		// The user info runs back from '@' to "://".
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

// hasScheme reports whether s ends with a URL scheme: a letter followed by
// letters, digits, '+', '-' or '.'.
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

// Classes of token bytes for randomRun.
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
// letters and digits that looks generated (see [runLooksRandom]).
//
// It visits few bytes of strings that have no such run: a byte that is
// not a letter or digit rules out every run through it, so the scan jumps
// [minTokenRun] bytes ahead, and only a letter or digit found there is
// grown into its whole run.
func randomRun(s string) bool {
	for i := minTokenRun - 1; i < len(s); {
		if tokenClass[s[i]] == 0 {
			i += minTokenRun
			continue
		}
		start, end := i, i+1
		for start > 0 && tokenClass[s[start-1]] != 0 {
			start--
		}
		for end < len(s) && tokenClass[s[end]] != 0 {
			end++
		}
		if end-start >= minTokenRun && runLooksRandom(s[start:end]) {
			return true
		}
		i = end + minTokenRun
	}
	return false
}

// runLooksRandom reports whether a run of letters and digits looks
// generated: it mixes letters and digits, or it has lower-case letters and
// at least three upper-case letters after its first byte. Words,
// capitalised words ("Authentication"), camelCase member names
// ("additionalProperties") and placeholders ("XXXXXXXXXXXX",
// "0000000000") do not; a generated token of 16 or more characters almost
// always does.
func runLooksRandom(run string) bool {
	var letters, digits, lower, upper int
	for i := 0; i < len(run); i++ {
		switch tokenClass[run[i]] {
		case classDigit:
			digits++
		case classLower:
			letters++
			lower++
		case classUpper:
			letters++
			if i > 0 {
				upper++
			}
		}
	}
	return digits > 0 && letters > 0 || upper >= 3 && lower > 0
}
