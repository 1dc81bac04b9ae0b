package harness

import (
	"os"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, and no diagnostic quotes a credential
// planted in the input.
func FuzzParse(f *testing.F) {
	if src, err := os.ReadFile("../examples/harness.yaml"); err == nil {
		f.Add(src, false)
	}
	f.Add([]byte("mcpServers:\n  m: {command: x, args: [\""+fakeStripe+"\"]}\n"), false)
	f.Add([]byte(`{"mcpServers": {"m": {"url": "https://x.example.com", "headers": {"A": "${secret:T}"}}}}`), true)
	f.Add([]byte("a: &x [1]\nb: *x\n<<: {c: 1}\n---\nd: !!str 1\n"), false)
	f.Fuzz(func(t *testing.T, src []byte, asJSON bool) {
		name := "h.yaml"
		if asJSON {
			name = "h.json"
		}
		_, ds := Parse(name, src, "/h")
		for _, d := range ds {
			if strings.Contains(d.Message, fakeStripe[8:]) {
				t.Fatalf("diagnostic quotes a credential: %s", d.Message)
			}
		}
		ParseDotenv(".env", src)
	})
}
