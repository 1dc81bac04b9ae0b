package validate

import (
	"runtime"
	"testing"

	"github.com/openplaybook/openplaybook/internal/testgen"
	"github.com/openplaybook/openplaybook/playbook"
)

// BenchmarkValidateLargeRetained reports how much heap reading and
// validating the generated 1,000-step, 5,000-tool document (about 5 MB)
// keeps alive: the syntax tree, the typed document, the line index and
// the diagnostics, measured after a collection while they are still
// referenced. It is what drives the peak memory of `openplaybook
// validate` (bench/peakmem.sh measures that; target under 100 MB). Its
// ns/op includes two forced collections and is not a speed figure.
//
//	go test ./validate -run '^$' -bench ValidateLargeRetained
func BenchmarkValidateLargeRetained(b *testing.B) {
	src := testgen.Large(1000, 5000)
	var before, after runtime.MemStats
	var retained, tree uint64
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		doc, ds := playbook.Read("large.json", src, nil)
		runtime.GC()
		runtime.ReadMemStats(&after)
		tree = after.HeapAlloc - before.HeapAlloc
		ds = append(ds, Document(doc, nil)...)
		runtime.GC()
		runtime.ReadMemStats(&after)
		retained = after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(doc)
		runtime.KeepAlive(ds)
	}
	b.ReportMetric(float64(tree)/1e6, "read-MB")
	b.ReportMetric(float64(retained)/1e6, "retained-MB")
}
