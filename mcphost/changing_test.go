package mcphost_test

import (
	"context"
	"testing"
	"time"

	"github.com/openplaybook/openplaybook/mcphost"
	"github.com/openplaybook/openplaybook/mcphost/mcptest"
)

func TestChangingServer(t *testing.T) {
	t.Parallel()
	bin := mcptest.BuildChangingServer(t)

	probeA := "riskClass=read sideEffecting=false requiresApproval=unknown"
	probeB := "riskClass=unknown sideEffecting=true requiresApproval=unknown"
	schemaA := `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`
	schemaB := `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"id":{"type":"string"},"force":{"type":"boolean"}},"required":["id","force"]}`
	check := func(t *testing.T, tl mcphost.Tool, desc, schema, out, r string) {
		t.Helper()
		d := tl.Definition
		if d.Description != desc || string(d.InputSchema) != schema || string(d.OutputSchema) != out || risk(tl) != r {
			t.Errorf("probe = %q %s %s %s\nwant   %q %s %s %s", d.Description, d.InputSchema, d.OutputSchema, risk(tl), desc, schema, out, r)
		}
	}

	t.Run("variants", func(t *testing.T) {
		t.Parallel()
		a := tools(t, connect(t, mcptest.ChangingServer(bin, "chg", "a")))
		b := tools(t, connect(t, mcptest.ChangingServer(bin, "chg", "b")))
		check(t, a["probe"], "Reads a widget's status (variant a).", schemaA, `{"type":"object","properties":{"status":{"type":"string"}}}`, probeA)
		check(t, b["probe"], "Resets a widget (variant b).", schemaB, "", probeB)
		// No annotations at all: unknown.
		if r := risk(a["quiet"]); r != "riskClass=unknown sideEffecting=unknown requiresApproval=unknown" {
			t.Errorf("quiet: %s", r)
		}
		// go-sdk writes "readOnlyHint": false for annotations with only a
		// title: on the wire that is an explicit false.
		if r := risk(a["titled"]); r != "riskClass=unknown sideEffecting=true requiresApproval=unknown" {
			t.Errorf("titled: %s", r)
		}
	})

	t.Run("list_changed", func(t *testing.T) {
		t.Parallel()
		s := connect(t, mcptest.ChangingServer(bin, "chg", "a"))
		ctx := context.Background()
		check(t, tools(t, s)["probe"], "Reads a widget's status (variant a).", schemaA, `{"type":"object","properties":{"status":{"type":"string"}}}`, probeA)
		ch := s.Changed()
		epoch := s.Epoch()
		res, err := s.Call(ctx, "flip", nil)
		if err != nil || resultText(t, res) != "variant b" {
			t.Fatalf("flip: %v %+v", err, res)
		}
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("Changed did not fire within 5s")
		}
		if s.Epoch() <= epoch {
			t.Errorf("Epoch %d after a notification, was %d", s.Epoch(), epoch)
		}
		check(t, tools(t, s)["probe"], "Resets a widget (variant b).", schemaB, "", probeB)
		res, err = s.Call(ctx, "probe", map[string]any{"id": "w1", "force": true})
		if err != nil || resultText(t, res) != "probe variant b" {
			t.Fatalf("probe: %v %+v", err, res)
		}
	})
}
