package report

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/validate"
)

// Fake credentials, built from pieces so that secret scanners leave this
// file alone; none of them is real.
var (
	fakeStripe  = "sk_" + "live_" + "51HqLyjWDarjtT1zdp7dcXq"
	fakeGitHub  = "ghp_" + "R2d2C3p0BB8aLuKeSkYwAlKeR0123456789"
	fakePEMBody = "MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB"
	fakePEM     = "-----BEGIN " + "RSA PRIVATE KEY-----\n" + fakePEMBody + "\n-----END RSA PRIVATE KEY-----"
	fakeURL     = "postgres://app:" + "Tr0ub4dor3@db.internal.example:5432/app"
	fakeJWT     = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	fakeBearer  = "Bearer " + fakeJWT
	fakeMember  = "x_" + "sk_" + "live_" + "51Hq8ZtLkR9vXw2Yp4Nm7QcB3dF6gJ"
	fakeBasic   = "Basic " + "YXBwOlRyMHViNGRvcjNYeQ==" // app:Tr0ub4dor3Xy
)

// pieces returns every 8-byte piece of the secrets without a blank (the
// word "Bearer ", PEM framing): what no output may hold.
func pieces(secrets ...string) []string {
	var ps []string
	for _, s := range secrets {
		for i := 0; i+8 <= len(s); i++ {
			if w := s[i : i+8]; !strings.ContainsAny(w, " \n") {
				ps = append(ps, w)
			}
		}
	}
	return ps
}

// leaks returns the first piece out holds, or "".
func leaks(out string, ps []string) string {
	for _, p := range ps {
		if strings.Contains(out, p) {
			return p
		}
	}
	return ""
}

func js(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestTextMasksCredentials puts a diagnostic at every column of every line
// of a file holding credentials, as written and as JSON escapes write them
// ("\/" for '/', "\u0038" for '8'), on lines of their own and all on one
// line, and across lines (a PEM block pasted with its line breaks): no
// snippet shows a piece of one, and each snippet shows as many characters,
// with the caret in the same place, as without the masking.
func TestTextMasksCredentials(t *testing.T) {
	escURL := strings.ReplaceAll(fakeURL, "/", `\/`)
	escKey := strings.Replace(fakeStripe, "L", `\u004c`, 1)
	all := []string{fakeStripe, fakeGitHub, fakePEM, fakeURL, fakeBearer, fakeBasic}
	var b strings.Builder
	b.WriteString("{\n")
	for i, s := range all {
		fmt.Fprintf(&b, "  \"v%d\": %s,\n", i, js(s))
	}
	fmt.Fprintf(&b, "  %s: 1, \"esc\": [\"%s\", \"%s\"],\n", js(fakeMember), escURL, escKey)
	b.WriteString("  \"all\": [")
	for _, s := range all {
		fmt.Fprintf(&b, "%s, ", js(s))
	}
	b.WriteString("0],\n")
	b.WriteString("  \"raw\": \"" + fakePEM + "\"\n}\n")
	src := b.String()
	ps := pieces(append(all, fakeMember)...)

	var ds []diag.Diagnostic
	for n, line := range strings.Split(src, "\n") {
		for col := 1; col <= len(line)+1; col++ {
			ds = append(ds, diag.Diagnostic{File: "c.json", Line: n + 1, Column: col, Severity: diag.Error, Rule: "r", Message: "m"})
		}
	}
	out := render(t, "text", []File{{Name: "c.json", Src: []byte(src)}}, ds)
	if p := leaks(out, ps); p != "" {
		i := strings.Index(out, p)
		t.Fatalf("the text format shows %q of a credential:\n%s", p, out[max(i-200, 0):min(i+200, len(out))])
	}
	if !strings.Contains(out, "*****") {
		t.Fatal("nothing was masked")
	}

	// Masking keeps the characters in place.
	srcs := newSources([]File{{Name: "c.json", Src: []byte(src)}})
	for _, d := range ds {
		line, start, _ := srcs.line(d.File, d.Line)
		masked, mpad := snippet(line, d.Column, srcs.masks(d.File, start, start+len(line)), start)
		plain, pad := snippet(line, d.Column, nil, 0)
		if utf8.RuneCountInString(masked) != utf8.RuneCountInString(plain) || mpad != pad {
			t.Fatalf("%d:%d: masking moved the caret:\n%q\n%q\n%q\n%q", d.Line, d.Column, masked, mpad, plain, pad)
		}
	}
}

// TestCredentialSpansDecoded: a credential written with JSON escapes is
// masked from its first escape or byte to its last, escapes whole.
func TestCredentialSpansDecoded(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`{"a": "see postgres:\/\/app:Tr0ub4dor3@db\/x now"}`, `postgres:\/\/app:Tr0ub4dor3@db\/x`},
		{`["` + `\u0073k_live_51HqLyjWDarjtT1zdp7dc\u0058q"]`, `\u0073k_live_51HqLyjWDarjtT1zdp7dc\u0058q`},
		{`["x", "Bearer\t` + fakeJWT[:20] + `\ud83d\ude00"]`, fakeJWT[:20]},
	} {
		spans := credentialSpans([]byte(tc.src))
		if len(spans) != 1 || tc.src[spans[0].start:spans[0].end] != tc.want {
			var got []string
			for _, sp := range spans {
				got = append(got, tc.src[sp.start:sp.end])
			}
			t.Errorf("credentialSpans(%s) = %q, want [%q]", tc.src, got, tc.want)
		}
	}
}

