package redact

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// encodeURIComponent writes s as JavaScript's encodeURIComponent does
// (ECMA-262 section 19.2.6.5): every byte but A-Z a-z 0-9 - _ . ! ~ * ' ( )
// as %XX, upper-case hex. Python's urllib.parse.quote(s, safe="") is the
// same but for ~ ! * ' ( ).
func encodeURIComponent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// The forms TypeScript and Python servers write, and forms mixing escapes
// within one value, each found whole.
func TestRedactorPercentAndJSONMixedForms(t *testing.T) {
	v := "pa ss&wd/" + "=k?#+:@!'()*~é"
	r := New([]string{v})
	forms := map[string]string{
		"encodeURIComponent":                encodeURIComponent(v),
		"encodeURIComponent, lower hex":     lowerPercent(encodeURIComponent(v)),
		"half literal, half encoded":        v[:6] + encodeURIComponent(v[6:]),
		"half encoded, half literal":        encodeURIComponent(v[:9]) + v[9:],
		"mixed case in one escape":          "pa%20ss%2fwd"[:0] + "pa%20ss%26wd%2f%3Dk%3f%23%2B%3a%40!'()*~%C3%a9",
		"every byte %xx and %XX alternated": alternatePercent(v),
		"JSON \\u escapes, either case":     `pa\u0020ss\u0026wd\/=k\u003F#+:@!'()*~\u00E9`,
		"JSON escapes mixed with percent":   `pa%20ss\u0026wd%2F=k?#%2b:@!'()*~\u00e9`,
		"query escape, + for space":         "pa+ss%26wd%2F%3Dk%3F%23%2B%3A%40%21%27%28%29%2A~%C3%A9",
	}
	for name, f := range forms {
		in := "<<" + f + ">>"
		if got := r(in); got != "<<"+Redacted+">>" {
			t.Errorf("%s: redact(%q) = %q", name, in, got)
		}
	}
	// Hex with mixed-case digits.
	h := []byte(hex.EncodeToString([]byte(v)))
	for i := range h {
		if i%3 == 0 && h[i] >= 'a' {
			h[i] -= 'a' - 'A'
		}
	}
	if got := r("dump " + string(h) + "."); got != "dump "+Redacted+"." {
		t.Errorf("mixed-case hex: %q", got)
	}
}

func alternatePercent(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if i%2 == 0 {
			fmt.Fprintf(&b, "%%%02x", v[i])
		} else {
			fmt.Fprintf(&b, "%%%02X", v[i])
		}
	}
	return b.String()
}

// reservedChars are characters URL and JSON encoders escape.
const reservedChars = " !\"#$%&'()*+,/:;<=>?@[\\]^`{|}~\t\n"

// randomSecret returns a secret of 4 to 40 bytes, drawn from letters,
// reserved characters and (sometimes) non-ASCII characters.
func randomSecret(rnd *rand.Rand) string {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	n := MinLen + rnd.IntN(37)
	var b strings.Builder
	for b.Len() < n {
		switch rnd.IntN(8) {
		case 0, 1, 2:
			b.WriteByte(reservedChars[rnd.IntN(len(reservedChars))])
		case 3:
			b.WriteRune([]rune("éß€😀中")[rnd.IntN(5)])
		default:
			b.WriteByte(alnum[rnd.IntN(len(alnum))])
		}
	}
	return b.String()
}

// mixEncode writes each character of s in a randomly chosen form:
// literal, %XX with each hex digit's case drawn, a JSON \u escape with
// its case drawn (a surrogate pair outside the BMP), or a JSON short
// escape where there is one.
func mixEncode(rnd *rand.Rand, s string) string {
	hexDigit := func(d byte) byte {
		c := "0123456789abcdef"[d]
		if c >= 'a' && rnd.IntN(2) == 0 {
			c -= 'a' - 'A'
		}
		return c
	}
	var b strings.Builder
	for _, r := range s {
		var enc [4]byte
		n := utf8.EncodeRune(enc[:], r)
		switch rnd.IntN(4) {
		case 0:
			b.Write(enc[:n])
		case 1:
			for _, c := range enc[:n] {
				b.Write([]byte{'%', hexDigit(c >> 4), hexDigit(c & 15)})
			}
		case 2:
			units := []rune{r}
			if r > 0xFFFF {
				r -= 0x10000
				units = []rune{0xD800 + r>>10, 0xDC00 + r&0x3FF}
			}
			for _, u := range units {
				b.Write([]byte{'\\', 'u', hexDigit(byte(u >> 12)), hexDigit(byte(u >> 8 & 15)), hexDigit(byte(u >> 4 & 15)), hexDigit(byte(u & 15))})
			}
		case 3:
			if e := map[rune]string{'"': `\"`, '\\': `\\`, '/': `\/`, '\n': `\n`, '\t': `\t`, ' ': "+"}[r]; e != "" {
				b.WriteString(e)
			} else {
				b.Write(enc[:n])
			}
		}
	}
	return b.String()
}

