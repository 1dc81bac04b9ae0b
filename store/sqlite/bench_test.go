package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/openplaybook/openplaybook/internal/rawcommit"
	"github.com/openplaybook/openplaybook/store"
)

// BenchmarkAuditedCall measures whole audited calls: one transaction of
// StartCall, Append, FinishCall and Append, committed durably; "-read" is
// a read call recorded after it ran, RecordCall and one AppendAll of the
// same two records. "serial" is
// one caller waiting for each commit; "concurrent" is 32 callers (each its
// own run, as concurrent runs are), whose transactions group commit
// shares; "nobatch" turns group commit off (MaxBatch 1) for comparison.
func BenchmarkAuditedCall(b *testing.B) {
	for _, bc := range []struct {
		name       string
		sync       string
		maxBatch   int
		concurrent bool
		read       bool // a read call: RecordCall and AppendAll of both records
	}{
		{"sync=FULL/serial", "FULL", 0, false, false},
		{"sync=FULL/concurrent", "FULL", 0, true, false},
		{"sync=FULL/concurrent-nobatch", "FULL", 1, true, false},
		{"sync=NORMAL/serial", "NORMAL", 0, false, false},
		{"sync=NORMAL/concurrent", "NORMAL", 0, true, false},
		{"sync=FULL/serial-read", "FULL", 0, false, true},
		{"sync=FULL/concurrent-read", "FULL", 0, true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := openAt(b, filepath.Join(b.TempDir(), "bench.db"), &Options{Synchronous: bc.sync, MaxBatch: bc.maxBatch})
			call := func(run string, attempt, i int) error {
				return s.Tx(bg, func(tx store.Tx) error {
					args := fmt.Sprintf(`{"body":"note %d"}`, i)
					if bc.read {
						_, err := recordedCall(tx, run, "work", attempt, "customer.get", args)
						return err
					}
					_, err := auditedCall(tx, run, "work", attempt, "note.add", args)
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

// BenchmarkRawCommit is the peer measurement for the store's benchmarks:
// a bare database/sql connection (modernc.org/sqlite) to a file on the
// same disk, in WAL mode with synchronous=FULL, committing one tiny INSERT
// per transaction (BEGIN IMMEDIATE ... COMMIT), one after another. Its
// commits/s is the disk's durable commit rate as SQLite sees it; compare
// the store's (and the runtime's) rates with it by ratio within one run.
func BenchmarkRawCommit(b *testing.B) {
	db, err := rawcommit.Open(filepath.Join(b.TempDir(), "raw.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	b.ResetTimer()
	if err := db.Commit(b.N); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}
