// Package credential recognises credentials by their shape (API keys,
// tokens, bearer header values, private keys, URLs with a password) and
// redacts them from text. It is the one detector behind the document rule
// "credential" of package validate, the harness rule harness-credential,
// and the redaction of every diagnostic built by
// [github.com/openplaybook/openplaybook/playbook.Document.At].
//
// The patterns need enough token characters that prose mentioning a
// prefix ("Stripe secret keys start with sk_live_") does not match, and
// the token part must also look generated (see [randomRun]), so
// placeholders such as "sk_live_XXXXXXXXXXXX" pass. A key joined to a
// word by '_' ("x_sk_live_...") is still found; one in the middle of a
// word ("desk_live_...") is not. Template placeholders ("${PASSWORD}",
// "<token>", "{{token}}") and masks ("****") in a URL's user info pass
// too. HTTP Basic credentials must decode to text holding a ':', and a
// JSON Web Token's header to a JSON object with an "alg".
//
// All patterns are RE2 (package regexp), and every other scan is a single
// pass: detection and redaction are linear in the length of the string,
// whatever the input.
package credential

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MinLen is the length of the shortest string any kind matches
// ("a://b:c@"): shorter strings hold no credential.
const MinLen = 8

// minTokenRun is the shortest run of letters and digits a token must hold
// (see [randomRun]).
const minTokenRun = 10

const (
	// urlWhat names [URLWithCredentials] in messages.
	urlWhat = "a URL with credentials in its user info"
	// userInfoPlaceholders mark user info as a template or a mask.
	userInfoPlaceholders = "${}<>*"
	// minLoneUserLen is the shortest user info without a password that
	// can be a token.
	minLoneUserLen = 16
	pemEnd         = "-----END "
	// pemMaxEndLabel bounds the label of an END line ("RSA PRIVATE KEY").
	pemMaxEndLabel = 60
	// basicWhat names [BasicCredentials] in messages.
	basicWhat = "HTTP Basic credentials (an Authorization header value)"
	// minBasicLen is the length of the shortest HTTP Basic credentials
	// recognised ("Basic " and 8 characters of base64).
	minBasicLen = len("Basic ") + 8
)

// keyStart is what comes before a key that starts with a prefix
// ("sk_live_", "ghp_"): the start of the string or anything but a letter
// or digit. A '_' counts (unlike for \b): a key joined to a word by one
// ("x_sk_live_...", "key_ghp_...") is still a key, while one in the middle
// of a word ("desk_live_...") is not. The pattern's group 1 is the key.
const keyStart = `(?:^|[^0-9A-Za-z])`

// kind is one kind of credential recognised by its shape.
type kind struct {
	// name is the kind's name ("Stripe secret key").
	name string
	// what names the kind in messages ("a Stripe secret key").
	what string
	// lits and foldLits are literal strings (foldLits in lower case, found
	// in any ASCII case), one of which every match holds: one pass over a
	// string finds which kinds may match it (see [scanLits]), so the
	// patterns run on few strings. A kind with neither relies on trigger.
	lits, foldLits []string
	// trigger, when not nil, is a further cheap test run before the
	// pattern.
	trigger func(s string) bool
	// anyString: the kind is tried on strings holding no run that looks
	// generated (see [randomRun]) too.
	anyString bool
	// re returns the pattern that matches a candidate, compiled on the
	// first call ([lazyRegexp]); token, when >= 0, is the index of the
	// subgroup holding the random part, which must pass [randomRun] and
	// not look like a placeholder ([placeholder]).
	re    func() *regexp.Regexp
	token int
	// cred is the index of the subgroup that is the credential: 0 for the
	// whole match, 1 for a pattern starting with [keyStart] or for a
	// header value without its word ("Bearer").
	cred int
	// valid, when not nil, is a last test of the credential s[start:end].
	valid func(s string, start, end int) bool
	// extend, when not nil, takes the end of a match and returns where
	// the credential ends (a key block runs on past what the pattern
	// matched), or -1 when the match is no credential after all; cache
	// carries what it found from one match of a string to the next (-1
	// before the first), so that all the calls for one string are linear
	// together.
	extend func(s string, end, cache int) (newEnd, newCache int)
}

// basic is HTTP Basic credentials: "Basic " and the base64 of
// "user:password"; what decodes must be text holding a ':' besides
// something else. The base64 of a short pair need not look generated, so
// it is tried apart from the kinds (see [mayHoldBasic]).
var basic = kind{
	name:    BasicCredentials,
	what:    basicWhat,
	trigger: func(s string) bool { return containsBasic(s, true) },
	re:      lazyRegexp(`\b(?i:basic)(?:[ \t]|\\+t)+([A-Za-z0-9+/]{8,}={0,2})`),
	token:   -1,
	cred:    1,
	valid:   func(s string, start, end int) bool { return basicUserPass(s[start:end]) },
}

