package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/runtime"
)

// encSecret holds the characters URL and JSON encoders escape (and no
// single quote: the dotenv file quotes it with those).
const encSecret = "enc-S3cret/Val ue&99?q=Z#+%~<é>"

// TestSecretsPercentEncodedNeverWritten: an MCP server (over stdio) hands
// its secret back percent-encoded, as encodeURIComponent writes it and
// with each byte literal or %XX in a case drawn at random, and the agent
// writes the secret in such forms (and JSON-escaped) into note bodies, a
// Today item's link, a tool name and an id that fails. No decoding of any
// of it may reach the agent, the audit log, the calls, the steps or the
// store's files.
func TestSecretsPercentEncodedNeverWritten(t *testing.T) {
	t.Parallel()
	echo := buildEcho(t)
	doc := buildDoc(t, "secrets-encoded",
		agentStep("leak", "spy", []string{"mcp.echo.reveal_encoded", "note.add", "today.surface", "customer.get"}, ""),
	)
	r := newRig(t, rigConfig{
		stdio:   map[string]stdioServer{"echo": {command: echo, env: map[string]string{"ECHO_SECRET": "${secret:ECHO_SECRET}"}}},
		secrets: map[string]string{"ECHO_SECRET": "'" + encSecret + "'"},
	}, doc)
	rnd := rand.New(rand.NewPCG(18, 1))
	var calls []tcall
	const seeds = 12
	for seed := range seeds {
		calls = append(calls, tcall{"mcp.echo.reveal_encoded", map[string]any{"seed": seed}})
	}
	for range 6 {
		f := mixedForm(rnd, encSecret)
		calls = append(calls,
			tcall{"note.add", map[string]any{"customerId": "cus_ada", "body": "key=" + f + "&x=1"}},
			tcall{"today.surface", map[string]any{"title": "t", "summary": "s " + f, "priority": "low", "link": "https://example.com/cb?token=" + f}},
			tcall{"customer.get", map[string]any{"customerId": "cus_" + f}}, // fails: the error names the id
		)
	}
	calls = append(calls, tcall{mixedForm(rnd, encSecret), map[string]any{}}) // refused: not on the list
	tr := map[string]string{"spy": transcriptOf(map[string][]tcall{"leak": calls})}
	ctx := context.Background()
	seen := &agentLog{}
	out, err := r.engine(0, tr, seen, nil).Start(ctx, jsontext.Value(`{}`))
	wantOutcome(t, "start", out, err, runtime.Completed)

	// The server sent the secret each time (its answers were redacted,
	// not empty), and the agent was handed none of it.
	handed := seen.of("leak")
	if len(handed) != len(calls) {
		t.Fatalf("the agent made %d calls, want %d", len(handed), len(calls))
	}
	for i, c := range handed[:seeds] {
		if !bytes.Contains(c.Res.Content, []byte(`"value":"[redacted]"`)) {
			t.Errorf("reveal_encoded seed %d: the agent was handed %s, want the value redacted", i, c.Res.Content)
		}
	}
	check := func(what string, b []byte) {
		t.Helper()
		for _, d := range looseDecode(string(b)) {
			if i := strings.Index(d, encSecret); i >= 0 {
				t.Errorf("%s holds the secret (decoded: ...%s...)", what, d[max(0, i-40):min(len(d), i+len(encSecret)+40)])
				break
			}
		}
	}
	for i, c := range handed {
		check(fmt.Sprintf("the answer to call %d (%s)", i, c.Name), append(append([]byte{}, c.Res.Content...), c.Res.Error...))
	}
	check("the progress output", []byte(r.progress.String()))
	check("the outcome", jsonBytes(t, out))
	check("the audit log", jsonBytes(t, r.auditOf(out.Run)))
	check("the calls", jsonBytes(t, r.calls(out.Run)))
	notes, _ := r.st.ListNotes(ctx, "", "", 100)
	if len(notes) != 6 {
		t.Errorf("%d notes, want 6", len(notes))
	}
	check("the notes", jsonBytes(t, notes))
	items, _ := r.st.ListToday(ctx, true)
	check("the Today items", jsonBytes(t, items))
	steps, _ := r.st.Steps(ctx, out.Run)
	check("the steps", jsonBytes(t, steps))
	dump, err := r.st.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("the store's dump", dump)
	r.st.Close()
	for _, f := range storeFiles(t, r) {
		b, _ := os.ReadFile(f)
		check(filepath.Base(f), b)
	}
}

// mixedForm writes each ASCII byte of s literally, as %XX with each
// digit's case drawn or as a JSON \u escape, and every other byte as %XX.
func mixedForm(rnd *rand.Rand, s string) string {
	digit := func(d byte) byte {
		c := "0123456789abcdef"[d&15]
		if c >= 'a' && rnd.IntN(2) == 0 {
			c -= 'a' - 'A'
		}
		return c
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch k := rnd.IntN(3); {
		case k == 0 && c < 0x80:
			b.WriteByte(c)
		case k == 1 || c >= 0x80:
			b.Write([]byte{'%', digit(c >> 4), digit(c)})
		default:
			b.Write([]byte{'\\', 'u', '0', '0', digit(c >> 4), digit(c)})
		}
	}
	return b.String()
}

// looseDecode returns s and what decoding every %XX and JSON escape of it
// gives, once, twice and three times over (for escapes inside escapes):
// what a reader of the text could recover.
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
				if j := strings.IndexByte(`"\/bfnrt`, s[i+1]); j >= 0 {
					b.WriteByte("\"\\/\b\f\n\r\t"[j])
					i++
					continue
				}
				if i+6 <= len(s) && s[i+1] == 'u' {
					if v, err := strconv.ParseUint(s[i+2:i+6], 16, 16); err == nil {
						r, n := rune(v), 6
						if utf16.IsSurrogate(r) && i+12 <= len(s) && s[i+6:i+8] == `\u` {
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
