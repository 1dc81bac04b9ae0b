// Package driver defines how an agent runs one agent step: the runtime
// hands a [Driver] the step's purpose, the run's input, what earlier steps
// produced and the step's allowed tools, and the driver makes tool calls
// through a [Caller], which is the runtime's single decision path. A
// driver never executes a tool itself and never sees a tool the step does
// not allow; what it asks for anyway is refused by the Caller.
//
// Implementations: package driver/transcript replays a recorded list of
// calls; driver/openai, driver/openairesponses and driver/anthropic run a
// model through the OpenAI Chat Completions, OpenAI Responses and
// Anthropic Messages APIs.
package driver

import (
	"context"
	"errors"
	"fmt"

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
	// Reasoning is the model's own text before the call, as the model
	// wrote it: the text of the reply that carries the call (Chat
	// Completions message content, Responses output_text, Anthropic text
	// blocks), or, when that reply has none, the last non-blank text of
	// an earlier reply in this run of the step; "" when there is none
	// (a call replayed from [StepInput.Made], a driver without a model).
	// It is untrusted and informational only: the model's claim, checked
	// by nothing, never part of a decision, and it may hold any bytes
	// (markup, control characters, invalid UTF-8). The runtime shows it,
	// trimmed, clipped and redacted, to the person asked to approve the
	// call (approval.requested's agentText).
	Reasoning string
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

// MadeCall is a call the step's attempt made before this run of the step
// (the step was resumed), or a call that ran in a failed attempt this one
// retries, with what it returned: from the store, secrets redacted. A model driver puts them in the conversation before it asks
// the model for more, so the model goes on instead of starting over; the
// runtime answers a call asked again from the store, never running it
// twice.
type MadeCall struct {
	// ID is the call's id in the conversation: "made_" and its index in
	// the attempt ("made_a" and the failed attempt, "_" and the index, for
	// a call of a failed attempt this one retries).
	ID string
	// Name is the tool name as the agent sent it; Arguments its arguments
	// as recorded (canonical JSON, redacted).
	Name      string
	Arguments jsontext.Value
	// Result is what the agent was answered.
	Result Result
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
	// Made are the calls this attempt of the step already made and that
	// have an answer (succeeded, failed or refused), in order, after
	// those that ran in the failed attempts it retries (runtime
	// Session.Retry); empty for a step run the first time.
	Made []MadeCall
}

// Caller makes a tool call through the runtime's decision path. It returns
// a Result for everything the agent should see (including refusals); it
// returns an error only when the step must stop now: the call waits for a
// person ([ErrSuspended]), the step used up its calls ([ErrCallLimit]), or
// the runtime failed. A driver returns such an error unchanged.
//
// A driver passes the Caller only the calls of a model reply it accepted:
// a reply whose stop reason asks for tool calls and whose call ids are
// each given once in the step. A reply refused whole (cut off, filtered,
// refused by the model, malformed) has none of its calls passed to the
// Caller, so none runs: RunStep returns a *[ReplyError] that lists them,
// for the runtime to record as refused under the error's Code.
type Caller interface {
	Call(ctx context.Context, c Call) (Result, error)
}

// Deterministic is implemented by a driver whose step, run again, asks
// exactly the calls it asked before, in the same order (a recorded
// transcript). The runtime then answers them from the store as they come,
// and does not hold back a resumed step's new side-effecting calls to a
// tool that already ran (see docs/drivers.md, "Resumed steps"), as it
// does for a model, which may reword a call it already made.
type Deterministic interface {
	Deterministic() bool
}

// Continuing is implemented by a driver whose agent keeps its own state
// across a resume of its step (an external agent, an MCP client): the
// runtime does not run it again from the start, so a call it makes after
// a resume is a new call, not one it made before reworded. The runtime
// then holds back a resumed step's new side-effecting call only while a
// call to the same tool that was in flight when the step stopped
// (outcome-unknown) has not been answered to the agent (see
// docs/drivers.md, "Resumed steps").
type Continuing interface {
	Continuing() bool
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
	// ErrAwaitAgent: the step's agent is external (an MCP client, see
	// package driver/external) and none is connected to the run. The
	// runtime records the run as waiting for its agent (status waiting,
	// reason "agent"); resuming the run while an agent is connected runs
	// the step on, answering the calls the attempt already made from the
	// store.
	ErrAwaitAgent = errors.New("the step waits for its agent (an MCP client) to connect")
	// ErrReplyRefused: a model driver refused a reply of the model whole,
	// and none of its tool calls ran. The error is a *[ReplyError].
	ErrReplyRefused = errors.New("the model's reply was refused; none of its tool calls ran")
	// ErrStepTimeout: a model driver's step ran out of its whole-step
	// deadline (the binding's stepTimeout). No request and no tool call
	// started after the deadline; a call that was running then ran to
	// its end.
	ErrStepTimeout = errors.New("the step ran out of its stepTimeout")
)

// PendingError is the error of a call that waits for a person: it names
// the approval a person decides, and unwraps to [ErrSuspended].
type PendingError struct {
	// Approval is the id of the approval ("apr_..."), "" when unknown.
	Approval string
}

func (e *PendingError) Error() string {
	if e.Approval == "" {
		return ErrSuspended.Error()
	}
	return ErrSuspended.Error() + " (" + e.Approval + ")"
}

// Unwrap returns [ErrSuspended].
func (e *PendingError) Unwrap() error { return ErrSuspended }

// Usage is what one model turn (one request and its response) cost, as
// the provider reported it, in tokens.
type Usage struct {
	// Provider is the driver's name ("openai", "anthropic"); Model the
	// model asked for.
	Provider, Model string
	// Turn is the request's number in this run of the step, from 1.
	Turn int
	// InputTokens are all the input tokens of the turn, those read from
	// and written to a prompt cache included (OpenAI
	// usage.prompt_tokens, Responses API usage.input_tokens; Anthropic
	// usage.input_tokens + cache_read_input_tokens +
	// cache_creation_input_tokens).
	InputTokens int64
	// OutputTokens are the tokens generated (OpenAI
	// usage.completion_tokens, Responses API usage.output_tokens;
	// Anthropic usage.output_tokens).
	OutputTokens int64
	// CachedInputTokens are the input tokens read from a prompt cache
	// (OpenAI usage.prompt_tokens_details.cached_tokens, Responses API
	// usage.input_tokens_details.cached_tokens; Anthropic
	// usage.cache_read_input_tokens).
	CachedInputTokens int64
	// CacheWriteTokens are the input tokens written to a prompt cache
	// (Anthropic usage.cache_creation_input_tokens; OpenAI
	// usage.prompt_tokens_details.cache_write_tokens where a server
	// reports it).
	CacheWriteTokens int64
}

// UsageRecorder is implemented by a [Caller] that records what each model
// turn cost (the runtime's records it in the run's audit log as
// model.usage). A model driver that is given such a Caller calls
// RecordUsage once per response that reports usage, before it acts on
// the response (so a refused reply's cost is recorded too). An error
// stops the step: the driver returns it unchanged.
type UsageRecorder interface {
	RecordUsage(ctx context.Context, u Usage) error
}

// ReplyCode is the stable code of a refused reply.
type ReplyCode string

const (
	// ReplyTruncated: the reply was cut off (OpenAI finish_reason
	// "length"; Anthropic stop_reason "max_tokens" or
	// "model_context_window_exceeded"; OpenAI Responses status
	// "incomplete" for max_output_tokens).
	ReplyTruncated ReplyCode = "reply-truncated"
	// ReplyFiltered: the provider filtered the reply (OpenAI
	// finish_reason "content_filter"; Responses status "incomplete" for
	// content_filter).
	ReplyFiltered ReplyCode = "reply-filtered"
	// ReplyRefused: the model refused (Anthropic stop_reason "refusal";
	// an OpenAI message with a refusal, or refusal content in a
	// Responses message).
	ReplyRefused ReplyCode = "reply-refused"
	// ReplyMalformed: the reply contradicts itself or the step: tool calls
	// under a stop reason that does not ask for them (OpenAI "stop",
	// Anthropic "end_turn", an unknown reason), a stop reason that asks for
	// tool calls without any, a call without an id, an id given twice in
	// the reply or reused from an earlier turn of the step.
	ReplyMalformed ReplyCode = "reply-malformed"
)

// ReplyError is the error of a step whose model reply a driver refused
// whole. None of Calls was passed to the [Caller]: none ran. It unwraps to
// [ErrReplyRefused].
type ReplyError struct {
	// Provider is the driver's name ("openai", "openai-responses",
	// "anthropic").
	Provider string
	Code     ReplyCode
	// StopReason is the reply's stop reason as the provider sent it
	// (finish_reason, stop_reason).
	StopReason string
	// Reason says why the reply was refused.
	Reason string
	// Calls are the reply's tool calls, in order, as a Caller would have
	// got them (nil when it had none).
	Calls []Call
}

func (e *ReplyError) Error() string {
	msg := fmt.Sprintf("%s: the model's reply was refused (%s): %s", e.Provider, e.Code, e.Reason)
	if n := len(e.Calls); n > 0 {
		msg += fmt.Sprintf("; none of its %d tool call(s) ran", n)
	}
	return msg
}

// Unwrap returns [ErrReplyRefused].
func (e *ReplyError) Unwrap() error { return ErrReplyRefused }
