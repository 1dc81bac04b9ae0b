package postgres_test

import (
	"context"
	"testing"

	"github.com/openplaybook/openplaybook/internal/pgtest"
	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/postgres"
	"github.com/openplaybook/openplaybook/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var bg = context.Background()

// openTest opens a store on a schema of the test's own.
func openTest(t testing.TB) *postgres.Store {
	t.Helper()
	return openURL(t, pgtest.Schema(t), nil)
}

func openURL(t testing.TB, url string, opt *postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(bg, url, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance runs the store contract's suite on this engine.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTest(t) })
}
