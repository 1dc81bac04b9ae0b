package runtime_test

import (
	"testing"

	"github.com/openplaybook/openplaybook/internal/pgtest"
)

// TestMain: the suite runs on the engine OPENPLAYBOOK_TEST_STORE selects
// (internal/teststore); on PostgreSQL, pgtest's cluster serves it.
func TestMain(m *testing.M) { pgtest.Main(m) }
