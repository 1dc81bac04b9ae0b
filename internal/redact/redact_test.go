package redact

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
)

// redactSecret is a fake credential, built from pieces so that secret
// scanners do not mistake this file for a leak.
var redactSecret = "sk_" + "test_" + "4eC39HqLyjW/Dar+jtT1zdp7dc?&="

func TestRedactorEncodings(t *testing.T) {
	v := redactSecret
	r := New([]string{v})
	h := hex.EncodeToString([]byte(v))
	forms := map[string]string{
		"raw":                  v,
		"hex":                  h,
		"HEX":                  strings.ToUpper(h),
		"base64 std":           base64.StdEncoding.EncodeToString([]byte(v)),
		"base64 std raw":       base64.RawStdEncoding.EncodeToString([]byte(v)),
		"base64 url":           base64.URLEncoding.EncodeToString([]byte(v)),
		"base64 url raw":       base64.RawURLEncoding.EncodeToString([]byte(v)),
		"query escape":         url.QueryEscape(v),
		"query escape lower":   lowerPercent(url.QueryEscape(v)),
		"path escape":          url.PathEscape(v),
		"path escape lower":    lowerPercent(url.PathEscape(v)),
		"every byte %XX":       percentAll(v),
		"every byte %xx":       strings.ToLower(percentAll(v)),
		"JSON":                 `sk_test_4eC39HqLyjW/Dar+jtT1zdp7dc?\u0026=`,
		"JSON, no HTML escape": `sk_test_4eC39HqLyjW/Dar+jtT1zdp7dc?&=`,
	}
	for name, f := range forms {
		in := "before " + f + " after"
		if got := r(in); got != "before [redacted] after" {
			t.Errorf("%s: redact(%q) = %q", name, in, got)
		}
		// Glued to other text of the same alphabet.
		in = "xx" + f + "yy"
		if got := r(in); strings.Contains(got, f) || !strings.Contains(got, Redacted) {
			t.Errorf("%s glued: redact(%q) = %q", name, in, got)
		}
	}
}

// base64 of a secret inside a longer base64 text: at each of the three
// offsets, all but at most the 2 characters at each end that the value
// shares with its neighbours are replaced.
func TestRedactorBase64Embedded(t *testing.T) {
	v := redactSecret
	r := New([]string{v})
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		for pre := range 6 {
			for suf := range 4 {
				data := strings.Repeat("\x01", pre) + v + strings.Repeat("\xfe", suf)
				enc := e.EncodeToString([]byte(data))
				got := r(enc)
				i := strings.Index(got, Redacted)
				if i < 0 {
					t.Errorf("prefix %d suffix %d: base64 %q not redacted", pre, suf, enc)
					continue
				}
				// What stays: the prefix's own characters plus at most 2
				// shared ones at each end.
				left := i
				right := len(got) - i - len(Redacted)
				maxLeft := 8*pre/6 + 2
				maxRight := len(enc) - 8*(pre+len(v))/6
				if left > maxLeft || right > maxRight {
					t.Errorf("prefix %d suffix %d: %q -> %q keeps %d+%d characters, want at most %d+%d", pre, suf, enc, got, left, right, maxLeft, maxRight)
				}
			}
		}
	}
	// An HTTP Basic credential: base64("user:" + secret).
	basic := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+v))
	if got := r(basic); !strings.Contains(got, Redacted) || strings.Contains(got, base64.StdEncoding.EncodeToString([]byte(v))[4:20]) {
		t.Errorf("basic credential: %q", got)
	}
}

