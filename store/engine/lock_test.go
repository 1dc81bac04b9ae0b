package engine

import (
	"context"
	"testing"

	"github.com/openplaybook/openplaybook/internal/pgtest"
)

// TestPostgresRelockAfterUnlock: once unlock has returned, the run can be
// locked again at once (the runtime locks a run per command: decide,
// then resume). Each round unlocks and locks again immediately.
func TestPostgresRelockAfterUnlock(t *testing.T) {
	st, err := OpenPostgres(context.Background(), pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	busy := 0
	for i := 0; i < 100; i++ {
		unlock, err := st.LockRun("run_x")
		if err != nil {
			busy++
			continue
		}
		unlock()
	}
	if busy > 0 {
		t.Errorf("%d of 100 LockRun calls right after an unlock found the run busy", busy)
	}
}