// TestNoFormatEchoesCredentials validates a document holding credentials
// in values and in a member name, the way `openplaybook validate` does,
// and renders its diagnostics in every format: none shows a piece of a
// credential, though the text format shows the lines that hold them.
func TestNoFormatEchoesCredentials(t *testing.T) {
	src := `{
  "openplaybook": "1.6",
  "manifest": {"id": "leaky", "name": "Leaky", "version": "1.0.0", "description": ` + js("charge with "+fakeStripe) + `, "nxt": 1, ` + js(fakeMember) + `: "a"},
  "requires": {"connections": [], "mcpServers": [{"name": ` + js(fakeURL) + `, "toolNames": []}], "secrets": [{"name": "GH", "purpose": ` + js(fakeGitHub) + `}]},
  "tools": [],
  "steps": [
    {"id": "a", "kind": "agent", "agent": "x", "purpose": ` + js("send "+fakeBearer) + `, "allowedTools": [], "nxt": "b"},
    {"id": "b", "kind": "gate", "purpose": ` + js(fakePEM) + `}
  ]
}
`
	doc, ds := playbook.Read("leaky.json", []byte(src), nil)
	ds = append(ds, validate.Document(doc, nil)...)
	diag.Sort(ds)
	lines := map[int]bool{}
	for _, d := range ds {
		if d.Rule == "credential" {
			lines[d.Line] = true
		}
	}
	if len(lines) < 4 {
		t.Fatalf("the credential rule found credentials on %d lines, want at least 4:\n%v", len(lines), ds)
	}
	ps := pieces(fakeStripe, fakeGitHub, fakePEM, fakeURL, fakeBearer, fakeMember)
	files := []File{{Name: "leaky.json", Src: []byte(src)}}
	for _, format := range Formats {
		out := render(t, format, files, ds)
		if format == "sarif" {
			out = withoutDriver(t, out)
		}
		if p := leaks(out, ps); p != "" {
			t.Errorf("the %s format shows %q of a credential:\n%s", format, p, out)
		}
	}
	if out := render(t, "text", files, ds); !strings.Contains(out, `"description": "charge with ***`) {
		t.Errorf("the text format does not show the masked line:\n%s", out)
	}
}

// FuzzCredentialSpans: the spans are in bounds, sorted and apart, and a
// snippet of any line at any column, masked, shows as many characters as
// unmasked.
func FuzzCredentialSpans(f *testing.F) {
	f.Add([]byte(`{"a": "postgres:\/\/app:Tr0ub4dor3@db\/x", "b": "\u0073k_live_51HqLyjWDarjtT1zdp7dc\u0058q"}`), 30)
	f.Add([]byte("\"\\ud83d\\ude00 Bearer\\t"+fakeJWT+"\"\n\"-----BEGIN PRIVATE KEY-----\n"+fakePEMBody+"\n"), 3)
	f.Fuzz(func(t *testing.T, src []byte, col int) {
		spans := credentialSpans(src)
		prev := 0
		for _, sp := range spans {
			if sp.start < prev || sp.end <= sp.start || sp.end > len(src) {
				t.Fatalf("credentialSpans(%q): bad span %v in %v", src, sp, spans)
			}
			prev = sp.end
		}
		s := newSources([]File{{Name: "f", Src: src}})
		for n := 1; ; n++ {
			line, start, ok := s.line("f", n)
			if !ok {
				break
			}
			masked, mpad := snippet(line, col, s.masks("f", start, start+len(line)), start)
			plain, pad := snippet(line, col, nil, 0)
			if utf8.RuneCountInString(masked) != utf8.RuneCountInString(plain) || mpad != pad {
				t.Fatalf("line %d of %q, column %d: %q %q, unmasked %q %q", n, src, col, masked, mpad, plain, pad)
			}
		}
	})
}

// withoutDriver returns a sarif log less its tool.driver, after checking
// that the driver is the one of a clean log: fixed text (the rules'
// documentation), which does not depend on the document.
func withoutDriver(t *testing.T, out string) string {
	t.Helper()
	var l, clean struct {
		Runs []map[string]json.RawMessage `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(render(t, "sarif", nil, nil)), &clean); err != nil {
		t.Fatal(err)
	}
	if string(l.Runs[0]["tool"]) != string(clean.Runs[0]["tool"]) {
		t.Errorf("the sarif tool.driver depends on the diagnostics")
	}
	delete(l.Runs[0], "tool")
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