// looseDecode returns s and what decoding every %XX and JSON escape of it
// gives, once, twice and three times over (for escapes inside escapes):
// what a reader of the text could recover.
// It is written apart from the redactor's own reader.
func looseDecode(s string) []string {
	out := []string{s}
	for range 3 {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			if s[i] == '%' && i+2 < len(s) {
				if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
					b.WriteByte(byte(v))
					i += 2
					continue
				}
			}
			if s[i] == '\\' && i+1 < len(s) {
				if j := strings.IndexByte(`"\\/bfnrt`, s[i+1]); j >= 0 {
					b.WriteByte("\"\\/\b\f\n\r\t"[j])
					i++
					continue
				}
				if i+6 <= len(s) && s[i+1] == 'u' {
					if v, err := strconv.ParseUint(s[i+2:i+6], 16, 16); err == nil {
						r, n := rune(v), 6
						if utf16.IsSurrogate(r) && i+12 <= len(s) && s[i+6:i+8] == `\\u` {
							if lo, err := strconv.ParseUint(s[i+8:i+12], 16, 16); err == nil {
								r, n = utf16.DecodeRune(r, rune(lo)), 12
							}
						}
						b.WriteRune(r)
						i += n - 1
						continue
					}
				}
			}
			b.WriteByte(s[i])
		}
		s = b.String()
		out = append(out, s)
	}
	return out
}

// Property: random secrets with reserved characters, each character
// written in a randomly chosen form, alone, inside text, inside a JSON
// string (encoded by encoding/json, which escapes the escapes' neighbours
// but not the escapes), are redacted whole.
func TestRedactorRandomMixedEncodings(t *testing.T) {
	rnd := rand.New(rand.NewPCG(18, 5))
	for i := range 2000 {
		v := randomSecret(rnd)
		r := New([]string{v, randomSecret(rnd)})
		enc := mixEncode(rnd, v)
		doc, _ := json.Marshal(map[string]string{"url": "https://api.example/x?key=" + enc + "&next=1"})
		for _, in := range []string{enc, "value: " + enc + "\n", string(doc)} {
			got := r(in)
			if !strings.Contains(got, Redacted) || strings.Contains(got, enc) || slices.ContainsFunc(looseDecode(got), func(d string) bool { return strings.Contains(d, v) }) {
				t.Fatalf("case %d: secret %q written %q: redact(%q) = %q", i, v, enc, in, got)
			}
		}
		// Alone, all of it is replaced; its line breaks are kept.
		want := Redacted + strings.Map(func(r rune) rune {
			if r == '\n' || r == '\r' {
				return r
			}
			return -1
		}, enc)
		if got := r(enc); got != want {
			t.Fatalf("case %d: secret %q written %q alone: redact = %q, want %q", i, v, enc, got, want)
		}
	}
}

// Text that keeps many readings alive at once (long runs of escapes, a
// value's own prefix repeated, line breaks and blanks) is read once; the
// result is checked, and the benchmark below measures it.
func TestRedactorHostileRuns(t *testing.T) {
	v := "%41%41%41%41B"
	r := New([]string{v, "aaaaaaab", "a\\u0041"})
	cases := map[string]struct{ in, want string }{
		"escaped value, many prefixes": {strings.Repeat("%2541", 5000) + "%25%34%31B", strings.Repeat("%2541", 4997) + Redacted},
		"literal prefix runs":          {strings.Repeat("a", 10000) + "b", strings.Repeat("a", 9993) + Redacted},
		"escaped prefix runs":          {strings.Repeat("%61", 10000) + "%62", strings.Repeat("%61", 9993) + Redacted},
		"blanks after a break":         {"aaaa\n" + strings.Repeat(" ", 10000) + "aaab", Redacted + "\n"},
		"no match, many escapes":       {strings.Repeat(`\u0041%41`, 5000), strings.Repeat(`\u0041%41`, 5000)},
	}
	for name, c := range cases {
		if got := r(c.in); got != c.want {
			t.Errorf("%s: got %d bytes %.80q..., want %d bytes %.80q...", name, len(got), got, len(c.want), c.want)
		}
	}
}

func BenchmarkRedactorHostile(b *testing.B) {
	r := New([]string{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "%41%41%41%41%41"})
	in := strings.Repeat("%61a", 1<<18)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		r(in)
	}
}

func BenchmarkRedactorProse(b *testing.B) {
	vals := []string{"sk_test_4eC39HqLyjWDarjtT1zdp7dcSECRETVALUE", "mem-Secret-Token-42xyzQ", "p@ss w/rd&more"}
	r := New(vals)
	in := strings.Repeat(`{"id":"cus_123","note":"The quick brown fox jumps over the lazy dog, 42 times; see https://example.com/a%20b?q=1&r=2"},`, 1<<13)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		r(in)
	}
}

// Random text over an alphabet of escape characters, line breaks, blanks
// and a value's own bytes, with the value planted in random forms: every
// match found forward is found again backward (no start is guessed), and
// no planted form survives.
func TestRedactorRandomHostileText(t *testing.T) {
	rnd := rand.New(rand.NewPCG(18, 9))
	before := startMisses.Load()
	for i := range 3000 {
		v := randomSecret(rnd)
		r := New([]string{v})
		alphabet := v + `%\+u0123456789abcdefABCDEF` + "\r\n \t"
		var b strings.Builder
		var planted []string
		for b.Len() < 200 {
			if rnd.IntN(8) == 0 {
				f := mixEncode(rnd, v)
				planted = append(planted, f)
				b.WriteString(f)
				continue
			}
			b.WriteByte(alphabet[rnd.IntN(len(alphabet))])
		}
		in := b.String()
		got := r(in)
		for _, f := range planted {
			if strings.Contains(got, f) {
				t.Fatalf("case %d: value %q planted as %q in %q: redact = %q", i, v, f, in, got)
			}
		}
	}
	if n := startMisses.Load() - before; n != 0 {
		t.Errorf("%d matches had no start found backward", n)
	}
}