// Find reports whether s holds a credential, and names its kind (one of
// the kind constants, such as [StripeSecretKey]); where s holds several,
// it names one. It never returns any part of s.
//
// It is built to be fast on ordinary strings, which hold no credential:
// every kind but passwords, URL user info and HTTP Basic credentials
// needs a run of letters and digits that looks generated, and one pass
// over the bytes finds whether there is one; only then does a second pass
// find which kinds' literals the string holds ([scanLits]), and only
// those kinds' patterns run. A password needs the word "passw" or
// "passphrase", URL user info an '@', and HTTP Basic credentials the word
// "Basic" (see [mayHoldBasic]).
func Find(s string) (kind string, ok bool) {
	if len(s) < MinLen {
		return "", false
	}
	random := randomRun(s)
	if random || mayHoldPassword(s) {
		lits := scanLits(s)
		for i := range kinds {
			if k := &kinds[i]; (random || k.anyString) && k.eligible(s, &lits, i) && k.any(s) {
				return k.name, true
			}
		}
	}
	if mayHoldBasic(s, random) && basic.any(s) {
		return basic.name, true
	}
	if strings.IndexByte(s, '@') >= 0 {
		if _, _, ok := nextURL(s, 0); ok {
			return URLWithCredentials, true
		}
	}
	return "", false
}

// Describe names kind, one of the kind constants, in a message with its
// article ("a Stripe secret key", "a URL with credentials in its user
// info"). An unknown kind is "a credential".
func Describe(kind string) string {
	for i := range kinds { // the first of several entries of one name

		if kinds[i].name == kind {
			return kinds[i].what
		}
	}
	switch kind {
	case BasicCredentials:
		return basicWhat
	case URLWithCredentials:
		return urlWhat
	}
	return "a credential"
}

// A Span is where a credential is in a string: s[Start:End], of the kind
// Kind (one of the kind constants). It covers the whole credential: the
// key with its prefix ("sk_live_..."), the value of a bearer header
// without the word "Bearer", a PEM block from its BEGIN line through its
// END line (or to the end of the key material), a URL with credentials
// in its user info whole, from its scheme to its end.
type Span struct {
	Start, End int
	Kind       string
}

// Spans returns where s holds credentials, in order; spans never overlap
// (where matches of several kinds overlap, they are merged into one span
// named by the one that starts first). It returns nil when s holds none,
// and is then as fast as [Find].
func Spans(s string) []Span {
	return merge(matches(s))
}

// match is a credential found in a string: its [Span], and the rank of
// its kind (the order of kinds, then [basic], URL last), which names a
// merged span.
type match struct {
	Span
	rank int
}

// matches returns every credential of s, as found by each kind, unsorted
// and possibly overlapping.
func matches(s string) []match {
	if len(s) < MinLen {
		return nil
	}
	var ms []match
	random := randomRun(s)
	if random || mayHoldPassword(s) {
		lits := scanLits(s)
		for i := range kinds {
			k := &kinds[i]
			if !(random || k.anyString) || !k.eligible(s, &lits, i) {
				continue
			}
			k.each(s, func(start, end int) bool {
				ms = append(ms, match{Span{start, end, k.name}, i})
				return true
			})
		}
	}
	if mayHoldBasic(s, random) {
		basic.each(s, func(start, end int) bool {
			ms = append(ms, match{Span{start, end, basic.name}, len(kinds)})
			return true
		})
	}
	for off := 0; ; {
		start, end, ok := nextURL(s, off)
		if !ok {
			break
		}
		ms = append(ms, match{Span{start, end, URLWithCredentials}, len(kinds) + 1})
		off = end
	}
	return ms
}

// each calls f with where each credential of kind k in s is, s[start:end],
// in order, until f returns false: each match of the pattern whose token
// looks generated and is no placeholder, and that passes the kind's last
// test, extended to the end of the credential.
func (k *kind) each(s string, f func(start, end int) bool) {
	cache := -1
	for _, m := range k.re().FindAllStringSubmatchIndex(s, -1) {
		if k.token >= 0 {
			if tok := s[m[2*k.token]:m[2*k.token+1]]; !randomRun(tok) || placeholder(tok) {
				continue
			}
		}
		start, end := m[2*k.cred], m[2*k.cred+1]
		if k.valid != nil && !k.valid(s, start, end) {
			continue
		}
		if k.extend != nil {
			if end, cache = k.extend(s, end, cache); end < 0 {
				continue
			}
		}
		if !f(start, end) {
			return
		}
	}
}

