package redact

import (
	"strings"
	"testing"
)

// benchText is a 64 KiB log-like text holding no secret.
func benchText() string {
	line := "2024-05-01T12:00:00Z info tool mcp.acme.search returned 200 {\"id\":\"cus_123\",\"q\":\"refund policy\"}\n"
	return strings.Repeat(line, 64<<10/len(line))
}

func benchSecrets() []string {
	return []string{
		"sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc",
		"xoxb-" + "2048123456-4096123456789-AbCdEfGh",
		"hunter2-correct-horse-battery",
		"p@ss w/rd&=+%",
		"ghp_" + "R2d2C3p0BB8aLuKeSkYwAlKeR0123456789",
	}
}

func BenchmarkRedactClean(b *testing.B) {
	r := New(benchSecrets())
	text := benchText()
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for range b.N {
		r(text)
	}
}

func BenchmarkRedactDirty(b *testing.B) {
	r := New(benchSecrets())
	text := benchText()
	secs := benchSecrets()
	var sb strings.Builder
	for i, line := range strings.SplitAfter(text, "\n") {
		sb.WriteString(line)
		if i%50 == 0 {
			sb.WriteString(secs[i%len(secs)])
		}
	}
	text = sb.String()
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for range b.N {
		r(text)
	}
}

func BenchmarkNew(b *testing.B) {
	secs := benchSecrets()
	for range b.N {
		New(secs)
	}
}

// BenchmarkRedactRepetitive is the worst case of a trie matcher that
// restarts at each byte: a text that almost matches everywhere.
func BenchmarkRedactRepetitive(b *testing.B) {
	r := New([]string{strings.Repeat("a", 200) + "b"})
	text := strings.Repeat("a", 64<<10)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for range b.N {
		r(text)
	}
}
