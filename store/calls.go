package store

import (
	"fmt"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// Decision is what the runtime decided about a tool call before running it.
type Decision string

const (
	DecisionAllowed Decision = "allowed" // on the step's allowedTools, no approval needed or one was consumed
	DecisionRefused Decision = "refused" // not allowed; never run
	DecisionWaiting Decision = "waiting" // needs a person's approval first
)

// CallState is where a tool call is.
type CallState string

const (
	CallStarted        CallState = "started"         // running; no outcome recorded yet
	CallSucceeded      CallState = "succeeded"       // ran; Result holds its output
	CallFailed         CallState = "failed"          // ran and failed; Error says why
	CallOutcomeUnknown CallState = "outcome_unknown" // was started, the process died before its outcome was recorded
	CallRefused        CallState = "refused"         // never ran
	CallWaiting        CallState = "waiting"         // waits for an approval
)

// CallKey names one tool call: the Index-th call (from 0) in one attempt
// at one step of a run.
type CallKey struct {
	Run     string
	Step    string
	Attempt int
	Index   int
}

func (k CallKey) String() string {
	return fmt.Sprintf("call %d of step %q attempt %d of run %s", k.Index, k.Step, k.Attempt, k.Run)
}

// Call is one tool call an agent made.
type Call struct {
	CallKey
	Tool       string         // the name exactly as the agent sent it, any bytes
	DefDigest  string         // digest of the tool definition in force, "" when the tool is unknown
	Args       jsontext.Value // the arguments, canonical JSON
	ArgsDigest string         // SHA-256 of Args
	Decision   Decision
	// Code is the stable code of a refusal ("not-allowed", "drifted",
	// ...; see package runtime), "" for a call that was not refused.
	Code          string
	Reason        string // why it was refused, or is waiting
	State         CallState
	SideEffecting bool
	Result        jsontext.Value // the tool's result (JSON), nil until it succeeded
	Error         string
	Started       time.Time
	Finished      time.Time // zero until the call has an outcome
}

// CallFilter narrows [Store.Calls]. The zero value matches every call.
type CallFilter struct {
	Step    string      // "" matches every step
	Attempt int         // 0 matches every attempt
	Index   *int        // nil matches every index
	States  []CallState // empty matches every state
}
