package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/internal/teststore"
	"github.com/openplaybook/openplaybook/store"
)

// TestCollectKeepsFailures: the queued records a Caller drops once they
// are settled (collect) still report their failure, the first one, at
// the next settle, and so fail the step at Flush.
func TestCollectKeepsFailures(t *testing.T) {
	st := teststore.Open(t, "")
	c := &Caller{s: &Session{opt: SessionOptions{Store: st}}}
	ctx := context.Background()
	fails := func(msg string) func(store.Tx) error { return func(store.Tx) error { return errors.New(msg) } }
	ok := func(store.Tx) error { return nil }
	c.mu.Lock()
	c.queue(ctx, ok)
	c.queue(ctx, fails("first"))
	c.queue(ctx, fails("second"))
	for _, q := range c.pending {
		q.q.Wait()
	}
	c.queue(ctx, ok) // drops the three settled ones
	if len(c.pending) != 1 || c.collected == nil {
		t.Fatalf("after collect: %d pending, collected %v; want 1 and the first failure", len(c.pending), c.collected)
	}
	c.mu.Unlock()
	err := c.Flush()
	if err == nil || !strings.Contains(err.Error(), "first") {
		t.Fatalf("Flush = %v, want the first failure", err)
	}
	if c.Err() == nil {
		t.Fatal("the failure is not remembered")
	}
}
