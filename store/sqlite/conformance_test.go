package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/openplaybook/openplaybook/store"
	"github.com/openplaybook/openplaybook/store/sqlite"
	"github.com/openplaybook/openplaybook/store/storetest"
)

// TestConformance runs the store contract's suite on this engine.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "store.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
