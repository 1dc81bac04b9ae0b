package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/store"
)

// Tool executes calls to one registry entry. The runtime calls it only
// for a call that passed the decision path (allow-list, resolution,
// drift, arguments, approval), under a context bounded by the call
// timeout and carrying the call's [CallInfo].
//
// args is the call's arguments as the runtime decided them: an RFC 8785
// canonical JSON object, valid against the embedded inputSchema. Call
// returns the result, or an error whose text the agent is shown (after
// secret redaction); it must never put a credential in that text. What a
// tool returns is checked against the outputSchema by the runtime.
type Tool interface {
	Call(ctx context.Context, args jsontext.Value) (Result, error)
}

// Result is what a [Tool] returns.
type Result struct {
	// Content is the result as one JSON value. It is ignored when Commit
	// is set.
	Content jsontext.Value
	// Commit, when set, is the tool's effect on the runtime's own store
	// (built-ins over its primitives): the runtime runs it inside the
	// transaction that records the call's outcome, so the effect and its
	// record are one atomic change (after a crash, both happened or
	// neither did), and uses what it returns as the result. It must only
	// change the store through tx (see [store.Store.Tx]).
	Commit func(tx store.Tx) (jsontext.Value, error)
}

// InStore is implemented by tools whose every effect is the Commit of the
// [Result] their Call returns (the built-ins over the runtime's own
// store): Call itself changes nothing, inside the process or out, and
// may run again without harm. The runtime then runs Call before it
// records a side-effecting call as started, and records the start, the
// effect and the outcome in one transaction, so that after a crash all of
// them happened or none did (docs/runtime.md, "Built-ins' effects"). Such
// a Call sees a [CallInfo] whose Index is -1.
type InStore interface {
	Tool
	InStore()
}

// Live is implemented by tools whose definition can change while a run
// holds it (an MCP server's). Current returns the definition the provider
// gives now, or an error when it cannot say (the server is gone, lists the
// tool no more, or lists it twice); the runtime compares it with the
// definition the run imported before every call and refuses the call when
// it cannot.
type Live interface {
	Tool
	Current(ctx context.Context) (playbook.Definition, error)
}

// CallInfo is where a call stands in its run; the runtime puts it in the
// context it gives [Tool.Call].
type CallInfo struct {
	Run, Step string
	// Attempt counts the step's attempts from 1; Index counts the
	// attempt's calls from 0 (-1 for a read call not recorded yet).
	Attempt, Index int
	// Agent is the step's agent name.
	Agent string
	// Redact removes secret values from text a tool stores; never nil in
	// a context the runtime built.
	Redact func(string) string
}

type callInfoKey struct{}

// WithCallInfo returns ctx carrying ci.
func WithCallInfo(ctx context.Context, ci CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, ci)
}

// CallInfoOf returns the [CallInfo] in ctx. Without one, it returns the
// zero CallInfo with an identity Redact and false.
func CallInfoOf(ctx context.Context) (CallInfo, bool) {
	ci, ok := ctx.Value(callInfoKey{}).(CallInfo)
	if ci.Redact == nil {
		ci.Redact = func(s string) string { return s }
	}
	return ci, ok
}

// IdempotencyKey derives a provider idempotency key from the call's place
// in the run ("opb_" and 32 hex digits of SHA-256 over run, step, attempt
// and index), so that a call a provider received before a crash is not
// applied twice if a person has it run again. It is "" for a call with no
// recorded place (Index < 0).
func (ci CallInfo) IdempotencyKey() string {
	if ci.Run == "" || ci.Index < 0 {
		return ""
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d\x00%d", ci.Run, ci.Step, ci.Attempt, ci.Index)))
	return "opb_" + hex.EncodeToString(sum[:16])
}

// DefiniteError marks a tool error whose outcome is known: the provider
// answered that the call failed, or the call was never sent (its arguments
// were refused before any request). A side-effecting call that fails with
// any other error (a timeout, a cut connection, a server that exited, an
// answer that could not be read) may have taken effect: the runtime records
// it as outcome-unknown and waits for a person instead of retrying it.
type DefiniteError struct{ Err error }

func (e *DefiniteError) Error() string { return e.Err.Error() }
func (e *DefiniteError) Unwrap() error { return e.Err }

// Definite wraps err as a [DefiniteError]; nil stays nil.
func Definite(err error) error {
	if err == nil {
		return nil
	}
	return &DefiniteError{Err: err}
}

// IsDefinite reports whether err (or an error it wraps) is a
// [DefiniteError]. Only the tool knows whether its request was answered,
// so nothing else counts (a context error does not).
func IsDefinite(err error) bool {
	var d *DefiniteError
	return errors.As(err, &d)
}
