package validate

import (
	"testing"

	"github.com/openplaybook/openplaybook/internal/testgen"
	"github.com/openplaybook/openplaybook/playbook"
)

// TestLargeDocumentIsValid keeps the benchmark honest: the generated
// document it measures is valid, so every rule runs over all of it.
func TestLargeDocumentIsValid(t *testing.T) {
	src := testgen.Large(100, 500)
	doc, ds := playbook.Read("large.json", src, nil)
	ds = append(ds, Document(doc, nil)...)
	for _, d := range ds {
		if d.Severity >= 1 { // warning or error
			t.Errorf("%d:%d %s [%s]", d.Line, d.Column, d.Message, d.Rule)
		}
	}
}

// BenchmarkValidateLarge reads and validates a generated 1,000-step,
// 5,000-tool document of about 5 MB. Target (BENCHMARKS.md): under 100 ms.
func BenchmarkValidateLarge(b *testing.B) {
	src := testgen.Large(1000, 5000)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		doc, _ := playbook.Read("large.json", src, nil)
		Document(doc, nil)
	}
}
