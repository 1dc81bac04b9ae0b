package credential

import (
	"strings"
)

// kindSet is a set of indexes of [kinds].
type kindSet [2]uint64

func (ks *kindSet) add(i int)      { ks[i>>6] |= 1 << (i & 63) }
func (ks *kindSet) has(i int) bool { return ks[i>>6]&(1<<(i&63)) != 0 }

// A litEntry is one literal of a kind: kinds[kind] holds lit, in any
// ASCII case when fold (lit is then in lower case).
type litEntry struct {
	lit  string
	kind int
	fold bool
}

// The literals of all kinds, grouped by their first two bytes in lower
// case: litIndex[pair] is 1 + the index in litGroups of the literals
// starting with pair, or 0 for none.
var (
	litIndex  [1 << 16]uint8
	litGroups [][]litEntry
)

func init() {
	if len(kinds) > len(kindSet{})*64 {
		panic("credential: more kinds than a kindSet holds")
	}
	add := func(lit string, k int, fold bool) {
		if len(lit) < 2 {
			panic("credential: a literal of kind " + kinds[k].name + " is shorter than two bytes")
		}
		p := pairOf(lit[0], lit[1])
		if litIndex[p] == 0 {
			litGroups = append(litGroups, nil)
			if len(litGroups) > 255 {
				panic("credential: too many literal groups")
			}
			litIndex[p] = uint8(len(litGroups))
		}
		g := litIndex[p] - 1
		litGroups[g] = append(litGroups[g], litEntry{lit, k, fold})
	}
	for i := range kinds {
		for _, l := range kinds[i].lits {
			add(l, i, false)
		}
		for _, l := range kinds[i].foldLits {
			if l != strings.ToLower(l) {
				panic("credential: a folded literal of kind " + kinds[i].name + " is not in lower case")
			}
			add(l, i, true)
		}
	}
}

// lowerByte maps ASCII upper-case letters to lower case, and every other
// byte to itself.
var lowerByte = func() (t [256]byte) {
	for c := range 256 {
		t[c] = byte(c)
		if 'A' <= c && c <= 'Z' {
			t[c] = byte(c + 'a' - 'A')
		}
	}
	return t
}()

func pairOf(a, b byte) uint16 { return uint16(lowerByte[a])<<8 | uint16(lowerByte[b]) }

// scanLits returns the set of kinds one of whose literals s holds, in one
// pass over s: each byte pair is looked up in a table, and only the few
// literals that start with it are compared.
func scanLits(s string) (set kindSet) {
	for i := 0; i+1 < len(s); i++ {
		g := litIndex[pairOf(s[i], s[i+1])]
		if g == 0 {
			continue
		}
		for _, e := range litGroups[g-1] {
			if set.has(e.kind) || len(s)-i < len(e.lit) {
				continue
			}
			w := s[i : i+len(e.lit)]
			if e.fold && strings.EqualFold(w, e.lit) || !e.fold && w == e.lit {
				set.add(e.kind)
			}
		}
	}
	return set
}

// mayHoldPassword reports whether s may hold a password assignment: an
// '=' or ':' right after "password", "passwd" or "passphrase" in any ASCII
// case (an optional quote and blanks between), as the [Password] kind's
// pattern wants. It is the test a string with no generated-looking run
// must pass before that kind is tried on it, so it finds the rare '=' and
// ':' with the vectorised [strings.IndexByte] and looks back from each.
func mayHoldPassword(s string) bool {
	return passwordBefore(s, '=') || passwordBefore(s, ':')
}

// passwordBefore reports whether an op byte of s follows a password's name.
func passwordBefore(s string, op byte) bool {
	for i := 0; i < len(s); i++ {
		j := strings.IndexByte(s[i:], op)
		if j < 0 {
			return false
		}
		i += j
		k := i
		for k > 0 && (s[k-1] == ' ' || s[k-1] == '\t') {
			k--
		}
		if k > 0 && (s[k-1] == '"' || s[k-1] == '\'') {
			k--
		}
		if k == 0 || lowerByte[s[k-1]] != 'd' && lowerByte[s[k-1]] != 'e' {
			continue // the last letter of each name below
		}
		for _, w := range [...]string{"password", "passwd", "passphrase"} {
			if k >= len(w) && strings.EqualFold(s[k-len(w):k], w) {
				return true
			}
		}
	}
	return false
}

func containsString(s, sub string) bool { return strings.Contains(s, sub) }

