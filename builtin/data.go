package builtin

import (
	"context"
	"fmt"

	"github.com/openplaybook/openplaybook/store"
)

// Data is the built-in primitives' business tables (customers, notes, the
// Today list; docs/store.md, "customers, notes, today"), as builtin reads
// them. They are not part of the [store.Store] contract: a store engine
// that holds them implements Data on its Store (store/sqlite does) and
// [DataTx] on its Tx.
type Data interface {
	// GetCustomer returns one customer, or an error wrapping
	// [store.ErrNotFound].
	GetCustomer(ctx context.Context, id string) (store.Customer, error)
	// SearchCustomers returns at most limit customers whose name, email or
	// company hold every word of query (ASCII case-insensitive), best
	// match first.
	SearchCustomers(ctx context.Context, query string, limit int) ([]store.Customer, error)
	// SeedCustomers upserts the customers in one transaction.
	SeedCustomers(ctx context.Context, cs []store.Customer) error
	// ListNotes returns at most limit notes of a customer ("" for all)
	// with tag ("" for any), newest first.
	ListNotes(ctx context.Context, customerID, tag string, limit int) ([]store.Note, error)
	// ListToday returns the Today list, high priority first, newest first
	// within a priority; dismissed items only when includeDismissed.
	ListToday(ctx context.Context, includeDismissed bool) ([]store.TodayItem, error)
}

// DataTx is the writes of the business tables, made inside the
// transaction that records the call (the [store.Tx] a built-in's
// registry.Result.Commit is given).
type DataTx interface {
	PutCustomer(c store.Customer) error
	AddNote(n store.Note) (store.Note, error)
	SurfaceToday(it store.TodayItem) (store.TodayItem, error)
	DismissToday(id string) error
}

// DataOf returns st's business tables, or an error saying that its engine
// holds none.
func DataOf(st store.Store) (Data, error) {
	if d, ok := st.(Data); ok {
		return d, nil
	}
	return nil, fmt.Errorf("the store (%T) does not hold the built-in primitives' data (customers, notes, today)", st)
}

// dataTx returns tx's business-table writes, or an error saying that its
// engine has none.
func dataTx(tx store.Tx) (DataTx, error) {
	if d, ok := tx.(DataTx); ok {
		return d, nil
	}
	return nil, fmt.Errorf("the store's transaction (%T) cannot write the built-in primitives' data", tx)
}
