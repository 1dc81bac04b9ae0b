package syntax

import (
	"testing"

	"github.com/openplaybook/openplaybook/internal/testgen"
)

// BenchmarkParseLarge parses a generated document of about 5 MB.
func BenchmarkParseLarge(b *testing.B) {
	src := testgen.Large(1000, 5000)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := Parse(src, Limits{}); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