// eligible reports whether the pattern of k, kinds[i], is worth running on
// s: s holds one of its literals (lits, from [scanLits]), and passes its
// trigger.
func (k *kind) eligible(s string, lits *kindSet, i int) bool {
	if (len(k.lits) > 0 || len(k.foldLits) > 0) && !lits.has(i) {
		return false
	}
	return k.trigger == nil || k.trigger(s)
}

// any reports whether s holds a credential of kind k.
func (k *kind) any(s string) bool {
	found := false
	k.each(s, func(int, int) bool { found = true; return false })
	return found
}

// merge sorts ms by start (then rank) and merges those that overlap.
func merge(ms []match) []Span {
	switch len(ms) {
	case 0:
		return nil
	case 1:
		return []Span{ms[0].Span}
	}
	slices.SortFunc(ms, func(a, b match) int {
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		return a.rank - b.rank
	})
	merged := make([]Span, 0, len(ms))
	for _, x := range ms {
		if n := len(merged); n > 0 && x.Start < merged[n-1].End {
			merged[n-1].End = max(merged[n-1].End, x.End)
			continue
		}
		merged = append(merged, x.Span)
	}
	return merged
}

// Redact returns s with each credential ([Spans]) replaced by "[redacted
// <kind>]", such as "[redacted Stripe secret key]": no part of a
// credential is left (a bearer token loses its value, not the word
// "Bearer"; a URL with a password is removed whole, host and path too),
// and letters, digits and '_' joined to it go with it.
// A string holding no credential is returned as it is; for one holding
// nothing that looks generated and no '@' (most messages), that costs a
// single quick pass over its bytes.
func Redact(s string) string {
	return replace(s, Spans(s))
}

// RedactFrom is [Redact] for a text s built from the values from, such as
// a message and the names it quotes. Besides the credentials s holds as
// they are, it removes every run of s that repeats, in any ASCII case,
// [pieceLen] bytes or more of a credential held by one of from (of a
// [Span] of it, blanks aside): so a name quoted after a change of case
// ("did you mean ...?" with the name lower-cased) or cut short does not
// leak either, though it no longer looks like a credential. A value
// transformed otherwise (encoded, reversed) is not recognised.
func RedactFrom(s string, from ...string) string {
	var pieces map[[pieceLen]byte]string // lower-cased piece -> kind
	for _, f := range from {
		for _, x := range matches(f) {
			cred := f[x.Start:x.End]
			for i := 0; i+pieceLen <= len(cred); i++ {
				if strings.ContainsAny(cred[i:i+pieceLen], " \t\r\n") {
					continue // PEM framing, which the block repeats
				}
				if pieces == nil {
					pieces = make(map[[pieceLen]byte]string)
				}
				if w := lowerPiece(cred[i:]); pieces[w] == "" {
					pieces[w] = x.Kind
				}
			}
		}
	}
	spans := Spans(s)
	if pieces == nil {
		return replace(s, spans)
	}
	// Add the runs of s made of pieces to the spans, and merge them all.
	ms := make([]match, 0, len(spans)+1)
	for _, sp := range spans {
		ms = append(ms, match{Span: sp})
	}
	for i := 0; i+pieceLen <= len(s); i++ {
		if kind := pieces[lowerPiece(s[i:])]; kind != "" {
			ms = append(ms, match{Span: Span{i, i + pieceLen, kind}, rank: 1})
		}
	}
	return replace(s, merge(ms))
}

// pieceLen is the length of the pieces of a credential [RedactFrom]
// looks for.
const pieceLen = 8

// lowerPiece returns the first [pieceLen] bytes of s in ASCII lower case.
func lowerPiece(s string) (w [pieceLen]byte) {
	for j := range w {
		c := s[j]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		w[j] = c
	}
	return w
}

// replace returns s with each of spans (sorted, not overlapping) replaced
// by "[redacted <kind>]". A span takes along the letters, digits and '_'
// around it, so that a replacement never joins a word: what is left has
// the word boundaries it had, and no pattern anchored at one (\b) finds
// a credential there that it did not find before.
func replace(s string, spans []Span) string {
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(spans)*len("[redacted "+GitHubFineGrainedPAT+"]"))
	prev := 0      // the end of what is written or replaced
	wrote := false // whether a replacement ends at prev
	for _, sp := range spans {
		start, end := sp.Start, max(sp.End, prev)
		for start > prev && isWordByte(s[start-1]) {
			start--
		}
		for end < len(s) && isWordByte(s[end]) {
			end++
		}
		if wrote && start <= prev {
			// Joined to the previous span by a word: one replacement.
			prev = end
			continue
		}
		b.WriteString(s[prev:start])
		b.WriteString("[redacted ")
		b.WriteString(sp.Kind)
		b.WriteString("]")
		prev, wrote = end, true
	}
	b.WriteString(s[prev:])
	return b.String()
}

