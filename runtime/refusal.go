package runtime

// Code is the stable short name of why a call was refused. It is stored
// in its own column of the call's row (store.Call.Code) and in the
// call.refused audit record, never parsed back out of message text;
// docs/runtime.md lists every code.
type Code string

// Refusal codes.
const (
	CodeNotAllowed       Code = "not-allowed"       // not on the executing step's allowedTools
	CodeUnknownStep      Code = "unknown-step"      // the call names a step the document does not have
	CodeUnresolved       Code = "unresolved"        // on the list, but not in the registry or not embedded
	CodeUnavailable      Code = "unavailable"       // in the registry, but nothing connected runs it
	CodeInvalidArguments Code = "invalid-arguments" // not a JSON object valid against the inputSchema
	CodeDrifted          Code = "drifted"           // the live definition changed since import
	CodeDenied           Code = "denied"            // a person denied the approval
	CodeExpired          Code = "expired"           // the approval request expired undecided
	CodeTooLarge         Code = "too-large"         // the name and arguments are over the size limit
	CodeCallLimit        Code = "call-limit"        // the step made as many calls as it may
	CodeOutputInvalid    Code = "output-invalid"    // the result did not match the outputSchema
	CodePolicy           Code = "policy"            // a rule of the harness's policy refused it, or failed to evaluate
	// A model reply the driver refused whole (driver.ReplyError): none of
	// its calls ran.
	CodeReplyTruncated Code = "reply-truncated" // the reply was cut off (length, max_tokens)
	CodeReplyFiltered  Code = "reply-filtered"  // the provider's filter stopped it
	CodeReplyRefused   Code = "reply-refused"   // the model refused
	CodeReplyMalformed Code = "reply-malformed" // other stop reason, duplicate or missing call ids
)

// Refusal is a refused call: its code and the message the agent is
// shown (which names the step and the tool as received).
type Refusal struct {
	Code    Code
	Message string
}

func (r *Refusal) Error() string { return string(r.Code) + ": " + r.Message }
