package serve_test

import (
	"testing"

	"github.com/openplaybook/openplaybook/internal/pgtest"
)

// TestMain: the serve tests use the engine OPENPLAYBOOK_TEST_STORE selects
// (internal/teststore); on PostgreSQL, pgtest's cluster serves them.
func TestMain(m *testing.M) { pgtest.Main(m) }
