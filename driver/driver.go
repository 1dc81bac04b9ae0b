// Package driver defines how an agent runs one agent step: the runtime
// hands a [Driver] the step's purpose, the run's input, what earlier steps
// produced and the step's allowed tools, and the driver makes tool calls
// through a [Caller], which is the runtime's single decision path. A
// driver never executes a tool itself and never sees a tool the step does
// not allow; what it asks for anyway is refused by the Caller.
//
// Implementations: package driver/transcript replays a recorded list of
// calls; driver/openai and driver/anthropic run a model through the
// OpenAI Chat Completions and Anthropic Messages APIs.
package driver

import (
	"context"
	"errors"

	"github.com/go-json-experiment/json/jsontext"
)

// Tool is one tool offered to the agent: an allowed tool of the executing
// step, as its embedded definition describes it.
type Tool struct {
	// Name is the tool name as the document spells it ("customer.get").
	Name        string
	Description string
	// InputSchema is the tool's JSON Schema (an object).
	InputSchema jsontext.Value
}

// Call is one tool call an agent makes.
type Call struct {
	// ID is the provider's id of the call ("" when it has none); drivers
	// use it to pair results with calls.
	ID string
	// Name is the tool name exactly as the agent sent it, mapped back from
	// a wire name with [SpecName] where the provider needs one. It is never
	// cleaned: the Caller compares it byte for byte.
	Name string
	// Arguments is the arguments as the agent sent them. It may be invalid
	// JSON; the Caller refuses such a call.
	Arguments jsontext.Value
}

// Result is the runtime's answer to a call, to be shown to the agent.
type Result struct {
	// Content is the tool's result (JSON) when the call ran.
	Content jsontext.Value
	// Error, when not empty, is a tool error for the agent: a refusal, an
	// invalid argument, a failure. The agent may go on.
	Error string
}

// Prior is what an earlier step of the run produced.
type Prior struct {
	StepID string
	Output jsontext.Value
}

// StepInput is everything a driver sees of the run.
type StepInput struct {
	RunID   string
	StepID  string
	Agent   string
	Purpose string
	// Input is the run's input (JSON, valid against the document's
	// inputSchema).
	Input jsontext.Value
	// Prior holds the outputs of the steps run before this one, in order.
	Prior []Prior
	// Tools are the step's allowed tools that resolve, in allowedTools
	// order.
	Tools []Tool
	// MaxCalls is the most tool calls the step may make (the Caller
	// enforces it too).
	MaxCalls int
}

// Caller makes a tool call through the runtime's decision path. It returns
// a Result for everything the agent should see (including refusals); it
// returns an error only when the step must stop now: the call waits for a
// person ([ErrSuspended]), the step used up its calls ([ErrCallLimit]), or
// the runtime failed. A driver returns such an error unchanged.
type Caller interface {
	Call(ctx context.Context, c Call) (Result, error)
}

// Driver runs one agent step and returns its output: the agent's final
// answer as JSON (a string for a model's text, or any JSON value).
type Driver interface {
	RunStep(ctx context.Context, in StepInput, caller Caller) (jsontext.Value, error)
}

var (
	// ErrSuspended: the step waits for a person (a tool call needs
	// approval, or a call's outcome is unknown). The runtime persists the
	// step and runs it again on resume; calls already made are answered
	// from the store, not executed again.
	ErrSuspended = errors.New("the step waits for a person's decision")
	// ErrCallLimit: the step made as many tool calls as it may.
	ErrCallLimit = errors.New("the step reached its tool call limit")
)
