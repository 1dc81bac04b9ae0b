package validate

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/syntax"
)

// FuzzReadValidate runs the reader and every rule over arbitrary bytes.
// Seeds: every example and corpus file, plus testdata/fuzz/FuzzReadValidate.
// It fails on a panic (a rule's panic surfaces as an "internal" diagnostic),
// on a diagnostic with no rule or message, on a position outside the
// input, and on an input that takes over a second.
//
//	go test ./validate -run '^$' -fuzz FuzzReadValidate -fuzztime 10m
func FuzzReadValidate(f *testing.F) {
	for _, pattern := range []string{"../examples/*.json", "../testdata/ok/*.json", "../testdata/err/*.json"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if src, err := os.ReadFile(file); err == nil {
				f.Add(src)
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		start := time.Now()
		doc, ds := playbook.Read("fuzz.json", src, &playbook.ReadOptions{Limits: syntax.Limits{MaxDepth: 64}})
		ds = append(ds, Document(doc, nil)...)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("took %v on %d bytes", d, len(src))
		}
		lines := 1
		for _, c := range src {
			if c == '\n' {
				lines++
			}
		}
		for _, d := range ds {
			if d.Rule == "internal" || d.Rule == "" || d.Message == "" {
				t.Fatalf("bad diagnostic: %+v", d)
			}
			if d.Line < 1 || d.Line > lines || d.Column < 1 {
				t.Fatalf("position outside the input (%d lines): %+v", lines, d)
			}
			if d.Severity < diag.Info || d.Severity > diag.Error {
				t.Fatalf("bad severity: %+v", d)
			}
		}
	})
}
