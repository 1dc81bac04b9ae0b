package driver_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/playbook"
)

func TestWireNameExamples(t *testing.T) {
	for spec, wire := range map[string]string{
		"customer.get":            "customer__get",
		"mcp.memory.search_nodes": "mcp__memory__search_nodes",
		"billing_customer.get":    "billing_customer__get",
		"mcp.acme.search-orders":  "mcp__acme__search-orders",
		"today":                   "today",
		"a._b":                    "a___b",
	} {
		if got := driver.WireName(spec); got != wire {
			t.Errorf("WireName(%q) = %q, want %q", spec, got, wire)
		}
		if got := driver.SpecName(wire); got != spec {
			t.Errorf("SpecName(%q) = %q, want %q", wire, got, spec)
		}
	}
}

// Every tool name of the example playbooks, embedded or allowed, has a
// wire name that maps back to it.
func TestWireNamesRoundTripExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := playbook.Read(file, src, nil)
		if doc.OpenPlaybook == nil {
			continue // a data file beside the playbooks
		}
		var names []string
		for _, tool := range doc.Tools {
			names = append(names, playbook.Str(tool.Name))
		}
		for _, s := range doc.Steps {
			names = append(names, s.AllowedTools.Values()...)
		}
		if len(names) == 0 {
			t.Errorf("%s: no tool names", file)
		}
		wires, err := driver.WireNames(names)
		if err != nil {
			t.Errorf("%s: %v", file, err)
		}
		for _, n := range names {
			w := wires[n]
			if driver.SpecName(w) != n || strings.Contains(w, ".") || len(w) > driver.MaxWireNameLen {
				t.Errorf("%s: %q -> %q -> %q", file, n, w, driver.SpecName(w))
			}
		}
	}
}

func TestWireNamesProblems(t *testing.T) {
	long := strings.Repeat("a", 30) + "." + strings.Repeat("b", 32) // 63 bytes, wire 64
	longer := long + "b"
	tests := []struct {
		names []string
		want  []string // substrings of the error, in order; nil: no error
	}{
		{[]string{"customer.get", "customer.get", "charge.refund"}, nil},
		{[]string{long}, nil},
		{[]string{"a.b", "a__b"}, []string{`tool names "a.b" and "a__b" have the same wire name "a__b"`}},
		{[]string{"a__b", "a.b"}, []string{`tool names "a__b" and "a.b" have the same wire name "a__b"`}},
		{[]string{"a__b"}, []string{`tool name "a__b" cannot be offered to a model: its wire name "a__b" maps back to "a.b"`}},
		{[]string{"a_.b"}, []string{`"a_.b"`, `maps back to "a._b"`}},
		{[]string{"x.y_", "x_.y"}, []string{`"x_.y"`}},
		{[]string{longer}, []string{"is 65 bytes long; model APIs accept at most 64"}},
		{[]string{"customer.get ", ""}, []string{`holds " "`, `tool name "" cannot be offered to a model: it is empty`}},
		{[]string{"customer\u2024get"}, []string{"holds a non-ASCII byte"}},
	}
	for _, tc := range tests {
		wires, err := driver.WireNames(tc.names)
		for _, n := range tc.names {
			if wires[n] != driver.WireName(n) {
				t.Errorf("WireNames(%q)[%q] = %q", tc.names, n, wires[n])
			}
		}
		if tc.want == nil {
			if err != nil {
				t.Errorf("WireNames(%q): %v", tc.names, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("WireNames(%q): no error, want %q", tc.names, tc.want)
			continue
		}
		msg := err.Error()
		for _, w := range tc.want {
			i := strings.Index(msg, w)
			if i < 0 {
				t.Errorf("WireNames(%q) = %q, want it to hold %q", tc.names, msg, w)
				break
			}
			msg = msg[i+len(w):]
		}
		var we *driver.WireNameError
		if !errors.As(err, &we) || we.Wire != driver.WireName(we.Name) {
			t.Errorf("WireNames(%q): %v is not a *WireNameError", tc.names, err)
		}
	}
}

// Names a model invents map, deterministically and without cleaning, to
// names that are not the allowed ones: the Caller then refuses them.
func TestSpecNameOfHostileWireNames(t *testing.T) {
	allowed := []string{"customer.get", "charge.refund", "mcp.memory.search_nodes"}
	wires, err := driver.WireNames(allowed)
	if err != nil {
		t.Fatal(err)
	}
	for _, wire := range []string{
		"customer__GET",
		"Customer__get",
		"customer__get ",
		" customer__get",
		"customer__get\n",
		"customer__get\x00",
		"customer___get",
		"customer_get",
		"customer-get",
		"customer\u2024get",
		"customer__g\u0435t", // Cyrillic e
		"customer\uff3f\uff3fget",
		"customer__get\u200b",
		"mcp__memory__search_nodes__",
		"mcp__memory__search-nodes",
		"",
	} {
		spec := driver.SpecName(wire)
		for _, a := range allowed {
			if spec == a {
				t.Errorf("SpecName(%q) = %q, an allowed name", wire, spec)
			}
		}
		if spec != driver.SpecName(wire) {
			t.Errorf("SpecName(%q) is not deterministic", wire)
		}
		if want := strings.ReplaceAll(wire, "__", "."); spec != want {
			t.Errorf("SpecName(%q) = %q, want %q (nothing but __ changes)", wire, spec, want)
		}
	}
	// The offered names, and a spec name sent as is, are the allowed ones.
	for _, a := range allowed {
		if got := driver.SpecName(wires[a]); got != a {
			t.Errorf("SpecName(%q) = %q, want %q", wires[a], got, a)
		}
		if got := driver.SpecName(a); got != a {
			t.Errorf("SpecName(%q) = %q", a, got)
		}
	}
}

func FuzzWireNames(f *testing.F) {
	for _, s := range []string{"customer.get", "a__b", "a_.b", "a._b", "x", "mcp.memory.search_nodes"} {
		f.Add(s, "a.b")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		wires, err := driver.WireNames([]string{a, b})
		if err != nil {
			return
		}
		// Accepted names round-trip and never share a wire name.
		for _, n := range []string{a, b} {
			if driver.SpecName(wires[n]) != n {
				t.Fatalf("%q does not round-trip", n)
			}
		}
		if a != b && wires[a] == wires[b] {
			t.Fatalf("%q and %q share %q", a, b, wires[a])
		}
	})
}