// Hostile inputs: a secret split across lines, wrapped base64, upper-case
// hex in a dump.
func TestRedactorSplitAcrossLines(t *testing.T) {
	v := redactSecret
	long := strings.Repeat(v, 4) // 116 bytes: its base64 wraps
	r := New([]string{v, long})
	b64 := base64.StdEncoding.EncodeToString([]byte(long))
	var mime strings.Builder // MIME: CRLF every 76 characters
	for i := 0; i < len(b64); i += 76 {
		mime.WriteString(b64[i:min(i+76, len(b64))])
		mime.WriteString("\r\n")
	}
	for name, c := range map[string]struct{ in, want string }{
		"LF":             {"key=" + v[:10] + "\n" + v[10:] + " end", "key=[redacted]\n end"},
		"CRLF":           {"key=" + v[:10] + "\r\n" + v[10:] + " end", "key=[redacted]\r\n end"},
		"indented":       {"key: " + v[:10] + "\n    " + v[10:] + "\nnext", "key: [redacted]\n\nnext"},
		"upper hex dump": {"dump: " + strings.ToUpper(hex.EncodeToString([]byte(v))), "dump: [redacted]"},
		"hex wrapped":    {hex.EncodeToString([]byte(v))[:20] + "\n" + hex.EncodeToString([]byte(v))[20:], "[redacted]\n"},
		"MIME base64":    {mime.String(), "[redacted]" + strings.Repeat("\r\n", strings.Count(mime.String(), "\r\n"))},
	} {
		if got := r(c.in); got != c.want {
			t.Errorf("%s: redact(%q) = %q, want %q", name, c.in, got, c.want)
		}
	}
	// A blank line ends a match: two line breaks are not one.
	in := v[:10] + "\n\n" + v[10:]
	if got := r(in); got != in {
		t.Errorf("redact(%q) = %q; a paragraph break is not passed over", in, got)
	}
}

func TestRedactorOverlapsAndShortValues(t *testing.T) {
	r := New([]string{"abcdef", "defghi"})
	if got := r("x abcdefghi y"); got != "x [redacted] y" {
		t.Errorf("overlapping values: %q", got)
	}
	// Values shorter than MinLen are left alone, in every form.
	r = New([]string{"abc"})
	for _, in := range []string{"abc", "616263", "YWJj", "%61%62%63"} {
		if got := r(in); got != in {
			t.Errorf("short value: redact(%q) = %q", in, got)
		}
	}
	// A 4-byte value: its raw, hex, percent and offset-0 base64 forms are
	// replaced, but not the 4 or 5 characters that encode it at the other
	// offsets, which occur in ordinary base64 text far too often.
	r = New([]string{"pa55"})
	for _, in := range []string{"pa55", "70613535", "cGE1NQ==", "cGE1NQ", "%70%61%35%35"} {
		if got := r(in); got != Redacted {
			t.Errorf("4-byte value: redact(%q) = %q", in, got)
		}
	}
	for k := 1; k <= 2; k++ {
		f := base64Middle(base64.StdEncoding, "pa55", k)
		if len(f) >= minBase64Form {
			t.Errorf("offset %d form %q is long enough to be looked for", k, f)
		}
	}
}

// Random values and surroundings: no looked-for form survives.
func TestRedactorRandom(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	randBytes := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.IntN(256))
		}
		return string(b)
	}
	for i := range 300 {
		v := randBytes(MinLen + 1 + rnd.IntN(40))
		r := New([]string{v})
		pre, suf := randBytes(rnd.IntN(7)), randBytes(rnd.IntN(7))
		data := pre + v + suf
		for _, enc := range []string{data, hex.EncodeToString([]byte(data)), strings.ToUpper(hex.EncodeToString([]byte(data))),
			base64.StdEncoding.EncodeToString([]byte(data)), base64.RawURLEncoding.EncodeToString([]byte(data)),
			url.QueryEscape(data), percentAll(data)} {
			got := r(enc)
			if !strings.Contains(got, Redacted) {
				t.Fatalf("case %d: %q (value %q) not redacted", i, enc, v)
			}
		}
	}
}

func ExampleNew() {
	redact := New([]string{"s3cr3t-t0ken"})
	fmt.Println(redact("Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("bot:s3cr3t-t0ken"))))
	fmt.Println(redact("hex " + strings.ToUpper(hex.EncodeToString([]byte("s3cr3t-t0ken")))))
	fmt.Println(redact("token=s3cr3t\n  -t0ken;"))
	// Output:
	// Authorization: Basic Ym90On[redacted]g==
	// hex [redacted]
	// token=[redacted]
	// ;
}

// percentAll writes every byte of v as %XX (upper-case hex).
func percentAll(v string) string {
	const digits = "0123456789ABCDEF"
	b := make([]byte, 0, 3*len(v))
	for i := 0; i < len(v); i++ {
		b = append(b, '%', digits[v[i]>>4], digits[v[i]&15])
	}
	return string(b)
}

// lowerPercent lower-cases the hex digits of the %XX escapes of s.
func lowerPercent(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			for j := i + 1; j <= i+2; j++ {
				if b[j] >= 'A' && b[j] <= 'F' {
					b[j] += 'a' - 'A'
				}
			}
			i += 2
		}
	}
	return string(b)
}
