package validate

import (
	"regexp/syntax"
	"testing"
)

func TestFindAddress(t *testing.T) {
	for _, c := range []struct {
		s, what string
		danger  bool
	}{
		{"https://api.example.com/v1", "URL", false},
		{"see http://169.254.169.254/latest for it", "URL", true},
		{"http://2852039166/", "URL", true},
		{"http://0251.0376.0251.0376/", "URL", true},
		{"http://[::ffff:169.254.169.254]/", "URL", true},
		{"http://METADATA.GOOGLE.INTERNAL./computeMetadata/v1/", "URL", true},
		{"169.254.10.1", "IP address", true},
		{"fe80::1%eth0", "IP address", true},
		{"fd00:ec2::254", "IP address", true},
		{"100.100.100.200", "IP address", true},
		{"169.254.0.0/16", "address range", true},
		{"169.0.0.0/8", "address range", true},
		{"10.0.0.0/8", "address range", false},
		{"10.0.0.12:8080", "IP address", false},
		{"localhost:3000", "host", false},
		{"metadata.google.internal", "host", true},
		{"orders.eu.acme.io", "host", false},
		// Not addresses.
		{"order.created", "", false},
		{"notes.md", "", false},
		{"ops@example.com", "", false},
		{"#releases", "", false},
		{"v1.2.3", "", false},
		{"12", "", false},
		{"normal", "", false},
	} {
		what, _, danger := findAddress(c.s)
		if what != c.what || danger != c.danger {
			t.Errorf("findAddress(%q) = %q %v, want %q %v", c.s, what, danger, c.what, c.danger)
		}
	}
}

func TestAnchored(t *testing.T) {
	for p, want := range map[string]bool{
		"^[a-z]+$": true, `\A[a-z]+\z`: true, "^(a|b)$": true, "^a$|^b$": true, "^$": true,
		"[a-z]+": false, "^[a-z]+": false, "[a-z]+$": false, `^a\$`: false, "^a|b$": false, "": false,
	} {
		re, err := syntax.Parse(p, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		if got := anchored(re); got != want {
			t.Errorf("anchored(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestKeywordFor(t *testing.T) {
	for name, want := range map[string]string{
		"requird": "required", "additionalproperties": "additionalProperties", "maxlength": "maxLength",
		"Type": "type", "$refs": "$ref", "exampels": "examples",
		"x-order": "", "nullable": "", "in": "", "foo": "", "discriminator": "",
	} {
		if got := keywordFor(name); got != want {
			t.Errorf("keywordFor(%q) = %q, want %q", name, got, want)
		}
	}
}
