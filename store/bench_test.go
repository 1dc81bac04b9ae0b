package store

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkAuditedCall measures whole audited calls: one transaction of
// StartCall, Append, FinishCall and Append, committed durably. "serial" is
// one caller waiting for each commit; "concurrent" is 32 callers (each its
// own run, as concurrent runs are), whose transactions group commit
// shares; "nobatch" turns group commit off (MaxBatch 1) for comparison.
func BenchmarkAuditedCall(b *testing.B) {
	for _, bc := range []struct {
		name       string
		sync       string
		maxBatch   int
		concurrent bool
	}{
		{"sync=FULL/serial", "FULL", 0, false},
		{"sync=FULL/concurrent", "FULL", 0, true},
		{"sync=FULL/concurrent-nobatch", "FULL", 1, true},
		{"sync=NORMAL/serial", "NORMAL", 0, false},
		{"sync=NORMAL/concurrent", "NORMAL", 0, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := openAt(b, filepath.Join(b.TempDir(), "bench.db"), &Options{Synchronous: bc.sync, MaxBatch: bc.maxBatch})
			call := func(run string, attempt, i int) error {
				return s.Tx(bg, func(tx *Tx) error {
					_, err := auditedCall(tx, run, "work", attempt, "note.add", fmt.Sprintf(`{"body":"note %d"}`, i))
					return err
				})
			}
			if !bc.concurrent {
				run, attempt := newRun(b, s)
				b.ResetTimer()
				for i := range b.N {
					if err := call(run, attempt, i); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.SetParallelism(16) // 16 × GOMAXPROCS callers
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					run, attempt := newRun(b, s)
					for i := 0; pb.Next(); i++ {
						if err := call(run, attempt, i); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}
