package serve_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// TestBenchmarkRunList measures GET /api/v1/runs?limit=50 on stores of
// 1,000 and 10,000 runs, with small (200 B) and large (16 KiB)
// documents, one server per store, the requests interleaved round by
// round; it prints each case's median per request and the ratios
// (BENCHMARKS.md, "Issue 20: run lists"). A build without paging refuses
// ?limit=50 with 400: the whole list is then asked for, as before.
// A benchmark, so it runs only with OPENPLAYBOOK_BENCH_RUNLIST=1:
//
//	OPENPLAYBOOK_BENCH_RUNLIST=1 go test ./serve -run TestBenchmarkRunList -v
//	OPENPLAYBOOK_TEST_STORE=postgres OPENPLAYBOOK_BENCH_RUNLIST=1 go test ./serve -run TestBenchmarkRunList -v
func TestBenchmarkRunList(t *testing.T) {
	if os.Getenv("OPENPLAYBOOK_BENCH_RUNLIST") == "" {
		t.Skip("a benchmark: set OPENPLAYBOOK_BENCH_RUNLIST=1")
	}
	type bcase struct {
		name    string
		runs    int
		docSize int
		path    string
		c       *apiClient
		ns      []float64
	}
	cases := []*bcase{{name: "1k runs, 200 B", runs: 1000, docSize: 200}, {name: "10k runs, 200 B", runs: 10000, docSize: 200},
		{name: "1k runs, 16 KiB", runs: 1000, docSize: 16 << 10}, {name: "10k runs, 16 KiB", runs: 10000, docSize: 16 << 10}}
	for _, bc := range cases {
		r := newRig(t, "")
		doc := []byte(`{"pad":"` + strings.Repeat("x", bc.docSize) + `"}`)
		for done := 0; done < bc.runs; {
			n := min(500, bc.runs-done)
			err := r.st.Tx(context.Background(), func(tx store.Tx) error {
				for i := range n {
					run, err := tx.CreateRun(store.Run{PlaybookID: "bench", PlaybookVersion: "1.0.0", Document: doc, HarnessPath: "h.yaml"})
					if err != nil {
						return err
					}
					if _, err := tx.Append(audit.Record{Run: run.ID, Kind: "run.created"}); err != nil {
						return err
					}
					attempt, err := tx.StartStep(run.ID, "work")
					if err != nil {
						return err
					}
					if (done+i)%10 == 0 { // one run in ten waits at a gate
						if err := tx.SetStepWaiting(run.ID, "work", attempt); err != nil {
							return err
						}
						if _, err := tx.OpenGate(run.ID, "work", attempt); err != nil {
							return err
						}
						if err := tx.SetRunStatus(run.ID, store.RunWaiting, "gate work"); err != nil {
							return err
						}
						continue
					}
					if err := tx.SetRunStatus(run.ID, store.RunCompleted, ""); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			done += n
		}
		bc.c = r.api(operatorToken)
		bc.path = "/api/v1/runs?limit=50"
		if res := bc.c.do("GET", bc.path, nil); res.status == http.StatusBadRequest {
			bc.path = "/api/v1/runs"
		} else if res.status != http.StatusOK {
			t.Fatalf("%s: %d %s", bc.name, res.status, res.body)
		}
	}
	rounds, per := 5, 5
	if v, err := strconv.Atoi(os.Getenv("OPENPLAYBOOK_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	for range rounds {
		for _, bc := range cases {
			t0 := time.Now()
			for range per {
				if res := bc.c.do("GET", bc.path, nil); res.status != http.StatusOK {
					t.Fatalf("%s: %d", bc.name, res.status)
				}
			}
			bc.ns = append(bc.ns, float64(time.Since(t0).Nanoseconds())/float64(per))
		}
	}
	med := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for _, bc := range cases {
		fmt.Printf("runlist %-18s %s  median %8.3f ms/request  min %8.3f\n", bc.name, bc.path, med(bc.ns)/1e6, slices.Min(bc.ns)/1e6)
	}
	fmt.Printf("runlist ratio 10k/1k: %.2f (200 B), %.2f (16 KiB); 16 KiB/200 B: %.2f (1k), %.2f (10k)\n",
		med(cases[1].ns)/med(cases[0].ns), med(cases[3].ns)/med(cases[2].ns), med(cases[2].ns)/med(cases[0].ns), med(cases[3].ns)/med(cases[1].ns))
}
