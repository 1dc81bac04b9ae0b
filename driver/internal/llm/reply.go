package llm

import (
	"bytes"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/internal/jsonnum"
)

// Refused returns a *driver.ReplyError for a refused reply.
func Refused(provider string, code driver.ReplyCode, stop, reason string, calls []driver.Call) *driver.ReplyError {
	return &driver.ReplyError{Provider: provider, Code: code, StopReason: stop, Reason: reason, Calls: calls}
}

// IDs tracks the tool call ids of one step's replies.
type IDs map[string]bool

// Check returns the reason calls, the tool calls of one reply, are
// malformed by their ids ("" when they are not): a call without an id,
// an id given twice in the reply, or an id of an earlier reply of the
// step. It records nothing; [IDs.Add] does once the reply is accepted.
func (seen IDs) Check(calls []driver.Call) string {
	here := make(map[string]bool, len(calls))
	for i, c := range calls {
		switch {
		case c.ID == "":
			return fmt.Sprintf("tool call %d has no id", i+1)
		case here[c.ID]:
			return fmt.Sprintf("the id %q is given to two tool calls of the reply", c.ID)
		case seen[c.ID]:
			return fmt.Sprintf("the id %q of tool call %d was already used in an earlier turn of the step", c.ID, i+1)
		}
		here[c.ID] = true
	}
	return ""
}

// Add records the ids of calls, an accepted reply's.
func (seen IDs) Add(calls []driver.Call) {
	for _, c := range calls {
		seen[c.ID] = true
	}
}

// CanonicalArgs returns arguments as the runtime parses them, for the
// history the model sees: {} for empty (or blank) arguments, else the
// RFC 8785 canonical form. Arguments that are not valid JSON, or that
// hold a number a 64-bit float does not hold exactly (which the runtime
// refuses as sent), are returned as sent.
func CanonicalArgs(args []byte) jsontext.Value {
	if len(bytes.TrimSpace(args)) == 0 {
		return jsontext.Value("{}")
	}
	if _, bad := jsonnum.OutOfRange(args); bad {
		return jsontext.Value(bytes.Clone(args))
	}
	canon := jsontext.Value(bytes.Clone(args))
	if canon.Canonicalize() != nil {
		return jsontext.Value(bytes.Clone(args))
	}
	return canon
}

// MadeCalls returns the calls a resumed step already made as calls (for
// [IDs.Add]: a reply that reuses one of their ids is malformed).
func MadeCalls(made []driver.MadeCall) []driver.Call {
	out := make([]driver.Call, len(made))
	for i, m := range made {
		out[i] = driver.Call{ID: m.ID, Name: m.Name, Arguments: m.Arguments}
	}
	return out
}

// Unfilled returns the reason calls, the tool calls of one reply, are
// refused by their arguments ("" when they are not): a call to one of
// tools whose arguments are blank (no bytes, or only white space: the
// model sent none) while the tool's inputSchema needs some ("required"
// names a member, or "minProperties" is at least 1). Blank arguments are
// otherwise taken as {} ([CanonicalArgs], and the runtime), and a call
// with all its defaults must never run in place of one the model did not
// spell out. Calls to names not among tools are
// the Caller's to refuse.
func Unfilled(calls []driver.Call, tools []driver.Tool) string {
	for i, c := range calls {
		if len(bytes.TrimSpace(c.Arguments)) > 0 {
			continue
		}
		for _, t := range tools {
			if t.Name == c.Name && needsArgs(t.InputSchema) {
				return fmt.Sprintf("tool call %d (%q) has no arguments, and the tool's inputSchema needs some", i+1, c.Name)
			}
		}
	}
	return ""
}

// needsArgs reports whether schema, a JSON Schema, refuses {}: it
// requires a member or at least one property. A schema that is not an
// object is taken to need arguments (fail closed).
func needsArgs(schema jsontext.Value) bool {
	if len(schema) == 0 {
		return false
	}
	var s struct {
		Required      []jsontext.Value `json:"required"`
		MinProperties float64          `json:"minProperties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return string(bytes.TrimSpace(schema)) != "true"
	}
	return len(s.Required) > 0 || s.MinProperties >= 1
}