// isWordByte reports whether c is a letter, digit or '_' (RE2's \w).
func isWordByte(c byte) bool { return tokenClass[c] != 0 || c == '_' }

// RedactPointer returns the JSON Pointer p with [Redact] applied to each
// of its reference tokens, unescaped ("~1" is '/', "~0" is '~'): a
// member name holding a URL with a password appears in a pointer as
// "https:~1~1user:pass@host". A pointer holding no credential is returned
// as it is.
func RedactPointer(p string) string {
	// Escaping only lengthens runs of letters and digits ("~1" before a
	// run), so the quick tests of the whole pointer rule out the tokens,
	// URLs and HTTP Basic credentials.
	if len(p) < MinLen || !randomRun(p) && strings.IndexByte(p, '@') < 0 && !mayHoldBasic(p, false) {
		return p
	}
	var b strings.Builder
	changed := false
	for i, tok := range strings.Split(p, "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		raw := tok
		if strings.IndexByte(tok, '~') >= 0 {
			raw = pointerUnescaper.Replace(tok)
		}
		red := Redact(raw)
		if red == raw {
			b.WriteString(tok)
			continue
		}
		changed = true
		b.WriteString(pointerEscaper.Replace(red))
	}
	if !changed {
		return p
	}
	return b.String()
}

var (
	pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
	pointerEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
)

// pemBlockEnd extends the end of a PEM match (which stops after the first
// run of key material) to the end of the block: through the END line
// when one follows, else over the rest of the key material (base64 and
// line breaks, also escaped as `\n` in a quoted string). It returns where
// the block ends, and where the next END line starts: endAt caches that
// for the next match of the same string (-1: not searched yet; len(s):
// none), so that the searches of all the matches of one string are
// linear together.
func pemBlockEnd(s string, end, endAt int) (blockEnd, nextEndAt int) {
	if endAt < end && endAt < len(s) {
		endAt = len(s)
		if i := strings.Index(s[end:], pemEnd); i >= 0 {
			endAt = end + i
		}
	}
	if endAt < len(s) {
		// The END line: "-----END <label>-----".
		e := endAt + len(pemEnd)
		if j := strings.Index(s[e:min(len(s), e+pemMaxEndLabel)], "-----"); j >= 0 {
			e += j + len("-----")
		}
		return e, endAt
	}
	for end < len(s) {
		c := s[end]
		switch {
		case isBase64(c) || c == '\r' || c == '\n':
			end++
		case c == '\\' && end+1 < len(s) && (s[end+1] == 'n' || s[end+1] == 'r'):
			end += 2
		default:
			return end, endAt
		}
	}
	return end, endAt
}

func isBase64(c byte) bool {
	return tokenClass[c] != 0 || c == '+' || c == '/' || c == '='
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

// mayHoldBasic reports whether s, which holds a run that looks generated
// when random is true (see [randomRun]), may hold HTTP Basic credentials.
// It needs the word "basic" in any case, followed by a blank or a '\\' (a
// tab quoted as `\t` or `\\t`, as %q quotes one once or twice); in a
// string with no run that looks generated, only with a capital 'B'
// ("Basic", the usual spelling, or "BASIC"): most strings have no such
// run, and a search for the rarer 'B' is cheap enough to run on all.
func mayHoldBasic(s string, random bool) bool {
	if len(s) < minBasicLen {
		return false
	}
	if random {
		return basic.trigger(s)
	}
	return containsBasic(s, false)
}

// containsBasic reports whether s contains "basic" in any ASCII case,
// followed by a blank or a '\\'; only with a capital 'B' unless anyCase.
func containsBasic(s string, anyCase bool) bool {
	for i := 0; i+len("basic ") <= len(s); {
		var j int
		if anyCase {
			j = strings.IndexAny(s[i:], "bB")
		} else {
			j = strings.IndexByte(s[i:], 'B')
		}
		if j < 0 {
			return false
		}
		i += j
		if i+len("basic ") <= len(s) && strings.EqualFold(s[i+1:i+5], "asic") && strings.IndexByte(" \t\\", s[i+5]) >= 0 {
			return true
		}
		i++
	}
	return false
}

// basicUserPass reports whether the value of an HTTP Basic header is the
// base64 of "user:password": text (UTF-8, no control characters) holding a
// ':' and something besides (a key as the user with no password counts:
// Stripe takes its keys so).
func basicUserPass(v string) bool {
	dec, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		if dec, err = base64.RawStdEncoding.DecodeString(v); err != nil {
			return false
		}
	}
	u := string(dec)
	return len(u) >= 2 && strings.IndexByte(u, ':') >= 0 && utf8.ValidString(u) && !strings.ContainsFunc(u, unicode.IsControl)
}

