package builtin_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/store"
)

// memData is builtin.Data in memory: no store engine at all.
type memData struct {
	customers map[string]store.Customer
	notes     []store.Note
}

func (m *memData) GetCustomer(_ context.Context, id string) (store.Customer, error) {
	if c, ok := m.customers[id]; ok {
		return c, nil
	}
	return store.Customer{}, store.ErrNotFound
}
func (m *memData) SearchCustomers(context.Context, string, int) ([]store.Customer, error) {
	return nil, nil
}
func (m *memData) SeedCustomers(context.Context, []store.Customer) error { return nil }
func (m *memData) ListNotes(context.Context, string, string, int) ([]store.Note, error) {
	return m.notes, nil
}
func (m *memData) ListToday(context.Context, bool) ([]store.TodayItem, error) { return nil, nil }

// memTx is a store.Tx whose only working methods are builtin.DataTx's.
type memTx struct {
	store.Tx
	m *memData
}

func (t memTx) PutCustomer(store.Customer) error { return nil }
func (t memTx) AddNote(n store.Note) (store.Note, error) {
	n.ID = "note_1"
	t.m.notes = append(t.m.notes, n)
	return n, nil
}
func (t memTx) SurfaceToday(it store.TodayItem) (store.TodayItem, error) { return it, nil }
func (t memTx) DismissToday(string) error                                { return nil }

// TestToolsNeedOnlyData: the built-ins run on builtin's own interface,
// whatever holds the tables; a transaction that cannot write them is an
// error that says so, never a panic.
func TestToolsNeedOnlyData(t *testing.T) {
	m := &memData{customers: map[string]store.Customer{"cus_ada": {ID: "cus_ada", Name: "Ada"}}}
	tools := builtin.Tools(m)
	ctx := registry.WithCallInfo(context.Background(), registry.CallInfo{Run: "run_1", Step: "s", Attempt: 1, Redact: func(s string) string { return s }})
	res, err := tools["customer.get"].Call(ctx, jsontext.Value(`{"customerId":"cus_ada"}`))
	if err != nil || !strings.Contains(string(res.Content), `"Ada"`) {
		t.Fatalf("customer.get: %s, %v", res.Content, err)
	}
	res, err = tools["note.add"].Call(ctx, jsontext.Value(`{"customerId":"cus_ada","body":"hello"}`))
	if err != nil || res.Commit == nil {
		t.Fatalf("note.add: %+v, %v", res, err)
	}
	if _, err := res.Commit(memTx{m: m}); err != nil || len(m.notes) != 1 || m.notes[0].Body != "hello" {
		t.Fatalf("note.add committed %+v, %v", m.notes, err)
	}
	_, err = res.Commit(bareTx{})
	if err == nil || !strings.Contains(err.Error(), "cannot write the built-in primitives' data") {
		t.Fatalf("a Tx without the tables: %v", err)
	}
	if _, err := builtin.DataOf(bareStore{}); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DataOf a store without the tables: %v", err)
	}
}

type bareTx struct{ store.Tx }

type bareStore struct{ store.Store }
