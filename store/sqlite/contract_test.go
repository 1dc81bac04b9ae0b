package sqlite_test

import (
	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/store/sqlite"
)

// The engine holds the built-in primitives' business tables.
var (
	_ builtin.Data   = (*sqlite.Store)(nil)
	_ builtin.DataTx = (*sqlite.Tx)(nil)
)
