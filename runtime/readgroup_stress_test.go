package runtime

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/openplaybook/openplaybook/store"
)

// Many goroutines share one Caller, as concurrent tool calls do: read
// calls finishing (queueRead), records queued between them (model.usage,
// as RecordUsage queues), and synchronous transactions (as a
// side-effecting call's start is), while the writer commits at its own
// pace. The audit log holds every record once, in the order the
// goroutines took the Caller's lock; the calls' indices are consecutive
// in that order; the chain verifies.
func TestReadGroupsUnderConcurrency(t *testing.T) {
	g := newGroupRig(t)
	ctx := context.Background()
	const workers, each = 8, 60
	var order []string // under g.c.mu
	var reads, turns, joined int
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range each {
				g.c.mu.Lock()
				switch k := rng.IntN(10); {
				case k < 7:
					before := g.c.reads
					g.read(reads)
					if before != nil && g.c.reads == before {
						joined++
					}
					order = append(order, fmt.Sprintf("read %d", reads))
					reads++
				case k < 9:
					turn := turns
					turns++
					g.c.queue(ctx, func(tx store.Tx) error {
						return g.c.append(tx, "", ModelUsage{Attempt: g.c.attempt, Provider: "p", Model: "m", Turn: turn})
					})
					order = append(order, fmt.Sprintf("usage %d", turn))
				default:
					turn := turns
					turns++
					if err := g.c.tx(ctx, func(tx store.Tx) error {
						return g.c.append(tx, "", ModelUsage{Attempt: g.c.attempt, Provider: "p", Model: "m", Turn: turn})
					}); err != nil {
						t.Error(err)
					}
					order = append(order, fmt.Sprintf("usage %d", turn))
				}
				g.c.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d of %d read calls joined a group", joined, reads)
	if err := g.c.Flush(); err != nil {
		t.Fatal(err)
	}
	calls, err := g.st.Calls(ctx, g.c.run, store.CallFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != reads {
		t.Fatalf("%d calls recorded, want %d", len(calls), reads)
	}
	for i, c := range calls {
		if c.Index != i || string(c.Args) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Errorf("call %d recorded as %d %s", i, c.Index, c.Args)
		}
	}
	recs := g.verifiedAudit(t)
	var got []string
	for i := 1; i < len(recs); i++ {
		r := recs[i]
		switch EventKind(r.Kind) {
		case KindModelUsage:
			var d struct {
				Turn int `json:"turn"`
			}
			if err := json.Unmarshal(r.Data, &d); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("usage %d", d.Turn))
		case KindCallStarted:
			if i+1 >= len(recs) || EventKind(recs[i+1].Kind) != KindCallSucceeded || recordIndex(recs[i+1]) != recordIndex(r) {
				t.Fatalf("call.started%s is not followed by its outcome", recordIndex(r))
			}
			got = append(got, "read"+recordIndex(r))
			i++
		default:
			t.Fatalf("record %d: %s", i, r.Kind)
		}
	}
	if !slices.Equal(got, order) {
		for i := range min(len(got), len(order)) {
			if got[i] != order[i] {
				t.Fatalf("audit order differs at %d: %q, want %q (%d records, %d ops)", i, got[i], order[i], len(got), len(order))
			}
		}
		t.Fatalf("%d records, want %d", len(got), len(order))
	}
}