// base64Run reports whether s holds a run of at least n base64 bytes.
func base64Run(s string, n int) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		if isBase64(s[i]) {
			if run++; run >= n {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// puttyEnd extends a match of a PuTTY key file's header line to the end
// of the file: over the "Private-Lines: N" line that must follow, the
// base64 lines of the key, and a "Private-MAC:" line. It returns -1 when
// no "Private-Lines:" with key material follows (a header alone, as in
// prose, is no key). at caches where the next "Private-Lines:" is, as
// [pemBlockEnd] caches its END line.
func puttyEnd(s string, end, at int) (blockEnd, nextAt int) {
	const lines = "Private-Lines:"
	if at < end && at < len(s) {
		at = len(s)
		if i := strings.Index(s[end:], lines); i >= 0 {
			at = end + i
		}
	}
	if at >= len(s) {
		return -1, at
	}
	e := at + len(lines)
	for e < len(s) && (s[e] == ' ' || s[e] == '\t' || '0' <= s[e] && s[e] <= '9') {
		e++
	}
	material := 0
	for {
		nl := lineBreak(s, e)
		if nl == 0 {
			break
		}
		n := e + nl
		for n < len(s) && isBase64(s[n]) {
			n++
		}
		if n == e+nl || strings.HasPrefix(s[e+nl:], "Private-MAC:") {
			break
		}
		material += n - e - nl
		e = n
	}
	if material < 16 {
		return -1, at
	}
	if nl := lineBreak(s, e); nl > 0 && strings.HasPrefix(s[e+nl:], "Private-MAC:") {
		e += nl + len("Private-MAC:")
		for e < len(s) && (s[e] == ' ' || s[e] == '\t') {
			e++
		}
		for e < len(s) && ('0' <= s[e] && s[e] <= '9' || 'a' <= s[e] && s[e] <= 'f') {
			e++
		}
	}
	return e, at
}

// lineBreak returns the length of the line break at s[i:] ("\n",
// "\r\n", or either escaped once or more, as in a quoted string: `\n`,
// `\\n`), or 0 for none.
func lineBreak(s string, i int) int {
	j := i + controlAt(s, i, 'r', '\r')
	n := controlAt(s, j, 'n', '\n')
	if n == 0 {
		return 0
	}
	return j + n - i
}

// controlAt returns the length of the control byte raw at s[i], or of
// its escape (one or more '\\', then esc), or 0 for neither.
func controlAt(s string, i int, esc, raw byte) int {
	if i < len(s) && s[i] == raw {
		return 1
	}
	j := i
	for j < len(s) && s[j] == '\\' {
		j++
	}
	if j > i && j < len(s) && s[j] == esc {
		return j + 1 - i
	}
	return 0
}

// placeholderWords, found in any ASCII case, mark a value as a
// placeholder or a mask rather than a credential.
var placeholderWords = []string{
	"xxxx", "****", "...", "…", "•••", "example", "dummy", "redacted", "placeholder",
	"changeme", "change_me", "change-me", "your", "sample", "fake", "insert", "replace",
}

// placeholder reports whether v, the random part of a key or a value
// assigned to a secret's name, is a placeholder rather than a credential:
// a template ("${VAR}", "$VAR", "{{ secret }}", "<token>", "%s"), a mask
// ("****", "[redacted]"), a word such as "example", "dummy" or "your",
// or a body no generator makes: one byte for most of it
// ("0000000000000000"), a short unit repeated ("abc123abc123"), or
// mostly a run of consecutive bytes ("1234567890abcdef").
func placeholder(v string) bool {
	if v == "" {
		return true
	}
	if strings.IndexByte("$%<{[*", v[0]) >= 0 || strings.ContainsAny(v, "<>{}") ||
		strings.Contains(v, "$(") || strings.Contains(v, "${") {
		return true
	}
	for _, w := range placeholderWords {
		if containsFold(v, w) {
			return true
		}
	}
	return repetitive(v)
}

// repetitive reports whether v is one byte for more than half of it, a
// unit repeated (its smallest period is at most half its length), or has
// consecutive bytes ("ab", "34") in at least half of its adjacent pairs.
func repetitive(v string) bool {
	var count [256]uint16
	most, seq := 0, 0
	for i := 0; i < len(v); i++ {
		count[v[i]]++
		most = max(most, int(count[v[i]]))
		if i > 0 && v[i] == v[i-1]+1 {
			seq++
		}
	}
	if 2*most > len(v) || len(v) > 2 && 2*seq >= len(v)-1 {
		return true
	}
	// The smallest period, from the prefix function (Knuth-Morris-Pratt),
	// over the first 256 bytes.
	n := min(len(v), 256)
	var pi [256]uint8
	for i := 1; i < n; i++ {
		k := int(pi[i-1])
		for k > 0 && v[i] != v[k] {
			k = int(pi[k-1])
		}
		if v[i] == v[k] {
			k++
		}
		pi[i] = uint8(k)
	}
	return n >= 4 && 2*(n-int(pi[n-1])) <= n
}

// containsFold reports whether s contains sub (in lower case) in any
// ASCII case.
func containsFold(s, sub string) bool {
	if len(sub) == 0 {
		return true
	}
	c0 := sub[0]
	for i := 0; i+len(sub) <= len(s); i++ {
		if lowerByte[s[i]] == c0 && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// secretValue reports whether v, assigned to a name that says it holds a
// secret, is one: it holds a run that looks generated ([randomRun]) and
// is no placeholder.
func secretValue(v string) bool {
	return len(v) >= MinLen && !strings.ContainsAny(v, " \t\r\n") && randomRun(v) && !placeholder(v)
}

// passwordValue reports whether v, assigned to a name that says it is a
// password, is one: eight bytes or more, no placeholder, and either a run
// that looks generated or three of lower case, upper case, digits and
// other bytes ("Tr0ub4dor&3"); not the name of something that holds it
// ("process.env.DB_PASSWORD", "DB_PASSWORD_2").
func passwordValue(v string) bool {
	if len(v) < MinLen || strings.ContainsAny(v, " \t\r\n") || placeholder(v) {
		return false
	}
	if randomRun(v) {
		return true
	}
	if nameLike(v) {
		return false
	}
	var lower, upper, digit, other int
	for i := 0; i < len(v); i++ {
		switch tokenClass[v[i]] {
		case classLower:
			lower = 1
		case classUpper:
			upper = 1
		case classDigit:
			digit = 1
		default:
			other = 1
		}
	}
	return lower+upper+digit+other >= 3
}

// nameLike reports whether v reads as the name of a variable rather than
// a value: UPPER_SNAKE_CASE with a '_', or identifiers joined by '.'
// ("process.env.DB_PASSWORD").
func nameLike(v string) bool {
	upperSnake, dotted := strings.IndexByte(v, '_') >= 0, strings.IndexByte(v, '.') > 0
	start := true // at the start of an identifier
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch cl := tokenClass[c]; {
		case c == '.':
			if start {
				return false
			}
			start = true
			upperSnake = false
			continue
		case c == '_':
		case cl == classLower:
			upperSnake = false
		case cl == classUpper:
		case cl == classDigit:
			if start {
				return false
			}
		default:
			return false
		}
		start = false
	}
	return !start && (upperSnake || dotted)
}

// assignedKind returns the kind a value assigned to name would be, by the
// name alone: [Password] for names ending in "password", "passwd" or
// "passphrase"; [Secret] for names ending in "secret", "token",
// "api_key", "apikey", "access_key", "private_key", "credentials" and
// their spellings with '-' or none; "" for others.
func assignedKind(name string) string {
	// The lower-cased tail of name, for plain suffix comparisons.
	var buf [12]byte
	n := min(len(name), len(buf))
	for i := range n {
		buf[i] = lowerByte[name[len(name)-n+i]]
	}
	if n < 3 {
		return ""
	}
	switch string(buf[n-3 : n]) { // the last three bytes of every suffix below
	case "ord", "swd", "ase", "ret", "key", "ken", "ial", "als":
	default:
		return ""
	}
	// string(...) == suf compares without allocating.
	for _, suf := range passwordSuffixes {
		if n >= len(suf) && string(buf[n-len(suf):n]) == suf {
			return Password
		}
	}
	for _, suf := range secretSuffixes {
		if n >= len(suf) && string(buf[n-len(suf):n]) == suf {
			return Secret
		}
	}
	return ""
}

var (
	passwordSuffixes = []string{"password", "passwd", "passphrase"}
	secretSuffixes   = []string{"secret", "secretkey", "secret_key", "secret-key", "token", "apikey", "api_key", "api-key",
		"accesskey", "access_key", "access-key", "privatekey", "private_key", "private-key", "credential", "credentials"}
)

// FindAssigned reports whether value, assigned to name (a JSON member, a
// YAML key), is a credential by virtue of the name: a password assigned
// to a name such as "password" or "db_passphrase" ([Password]), or a
// generated-looking value assigned to one such as "api_key", "apiKey",
// "access_token" or "client_secret" ([Secret]). It is the test for a
// value that [Find] does not recognise on its own; placeholders, names of
// secrets ("OPENAI_API_KEY") and prose are not credentials. It never
// returns any part of value.
func FindAssigned(name, value string) (kind string, ok bool) {
	if len(value) < MinLen {
		return "", false
	}
	switch assignedKind(name) {
	case Password:
		if passwordValue(value) {
			return Password, true
		}
	case Secret:
		if secretValue(value) {
			return Secret, true
		}
	}
	return "", false
}
