package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/connector/stripe"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/store"
)

// writeFunc performs a built-in's write inside the transaction that
// records the call's outcome, so the write and its record are one atomic
// step: after a crash either both happened or neither did.
type writeFunc func(tx *store.Tx) (any, error)

// dispatch executes an allowed call on what the registry says provides the
// tool. It returns the result, or a write to run in the recording
// transaction (built-ins that change the store), or an error.
func (e *Engine) dispatch(ctx context.Context, key store.CallKey, ti *toolInfo, args jsontext.Value) (any, writeFunc, error) {
	switch ti.entry.Origin.Kind {
	case "builtin":
		return e.builtin(ctx, key, ti.def.Name, args)
	case "connector":
		if ti.entry.Origin.Name != stripe.Provider || e.opt.Env == nil || e.opt.Env.Stripe == nil {
			return nil, nil, fmt.Errorf("no %s connection is set up", ti.entry.Origin.Name)
		}
		// The idempotency key is derived from the call's place in the run,
		// so a call Stripe received before a crash is not applied twice if
		// a person has it run again.
		ctx = stripe.WithIdempotencyKey(ctx, idempotencyKey(key))
		r, err := e.opt.Env.Stripe.Call(ctx, ti.def.Name, args)
		return r, nil, err
	case "mcp":
		server, tool, _ := playbook.MCPParts(ti.def.Name)
		s := e.opt.Env.Servers[server]
		if s == nil {
			return nil, nil, fmt.Errorf("MCP server %q is not connected", server)
		}
		res, err := s.Call(ctx, tool, []byte(args))
		if err != nil {
			return nil, nil, err
		}
		if res.IsError {
			return nil, nil, errors.New("the tool reported an error: " + mcpText(res.Content))
		}
		if res.StructuredContent != nil {
			return res.StructuredContent, nil, nil
		}
		text := mcpText(res.Content)
		var v any
		if json.Unmarshal([]byte(text), &v) == nil {
			return v, nil, nil
		}
		return text, nil, nil
	}
	return nil, nil, fmt.Errorf("the registry gives no way to run %s", quote(ti.def.Name))
}

func idempotencyKey(k store.CallKey) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d\x00%d", k.Run, k.Step, k.Attempt, k.Index)))
	return "opb_" + hex.EncodeToString(sum[:16])
}

// builtin runs the built-in primitives over the store (builtin/catalog.json
// defines them). Reads run here; writes run in the recording transaction.
func (e *Engine) builtin(ctx context.Context, key store.CallKey, name string, raw jsontext.Value) (any, writeFunc, error) {
	var args struct {
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
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, nil, fmt.Errorf("reading the arguments: %v", err)
	}
	s := e.opt.Store
	switch name {
	case "customer.get":
		c, err := s.GetCustomer(ctx, args.CustomerID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, fmt.Errorf("no customer has id %q", args.CustomerID)
		}
		if err != nil {
			return nil, nil, err
		}
		return map[string]any{"customer": customerJSON(c)}, nil, nil
	case "customer.search":
		limit := args.Limit
		if limit <= 0 {
			limit = 10
		}
		cs, err := s.SearchCustomers(ctx, args.Query, limit)
		if err != nil {
			return nil, nil, err
		}
		out := make([]any, 0, len(cs))
		for _, c := range cs {
			out = append(out, customerJSON(c))
		}
		return map[string]any{"customers": out}, nil, nil
	case "note.list":
		limit := args.Limit
		if limit <= 0 {
			limit = 20
		}
		ns, err := s.ListNotes(ctx, args.CustomerID, args.Tag, limit)
		if err != nil {
			return nil, nil, err
		}
		out := make([]any, 0, len(ns))
		for _, n := range ns {
			out = append(out, noteJSON(n))
		}
		return map[string]any{"notes": out}, nil, nil
	case "note.add":
		return nil, func(tx *store.Tx) (any, error) {
			n, err := tx.AddNote(store.Note{CustomerID: e.opt.Redact(args.CustomerID), Body: e.opt.Redact(args.Body), Tags: e.redactAll(args.Tags), Author: e.agentOf(key.Step), Run: key.Run, Step: key.Step})
			if err != nil {
				return nil, err
			}
			return map[string]any{"note": noteJSON(n)}, nil
		}, nil
	case "today.surface":
		return nil, func(tx *store.Tx) (any, error) {
			it, err := tx.SurfaceToday(store.TodayItem{Title: e.opt.Redact(args.Title), Summary: e.opt.Redact(args.Summary), Priority: e.opt.Redact(args.Priority),
				CustomerID: e.opt.Redact(args.CustomerID), Link: e.opt.Redact(args.Link), Run: key.Run, Step: key.Step})
			if err != nil {
				return nil, err
			}
			return map[string]any{"itemId": it.ID, "surfacedAt": it.Created.UTC().Format(time.RFC3339Nano)}, nil
		}, nil
	}
	return nil, nil, fmt.Errorf("this runtime has no built-in %s", quote(name))
}

// redactAll redacts each of ss: built-ins write every value an agent
// gives them through the redactor, not only the free text.
func (e *Engine) redactAll(ss []string) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = e.opt.Redact(s)
	}
	return out
}

func (e *Engine) agentOf(step string) string {
	if si := e.im.steps[step]; si != nil {
		return playbook.Str(si.step.Agent)
	}
	return ""
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

// mcpText joins the text parts of an MCP tool result.
func mcpText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}
