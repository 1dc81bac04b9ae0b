package mcphost

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// refScan is the byte-at-a-time stdoutSniffer.scan that scan replaced;
// TestScanMatchesReference holds scan to it.
func refScan(s *stdoutSniffer, p []byte) (found bool) {
	for _, c := range p {
		if s.collecting {
			if c == '\n' || len(s.bad) >= maxKept {
				s.collecting = false
			} else {
				s.bad = append(s.bad, c)
			}
		}
		if c == '\n' {
			s.lineStart = true
			continue
		}
		if !s.lineStart {
			continue
		}
		switch c {
		case ' ', '\t', '\r':
			continue
		case '{', '[':
		default:
			if s.bad == nil {
				s.bad = []byte{c}
				s.collecting = true
				found = true
			}
		}
		s.lineStart = false
	}
	return found
}

func TestScanMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("{}[]\n\r\t x\"a")
	for iter := range 20000 {
		// Mostly short streams; some with lines longer than maxKept.
		n := rng.IntN(64)
		if iter%50 == 0 {
			n = maxKept + rng.IntN(3*maxKept)
		}
		stream := make([]byte, n)
		for i := range stream {
			stream[i] = alphabet[rng.IntN(len(alphabet))]
		}
		if iter%50 == 0 && n > 0 {
			// A long line of one byte, so a non-JSON line outgrows maxKept.
			b := byte('x')
			if rng.IntN(2) == 0 {
				b = '{'
			}
			for i := range stream[:n-1] {
				if rng.IntN(100) > 0 {
					stream[i] = b
				}
			}
		}
		got, want := newStdoutSniffer(nil), newStdoutSniffer(nil)
		wantFound := false
		for p := stream; len(p) > 0; {
			k := 1 + rng.IntN(len(p))
			if rng.IntN(4) == 0 {
				k = min(len(p), 1+rng.IntN(3))
			}
			got.scan(p[:k])
			if refScan(want, p[:k]) {
				wantFound = true
			}
			p = p[k:]
		}
		gotFound := false
		select {
		case <-got.badCh:
			gotFound = true
		default:
		}
		if !bytes.Equal(got.bad, want.bad) || got.lineStart != want.lineStart || got.collecting != want.collecting || gotFound != wantFound {
			t.Fatalf("stream %q: scan left bad %q lineStart %v collecting %v signalled %v; the reference %q %v %v %v",
				stream, got.bad, got.lineStart, got.collecting, gotFound, want.bad, want.lineStart, want.collecting, wantFound)
		}
	}
}

// BenchmarkStdoutSniffer scans a stream of 64 KiB messages (a large tool
// result) in the 32 KiB pieces a read returns.
func BenchmarkStdoutSniffer(b *testing.B) {
	msg := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("lorem ipsum ", 64<<10/12) + `"}]}}` + "\n"
	stream := []byte(strings.Repeat(msg, 4))
	s := newStdoutSniffer(nil)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		for p := stream; len(p) > 0; {
			k := min(len(p), 32<<10)
			s.scan(p[:k])
			p = p[k:]
		}
	}
	if s.nonJSON() != nil {
		b.Fatal("non-JSON reported")
	}
}

func TestMayListTools(t *testing.T) {
	for _, c := range []struct {
		body string
		want bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools\/list"}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"\u0074ools/list"}`, true},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`, false},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"say \"hi\""}}}`, true},
	} {
		if got := mayListTools([]byte(c.body)); got != c.want {
			t.Errorf("mayListTools(%s) = %v, want %v", c.body, got, c.want)
		}
	}
}
