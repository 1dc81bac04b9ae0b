package textsafe

import "testing"

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode, 日本":            "plain text, ünïcode, 日本",
		"tab\tand\nnewline":                  "tab\tand\nnewline",
		"refund \u202eraelc\u202c ok":        `refund \u202eraelc\u202c ok`,
		"isolate \u2066x\u2069 \u2067y":      `isolate \u2066x\u2069 \u2067y`,
		"cr\rover":                           `cr\u000dover`,
		"ansi \x1b[31mred":                   `ansi \u001b[31mred`,
		"nul\x00 del\x7f c1\u0085":           `nul\u0000 del\u007f c1\u0085`,
		"zw\u200bsp\u200d\ufeff\u00ad\u2060": `zw\u200bsp\u200d\ufeff\u00ad\u2060`,
		"lrm\u200e rlm\u200f alm\u061c":      `lrm\u200e rlm\u200f alm\u061c`,
		"bad \xff utf8":                      `bad \xff utf8`,
		`back\slash \u202e`:                  `back\slash \u202e`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Line("a\nb\tc\u202e"); got != `a\nb\tc\u202e` {
		t.Errorf("Line = %q", got)
	}
}
