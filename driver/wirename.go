package driver

import (
	"errors"
	"fmt"
	"strings"
)

// MaxWireNameLen is the longest tool name the model APIs accept, in bytes
// (OpenAI and Anthropic both require ^[A-Za-z0-9_-]{1,64}$).
const MaxWireNameLen = 64

// WireName returns the name a tool is offered under on a model API: the
// spec name with each "." replaced by "__" ("customer.get" becomes
// "customer__get", "mcp.memory.search_nodes" becomes
// "mcp__memory__search_nodes"). Nothing else changes.
//
// The mapping is reversible only for the names of a document that pass
// [WireNames]; check a document's names with it before offering any.
func WireName(spec string) string {
	return strings.ReplaceAll(spec, ".", "__")
}

// SpecName maps a tool name received from a model API back to a spec name:
// each "__" becomes ".", left to right without overlap ("a___b" becomes
// "a._b"). Nothing else changes: case, blanks, control characters and
// non-ASCII bytes are kept, and a name that is not a wire name at all is
// mapped by the same rule. It is never an error and never cleans a name:
// the result goes to the [Caller], which refuses it unless it is, byte for
// byte, one of the step's allowed tools ("customer__GET" becomes
// "customer.GET", which no step allows when "customer.get" is meant).
//
// A model that sends a spec name itself ("customer.get", dots and all)
// gets that name: it is the allowed tool, named exactly.
func SpecName(wire string) string {
	return strings.ReplaceAll(wire, "__", ".")
}

// WireNameError is a tool name that cannot be offered on a model API.
type WireNameError struct {
	// Name is the spec name.
	Name string
	// Other is the other spec name with the same wire name, when that is
	// the problem ("" otherwise).
	Other string
	// Wire is Name's wire name ([WireName]).
	Wire string
	// Reason says what is wrong, in words.
	Reason string
}

func (e *WireNameError) Error() string {
	if e.Other != "" {
		return fmt.Sprintf("tool names %q and %q have the same wire name %q (each \".\" becomes \"__\"); rename one", e.Other, e.Name, e.Wire)
	}
	return fmt.Sprintf("tool name %q cannot be offered to a model: %s", e.Name, e.Reason)
}

// WireNames returns the wire name of each name (spec name -> wire name)
// and checks that the mapping is reversible for this set of names, so
// that [SpecName] gives back exactly the name offered:
//
//   - no two names have the same wire name ("a.b" and "a__b" both become
//     "a__b");
//   - every name round-trips (SpecName(WireName(n)) == n): a name holding
//     "__" or "_." does not ("a__b" comes back as "a.b", "a_.b" as "a._b");
//   - every wire name matches ^[A-Za-z0-9_-]{1,64}$ (a spec name of up to
//     128 bytes may have a wire name longer than 64).
//
// The error, when not nil, joins one *[WireNameError] per problem, in the
// order of names (errors.As finds the first; Unwrap() []error gives all).
// The map then still holds every name. A name listed twice is not a
// problem.
func WireNames(names []string) (map[string]string, error) {
	wires := make(map[string]string, len(names))
	byWire := make(map[string]string, len(names))
	var errs []error
	for _, n := range names {
		if _, seen := wires[n]; seen {
			continue
		}
		w := WireName(n)
		wires[n] = w
		if other, taken := byWire[w]; taken {
			errs = append(errs, &WireNameError{Name: n, Other: other, Wire: w, Reason: "another name has the same wire name"})
			continue
		}
		byWire[w] = n
		if reason := wireProblem(n, w); reason != "" {
			errs = append(errs, &WireNameError{Name: n, Wire: w, Reason: reason})
		}
	}
	return wires, errors.Join(errs...)
}

func wireProblem(spec, wire string) string {
	if back := SpecName(wire); back != spec {
		return fmt.Sprintf("its wire name %q maps back to %q, not to itself (a name must not hold \"__\" or \"_.\")", wire, back)
	}
	if wire == "" {
		return "it is empty"
	}
	if len(wire) > MaxWireNameLen {
		return fmt.Sprintf("its wire name %q is %d bytes long; model APIs accept at most %d", wire, len(wire), MaxWireNameLen)
	}
	for i := 0; i < len(wire); i++ {
		c := wire[i]
		if c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			continue
		}
		what := fmt.Sprintf("%q", string(rune(c)))
		if c >= 0x80 {
			what = "a non-ASCII byte"
		}
		return fmt.Sprintf("its wire name %q holds %s; wire names are ^[A-Za-z0-9_-]{1,64}$", wire, what)
	}
	return ""
}
