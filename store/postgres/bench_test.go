package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/internal/pgtest"
	"github.com/openplaybook/openplaybook/store"
)

// The benchmarks of this file compare the engine with its peer on the
// same server in the same run (bench/postgres.sh runs them interleaved
// and prints the ratios; BENCHMARKS.md):
//
//   - BenchmarkAuditedCall: one caller, whole audited side-effecting
//     calls, each one transaction of StartCall, Append, FinishCall and
//     Append, committed with synchronous_commit=on.
//   - BenchmarkAuditedCall32: the same from 32 callers, each on a run of
//     its own, as concurrent runs are.
//   - BenchmarkRawCommit and BenchmarkRawCommit32: the peer, bare pgx
//     connections (1, or 32 each with its own) committing one tiny
//     INSERT per transaction (an implicit transaction: one round trip),
//     synchronous_commit=on.
//
// Each reports calls/s or commits/s.

func BenchmarkAuditedCall(b *testing.B) { benchAudited(b, 1) }

func BenchmarkAuditedCall32(b *testing.B) { benchAudited(b, 32) }

func BenchmarkRawCommit(b *testing.B) { benchRaw(b, 1) }

func BenchmarkRawCommit32(b *testing.B) { benchRaw(b, 32) }

func benchAudited(b *testing.B, callers int) {
	s := openURL(b, pgtest.DurableSchema(b), nil)
	runs := make([]string, callers)
	attempts := make([]int, callers)
	for i := range runs {
		runs[i], attempts[i] = newRun(b, s)
	}
	// Warm every connection's statement cache.
	call := func(c, i int) error {
		return s.Tx(bg, func(tx store.Tx) error {
			_, err := auditedCall(tx, runs[c], "work", attempts[c], "note.add", fmt.Sprintf(`{"body":"note %d"}`, i))
			return err
		})
	}
	spread(b, callers, 2*callers, call)
	b.ResetTimer()
	spread(b, callers, b.N, call)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

func benchRaw(b *testing.B, callers int) {
	url := pgtest.DurableSchema(b)
	conns := make([]*pgx.Conn, callers)
	for i := range conns {
		c, err := pgx.Connect(bg, url)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close(context.Background()) })
		if _, err := c.Exec(bg, `SET synchronous_commit = on`); err != nil {
			b.Fatal(err)
		}
		conns[i] = c
	}
	if _, err := conns[0].Exec(bg, `CREATE TABLE t (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v bigint NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	ins := func(c, i int) error {
		_, err := conns[c].Exec(bg, `INSERT INTO t (v) VALUES ($1)`, i)
		return err
	}
	spread(b, callers, 2*callers, ins)
	b.ResetTimer()
	spread(b, callers, b.N, ins)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// spread runs n calls of fn over callers goroutines (caller c, call i).
func spread(b *testing.B, callers, n int, fn func(c, i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(c, i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
