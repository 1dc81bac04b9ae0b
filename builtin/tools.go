package builtin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/registry"
	"github.com/openplaybook/openplaybook/store"
)

// Tools returns the built-ins' implementations over st, by tool name,
// one for each of [Definitions]. Reads (customer.get, customer.search,
// note.list) read st when called; writes (note.add, today.surface) return
// a [registry.Result] whose Commit makes the change inside the
// transaction that records the call, with every value the agent gave
// passed through the call's redactor first (a secret an agent repeats is
// never stored).
func Tools(st Data) map[string]registry.Tool {
	return map[string]registry.Tool{
		"customer.get":    tool{st, customerGet},
		"customer.search": tool{st, customerSearch},
		"note.list":       tool{st, noteList},
		"note.add":        tool{st, noteAdd},
		"today.surface":   tool{st, todaySurface},
	}
}

// args are the members any built-in reads; each reads its own.
type args struct {
	CustomerID string   `json:"customerId"`
	Query      string   `json:"query"`
	Limit      int      `json:"limit"`
	Body       string   `json:"body"`
	Tags       []string `json:"tags"`
	Tag        string   `json:"tag"`
	Title      string   `json:"title"`
	Summary    string   `json:"summary"`
	Priority   string   `json:"priority"`
	Link       string   `json:"link"`
}

type tool struct {
	st Data
	fn func(ctx context.Context, st Data, ci registry.CallInfo, a args) (registry.Result, error)
}

// InStore marks every built-in as a [registry.InStore] tool: reads read
// the store and writes return a Commit; neither changes anything when
// called.
func (tool) InStore() {}

func (t tool) Call(ctx context.Context, raw jsontext.Value) (registry.Result, error) {
	var a args
	if err := json.Unmarshal(raw, &a); err != nil {
		return registry.Result{}, fmt.Errorf("reading the arguments: %v", err)
	}
	ci, _ := registry.CallInfoOf(ctx)
	return t.fn(ctx, t.st, ci, a)
}

func content(v any) (registry.Result, error) {
	b, err := json.Marshal(v, json.Deterministic(true))
	return registry.Result{Content: b}, err
}

func customerGet(ctx context.Context, st Data, _ registry.CallInfo, a args) (registry.Result, error) {
	c, err := st.GetCustomer(ctx, a.CustomerID)
	if errors.Is(err, store.ErrNotFound) {
		return registry.Result{}, fmt.Errorf("no customer has id %s", strconv.Quote(a.CustomerID))
	}
	if err != nil {
		return registry.Result{}, err
	}
	return content(map[string]any{"customer": customerJSON(c)})
}

func customerSearch(ctx context.Context, st Data, _ registry.CallInfo, a args) (registry.Result, error) {
	limit := a.Limit
	if limit <= 0 {
		limit = 10
	}
	cs, err := st.SearchCustomers(ctx, a.Query, limit)
	if err != nil {
		return registry.Result{}, err
	}
	out := make([]any, 0, len(cs))
	for _, c := range cs {
		out = append(out, customerJSON(c))
	}
	return content(map[string]any{"customers": out})
}

func noteList(ctx context.Context, st Data, _ registry.CallInfo, a args) (registry.Result, error) {
	limit := a.Limit
	if limit <= 0 {
		limit = 20
	}
	ns, err := st.ListNotes(ctx, a.CustomerID, a.Tag, limit)
	if err != nil {
		return registry.Result{}, err
	}
	out := make([]any, 0, len(ns))
	for _, n := range ns {
		out = append(out, noteJSON(n))
	}
	return content(map[string]any{"notes": out})
}

func noteAdd(_ context.Context, _ Data, ci registry.CallInfo, a args) (registry.Result, error) {
	return registry.Result{Commit: func(stx store.Tx) (jsontext.Value, error) {
		tx, err := dataTx(stx)
		if err != nil {
			return nil, err
		}
		n, err := tx.AddNote(store.Note{CustomerID: ci.Redact(a.CustomerID), Body: ci.Redact(a.Body), Tags: redactAll(ci.Redact, a.Tags),
			Author: ci.Agent, Run: ci.Run, Step: ci.Step})
		if err != nil {
			return nil, err
		}
		r, err := content(map[string]any{"note": noteJSON(n)})
		return r.Content, err
	}}, nil
}

func todaySurface(_ context.Context, _ Data, ci registry.CallInfo, a args) (registry.Result, error) {
	return registry.Result{Commit: func(stx store.Tx) (jsontext.Value, error) {
		tx, err := dataTx(stx)
		if err != nil {
			return nil, err
		}
		it, err := tx.SurfaceToday(store.TodayItem{Title: ci.Redact(a.Title), Summary: ci.Redact(a.Summary), Priority: ci.Redact(a.Priority),
			CustomerID: ci.Redact(a.CustomerID), Link: ci.Redact(a.Link), Run: ci.Run, Step: ci.Step})
		if err != nil {
			return nil, err
		}
		r, err := content(map[string]any{"itemId": it.ID, "surfacedAt": it.Created.UTC().Format(time.RFC3339Nano)})
		return r.Content, err
	}}, nil
}

// redactAll redacts each of ss: built-ins write every value an agent
// gives them through the redactor, not only the free text.
func redactAll(redact func(string) string, ss []string) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = redact(s)
	}
	return out
}

func customerJSON(c store.Customer) map[string]any {
	m := map[string]any{"id": c.ID, "name": c.Name, "email": c.Email}
	if c.Company != "" {
		m["company"] = c.Company
	}
	if c.Plan != "" {
		m["plan"] = c.Plan
	}
	if len(c.Tags) > 0 {
		m["tags"] = c.Tags
	}
	if !c.Created.IsZero() {
		m["createdAt"] = c.Created.UTC().Format(time.RFC3339Nano)
	}
	return m
}

func noteJSON(n store.Note) map[string]any {
	m := map[string]any{"id": n.ID, "body": n.Body, "createdAt": n.Created.UTC().Format(time.RFC3339Nano)}
	if n.CustomerID != "" {
		m["customerId"] = n.CustomerID
	}
	return m
}