// jwtHeader reports whether the first part of a JSON Web Token (up to its
// first '.') is the base64url of a JSON object with an "alg" member.
func jwtHeader(tok string) bool {
	head, _, _ := strings.Cut(tok, ".")
	dec, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return false
	}
	var h map[string]json.RawMessage
	if json.Unmarshal(dec, &h) != nil {
		return false
	}
	_, ok := h["alg"]
	return ok
}

// nextURL finds the first URL at or after byte off of s whose user info
// is a credential, and returns where the whole URL is, s[start:end]. The
// user info is a credential when
// it holds a password ("scheme://user:pass@host") or is a lone user part
// that looks like a token ("https://<token>@github.com"). A plain user
// name ("ssh://git@github.com") is not a credential, nor are template
// placeholders ("${PASSWORD}", "<password>", "{{token}}") and masks
// ("****").
//
// The search goes from '@' to '@', as most strings with one are e-mail
// addresses: the user info runs back from an '@' to "://" (never past a
// blank, '/', '?', '#' or another '@'), then on to the last '@' of the
// authority, as URL parsers read it (so a password holding an '@' is one
// credential); the URL runs from its scheme to its end (the first blank,
// quote, '<', '>', '\\' or other byte never written unescaped in a URL).
// The scans back from each '@' do not overlap, the scan forward happens
// once for an authority, and the caller goes on from the end of the URL
// found: all the calls for one string are linear together.
func nextURL(s string, off int) (start, end int, ok bool) {
	for {
		i := strings.IndexByte(s[off:], '@')
		if i < 0 {
			return 0, 0, false
		}
		first := off + i
		off = first + 1
		info := first
		for info > 0 && urlByte[s[info-1]]&endsUserInfo == 0 {
			info--
		}
		if info < 3 || s[info-3:info] != "://" {
			continue
		}
		if start = schemeStart(s[:info-3]); start < 0 {
			continue
		}
		at := first
		for e := first + 1; e < len(s) && urlByte[s[e]]&endsAuthority == 0; e++ {
			if s[e] == '@' {
				at = e
			}
		}
		if !userInfoCredential(s[info:first]) && !userInfoCredential(s[info:at]) {
			continue
		}
		end = at
		for end < len(s) && urlByte[s[end]]&endsURL == 0 {
			end++
		}
		return start, end, true
	}
}

// What bytes end in a URL.
const (
	endsAuthority = 1 << iota
	endsUserInfo
	endsURL
)

// urlByte classifies bytes: blanks, '/', '?' and '#' end an authority,
// and so does '@' a stretch of user info;
// blanks, control bytes, non-ASCII bytes and the ASCII bytes never
// written unescaped in a URL (quotes, '<', '>', '\\', '`', '{', '}', '|',
// '^') end a URL.
var urlByte = func() (t [256]uint8) {
	for _, c := range []byte(" \t\r\n/?#") {
		t[c] |= endsAuthority | endsUserInfo
	}
	t['@'] |= endsUserInfo
	for c := range 256 {
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"'<>\\`{}|^", byte(c)) >= 0 {
			t[c] |= endsURL
		}
	}
	return t
}()

// userInfoCredential reports whether the user info of a URL is a
// credential (see [nextURL]).
func userInfoCredential(info string) bool {
	if info == "" || strings.ContainsAny(info, userInfoPlaceholders) {
		return false
	}
	if _, pass, found := strings.Cut(info, ":"); found {
		return pass != ""
	}
	return len(info) >= minLoneUserLen && randomRun(info)
}

// schemeStart returns where the URL scheme that s ends with starts: a
// letter followed by letters, digits, '+', '-' or '.'; or -1 when s does
// not end with one.
func schemeStart(s string) int {
	i := len(s)
	for i > 0 {
		c := s[i-1]
		if tokenClass[c] == 0 && c != '+' && c != '-' && c != '.' {
			break
		}
		i--
	}
	// The scheme starts at its first letter.
	for i < len(s) && tokenClass[s[i]]&(classLower|classUpper) == 0 {
		i++
	}
	if i == len(s) {
		return -1
	}
	return i
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
