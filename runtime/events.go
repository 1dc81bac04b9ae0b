package runtime

import (
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/policy"
)

// The run's audit log is a list of typed events: one [EventKind] constant
// and one payload struct per kind, here and nowhere else. Every writer
// (the session, the caller, [Decide]) builds its records from them, and
// readers can decode a record's Data into the payload of its Kind.
// docs/runtime.md describes each kind.

// EventKind is an audit record's kind.
type EventKind string

// Event kinds.
const (
	KindRunCreated         EventKind = "run.created"
	KindRunResumed         EventKind = "run.resumed"
	KindRunHarnessChanged  EventKind = "run.harness-changed"
	KindRunDrift           EventKind = "run.drift"
	KindRunWaiting         EventKind = "run.waiting"
	KindRunCompleted       EventKind = "run.completed"
	KindRunRejected        EventKind = "run.rejected"
	KindRunFailed          EventKind = "run.failed"
	KindRunRetried         EventKind = "run.retried"
	KindStepStarted        EventKind = "step.started"
	KindStepResumed        EventKind = "step.resumed"
	KindStepFinished       EventKind = "step.finished"
	KindStepFailed         EventKind = "step.failed"
	KindStepRetried        EventKind = "step.retried"
	KindStepCallLimit      EventKind = "step.call-limit"
	KindGateWaiting        EventKind = "gate.waiting"
	KindGateApproved       EventKind = "gate.approved"
	KindGateRejected       EventKind = "gate.rejected"
	KindCallStarted        EventKind = "call.started"
	KindCallRefused        EventKind = "call.refused"
	KindCallWaiting        EventKind = "call.waiting"
	KindCallSucceeded      EventKind = "call.succeeded"
	KindCallFailed         EventKind = "call.failed"
	KindCallOutputInvalid  EventKind = "call.output-invalid"
	KindCallRetried        EventKind = "call.retried"
	KindCallRerun          EventKind = "call.rerun"
	KindCallOutcomeUnknown EventKind = "call.outcome-unknown"
	KindApprovalRequested  EventKind = "approval.requested"
	KindApprovalApproved   EventKind = "approval.approved"
	KindApprovalDenied     EventKind = "approval.denied"
	KindApprovalVoided     EventKind = "approval.voided"
	KindApprovalEndorsed   EventKind = "approval.endorsed"
	KindGateEndorsed       EventKind = "gate.endorsed"
	KindRunCancelled       EventKind = "run.cancelled"
	KindRunRequested       EventKind = "run.requested"
	KindAgentTokenIssued   EventKind = "agent.token-issued"
	KindAgentTokenRevoked  EventKind = "agent.token-revoked"
	KindAgentAttached      EventKind = "agent.attached"
	KindAgentRejected      EventKind = "agent.rejected"
	KindModelUsage         EventKind = "model.usage"
	KindViewRead           EventKind = "view.read"
)

// Event is the payload of one audit record.
type Event interface{ Kind() EventKind }

// RunCreated: a run was created. HarnessDigest is the SHA-256 of the
// harness file the run was started with ("" when none was given).
type RunCreated struct {
	Playbook       string `json:"playbook"`
	Version        string `json:"version"`
	DocumentDigest string `json:"documentDigest"`
	HarnessDigest  string `json:"harnessDigest,omitempty"`
	// InputDigest is the SHA-256 of the run's input as stored.
	InputDigest string `json:"inputDigest"`
}

// RunHarnessChanged: a person resumed the run with a harness other than
// the one it was started with (or last resumed with), accepting the change.
type RunHarnessChanged struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// RunDrift: the run was imported against a registry whose definitions
// differ from the document's embedded ones at warning level (docs/drift.md:
// a changed description, a schema that accepts more, a document that
// overstates the risk): differences a reviewer of the document did not
// see, which do not stop the run. Recorded when the run is created, and
// when a resume or retry finds other warnings than the last such record.
type RunDrift struct {
	// Warnings are the first [MaxDriftWarnings] findings, in the order
	// check reports them.
	Warnings []DriftWarning `json:"warnings"`
	// More counts the findings past them, not listed.
	More int `json:"more,omitempty"`
}

// MaxDriftWarnings bounds the findings one [RunDrift] record lists.
const MaxDriftWarnings = 100

// DriftWarning is one warning-level drift finding of a [RunDrift].
type DriftWarning struct {
	// Tool is the name of the embedded tool the finding is about ("" when
	// the pointer names none).
	Tool string `json:"tool,omitempty"`
	// Rule is the finding's rule ("drift-description", ...).
	Rule string `json:"rule"`
	// Pointer is a JSON Pointer into the document ("/tools/2/description").
	Pointer string `json:"pointer"`
	// Message says what differs (at most 2 KiB).
	Message string `json:"message"`
}

// RunResumed: a waiting run was resumed.
type RunResumed struct{}

// RunWaiting: a step suspended; the run waits for a person.
type RunWaiting struct {
	Attempt int `json:"attempt"`
	// Agent is set when the step waits for its external agent (an MCP
	// client) rather than for a person.
	Agent bool `json:"agent,omitempty"`
}

// RunCompleted: the run's last step finished.
type RunCompleted struct{}

// RunRejected: a gate was rejected and has no onReject.
type RunRejected struct {
	Reason string `json:"reason"`
}

// RunFailed: the run ended failed.
type RunFailed struct {
	Reason string `json:"reason"`
}

// StepStarted: a step's attempt began; From is the step before it.
type StepStarted struct {
	Attempt int    `json:"attempt"`
	From    string `json:"from,omitempty"`
}

// StepResumed: a waiting step's attempt continues.
type StepResumed struct {
	Attempt int `json:"attempt"`
}

// StepFinished: an agent step's attempt finished with an output.
type StepFinished struct {
	Attempt      int    `json:"attempt"`
	Calls        int    `json:"calls"`
	OutputDigest string `json:"outputDigest"`
}

// StepFailed: a step's attempt failed. Transient is set when the failure
// may pass on a new attempt (a model API's 408, 409, 429 or 5xx, a
// request timeout, a connection error: [driver.Transient]); only such a
// step is retried without --force ([Session.Retry]).
type StepFailed struct {
	Attempt   int    `json:"attempt"`
	Reason    string `json:"reason"`
	Transient bool   `json:"transient,omitempty"`
}

// RunRetried: a person had a failed run go on with a new attempt of its
// failed step ([Session.Retry]); the record's step is that step, and a
// step.retried record follows. Force is set when the step's failure was
// not transient and the person retried it anyway.
type RunRetried struct {
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
	Force  bool   `json:"force,omitempty"`
}

// StepRetried: a new attempt (Attempt) of a failed step began, in place
// of step.started; Retries is the failed attempt, Failure and Transient
// its step.failed record's reason and flag. The calls of the failed
// attempt stay its own: they are not run again (docs/runtime.md,
// "Retrying a failed step").
type StepRetried struct {
	Attempt   int    `json:"attempt"`
	Retries   int    `json:"retries"`
	Failure   string `json:"failure"`
	Transient bool   `json:"transient,omitempty"`
}

// StepCallLimit: the step asked for more calls than it may make.
type StepCallLimit struct {
	Limit int `json:"limit"`
}

// GateWaiting: a gate opened.
type GateWaiting struct {
	Attempt int    `json:"attempt"`
	Purpose string `json:"purpose"`
	// Policy is what the harness policy's gate rules require of who
	// decides the gate, as in [ApprovalRequested].
	Policy *policy.Requirement `json:"policy,omitempty"`
}

// GateApproved: a person approved a gate.
type GateApproved struct {
	Attempt int    `json:"attempt"`
	By      string `json:"by"`
	Reason  string `json:"reason"`
	// ByName and ByEmail are the name and e-mail claims of the verified
	// person By names (serve.oidc); absent otherwise.
	ByName  string `json:"byName,omitempty"`
	ByEmail string `json:"byEmail,omitempty"`
	// Rules and Approvers are as in [ApprovalApproved].
	Rules     []string `json:"rules,omitempty"`
	Approvers []string `json:"approvers,omitempty"`
}

// Endorsement is one approval of the distinct people a policy rule asks
// for (N of M), as [ApprovalEndorsed] and [GateEndorsed] record it.
type Endorsement struct {
	By      string `json:"by"`
	ByName  string `json:"byName,omitempty"`
	ByEmail string `json:"byEmail,omitempty"`
	Reason  string `json:"reason"`
	// Rules are the policy rules that ask; Count how many distinct people
	// approved so far, this one included, of Needed.
	Rules  []string `json:"rules"`
	Count  int      `json:"count"`
	Needed int      `json:"needed"`
}

// GateEndorsed: one of the people a policy rule asks for approved a
// gate; the gate is approved (gate.approved) once Count reaches Needed.
type GateEndorsed struct {
	Attempt     int `json:"attempt"`
	Endorsement `json:",inline"`
}

// GateRejected: a person rejected a gate.
type GateRejected GateApproved

// CallStarted: an allowed call was recorded before it ran (a side
// effect), or was let run by an approval.
//
// The first record of a call (call.started, call.refused or
// call.waiting) also says what its row holds, so that [Reconcile] can
// compare the row with it: SideEffecting is the row's side_effecting,
// and StoredArgsDigest, when it is not ArgsDigest, the SHA-256 of the
// arguments as stored (secret values redacted, or none when they were
// not JSON).
type CallStarted struct {
	Index            int    `json:"index"`
	Attempt          int    `json:"attempt"`
	ArgsDigest       string `json:"argsDigest"`
	StoredArgsDigest string `json:"storedArgsDigest,omitempty"`
	DefDigest        string `json:"defDigest,omitempty"`
	SideEffecting    bool   `json:"sideEffecting,omitempty"`
	Approval         string `json:"approval,omitempty"`
	Reason           string `json:"reason,omitempty"`
}

// CallRefused: a call was refused and never ran (the fields after
// ArgsDigest as in [CallStarted]).
type CallRefused struct {
	Index            int    `json:"index"`
	Attempt          int    `json:"attempt"`
	ArgsDigest       string `json:"argsDigest,omitempty"`
	StoredArgsDigest string `json:"storedArgsDigest,omitempty"`
	DefDigest        string `json:"defDigest,omitempty"`
	SideEffecting    bool   `json:"sideEffecting,omitempty"`
	Code             Code   `json:"code"`
	Reason           string `json:"reason"`
	Approval         string `json:"approval,omitempty"`
}

// CallWaiting: a call waits for an approval (the fields after
// ArgsDigest as in [CallStarted]).
type CallWaiting struct {
	Index            int    `json:"index"`
	Attempt          int    `json:"attempt"`
	ArgsDigest       string `json:"argsDigest"`
	StoredArgsDigest string `json:"storedArgsDigest,omitempty"`
	DefDigest        string `json:"defDigest,omitempty"`
	SideEffecting    bool   `json:"sideEffecting,omitempty"`
	Reason           string `json:"reason"`
}

// CallSucceeded: a call ran and its result was recorded.
type CallSucceeded struct {
	Attempt      int    `json:"attempt"`
	Index        int    `json:"index"`
	ResultDigest string `json:"resultDigest"`
}

// CallFailed: a call ran and failed, or a person decided not to run an
// outcome-unknown call again.
type CallFailed struct {
	Attempt  int    `json:"attempt"`
	Index    int    `json:"index"`
	Reason   string `json:"reason"`
	Approval string `json:"approval,omitempty"`
}

// CallOutputInvalid: a result did not match the outputSchema and was not
// passed on.
type CallOutputInvalid struct {
	Attempt      int    `json:"attempt"`
	Index        int    `json:"index"`
	Reason       string `json:"reason"`
	ResultDigest string `json:"resultDigest"`
}

// CallRetried: a read call interrupted before its outcome was recorded is
// run again.
type CallRetried struct {
	Attempt int    `json:"attempt"`
	Index   int    `json:"index"`
	Reason  string `json:"reason"`
}

// CallRerun: a person had an outcome-unknown call run again.
type CallRerun struct {
	Attempt  int    `json:"attempt"`
	Index    int    `json:"index"`
	Approval string `json:"approval"`
}

// CallOutcomeUnknown: a side-effecting call was sent and its outcome is
// not known; a person decides.
type CallOutcomeUnknown struct {
	Attempt  int    `json:"attempt"`
	Index    int    `json:"index"`
	Approval string `json:"approval"`
}

// ApprovalRequested: a person is asked to approve a call.
// DefDigest is the embedded definition's; BindDigest what the approval
// is bound to (the live definition and Binding, what serves the tool,
// too); see docs/runtime.md, "Approvals".
type ApprovalRequested struct {
	Approval   string `json:"approval"`
	Attempt    int    `json:"attempt"`
	Index      int    `json:"index"`
	ArgsDigest string `json:"argsDigest"`
	DefDigest  string `json:"defDigest"`
	BindDigest string `json:"bindDigest"`
	Binding    string `json:"binding"`
	// Reason is why it is asked (the approval row's reason until a
	// person decides): "requiresApproval", "resumed-same-tool", or
	// "policy:" and the name of the harness policy rule that asks.
	Reason string `json:"reason,omitempty"`
	// Policy is what the harness policy's rules require of who decides
	// (deciders, how many distinct approvers, self-approval); absent when
	// no rule asks. [Decide] enforces it as recorded here.
	Policy *policy.Requirement `json:"policy,omitempty"`
	// AgentText is the agent's own words before the call
	// ([driver.Call].Reasoning): trimmed, invalid UTF-8 replaced with
	// U+FFFD, secret values redacted, clipped to [MaxAgentTextBytes] at a
	// UTF-8 boundary with a note of the bytes left out; absent when the
	// agent wrote none. It is the model's claim, checked by nothing, shown
	// to the approver as such; it is no part of any digest or of what the
	// approval is bound to.
	AgentText string `json:"agentText,omitempty"`
}

// MaxAgentTextBytes is the most bytes of an agent's text an
// [ApprovalRequested] record keeps (before the note of what was clipped).
const MaxAgentTextBytes = 2048

// ApprovalVoided: an open approval no longer holds (what it was bound to
// changed, or its step attempt ended) and was expired.
type ApprovalVoided struct {
	Approval string `json:"approval"`
	Attempt  int    `json:"attempt"`
	Index    int    `json:"index"`
	Reason   string `json:"reason"`
}

// ApprovalApproved: a person approved an approval request; ApprovalKind
// is the approval's kind (call or outcome_unknown).
type ApprovalApproved struct {
	Approval     string `json:"approval"`
	By           string `json:"by"`
	Reason       string `json:"reason"`
	ApprovalKind string `json:"kind"`
	// ByName and ByEmail are as in [GateApproved].
	ByName  string `json:"byName,omitempty"`
	ByEmail string `json:"byEmail,omitempty"`
	// Rules are the policy rules that asked who decides; Approvers, for
	// N of M, everyone who approved (each has an approval.endorsed).
	Rules     []string `json:"rules,omitempty"`
	Approvers []string `json:"approvers,omitempty"`
}

// ApprovalEndorsed: one of the people a policy rule asks for approved
// a call; the approval is approved (approval.approved) once Count
// reaches Needed.
type ApprovalEndorsed struct {
	Approval    string `json:"approval"`
	Endorsement `json:",inline"`
}

// ApprovalDenied: a person denied an approval request.
type ApprovalDenied ApprovalApproved

func (RunCreated) Kind() EventKind         { return KindRunCreated }
func (RunResumed) Kind() EventKind         { return KindRunResumed }
func (RunHarnessChanged) Kind() EventKind  { return KindRunHarnessChanged }
func (RunDrift) Kind() EventKind           { return KindRunDrift }
func (RunWaiting) Kind() EventKind         { return KindRunWaiting }
func (RunCompleted) Kind() EventKind       { return KindRunCompleted }
func (RunRejected) Kind() EventKind        { return KindRunRejected }
func (RunFailed) Kind() EventKind          { return KindRunFailed }
func (RunRetried) Kind() EventKind         { return KindRunRetried }
func (StepStarted) Kind() EventKind        { return KindStepStarted }
func (StepResumed) Kind() EventKind        { return KindStepResumed }
func (StepFinished) Kind() EventKind       { return KindStepFinished }
func (StepFailed) Kind() EventKind         { return KindStepFailed }
func (StepRetried) Kind() EventKind        { return KindStepRetried }
func (StepCallLimit) Kind() EventKind      { return KindStepCallLimit }
func (GateWaiting) Kind() EventKind        { return KindGateWaiting }
func (GateApproved) Kind() EventKind       { return KindGateApproved }
func (GateRejected) Kind() EventKind       { return KindGateRejected }
func (CallStarted) Kind() EventKind        { return KindCallStarted }
func (CallRefused) Kind() EventKind        { return KindCallRefused }
func (CallWaiting) Kind() EventKind        { return KindCallWaiting }
func (CallSucceeded) Kind() EventKind      { return KindCallSucceeded }
func (CallFailed) Kind() EventKind         { return KindCallFailed }
func (CallOutputInvalid) Kind() EventKind  { return KindCallOutputInvalid }
func (CallRetried) Kind() EventKind        { return KindCallRetried }
func (CallRerun) Kind() EventKind          { return KindCallRerun }
func (CallOutcomeUnknown) Kind() EventKind { return KindCallOutcomeUnknown }
func (ApprovalRequested) Kind() EventKind  { return KindApprovalRequested }
func (ApprovalApproved) Kind() EventKind   { return KindApprovalApproved }
func (ApprovalDenied) Kind() EventKind     { return KindApprovalDenied }
func (ApprovalVoided) Kind() EventKind     { return KindApprovalVoided }
func (ApprovalEndorsed) Kind() EventKind   { return KindApprovalEndorsed }
func (GateEndorsed) Kind() EventKind       { return KindGateEndorsed }
func (ViewRead) Kind() EventKind           { return KindViewRead }

// newRecord builds the audit record of ev. The tool name goes in as
// received; a name holding a secret value is recorded redacted with
// data.toolRedacted true, and a name that is not valid UTF-8 (after
// redaction) is recorded quoted (Go syntax, ASCII) with data.toolQuoted
// true, since the audit log is JSON. Redaction comes first so that the
// record's name is [recordTool] of the name a call row stores (redacted). Data is ev's JSON with every secret value redacted; a payload with
// no members is recorded without data.
func newRecord(redact func(string) string, run, step, tool string, ev Event) audit.Record {
	var flags []string
	if red := redact(tool); red != tool {
		flags = append(flags, `"toolRedacted":true`)
		tool = red
	}
	if tool != "" && !utf8.ValidString(tool) {
		flags = append(flags, `"toolQuoted":true`)
		tool = quote(tool)
	}
	r := audit.Record{Run: run, Kind: string(ev.Kind()), Step: step, Tool: tool}
	b, err := json.Marshal(ev, json.Deterministic(true))
	if err != nil || len(b) < 2 {
		return r
	}
	for _, f := range flags {
		if len(b) == 2 {
			b = append([]byte("{"+f), '}')
		} else {
			b = append([]byte("{"+f+","), b[1:]...)
		}
	}
	if len(b) == 2 { // {}
		return r
	}
	r.Data = jsontext.Value(redact(string(b)))
	if !r.Data.IsValid() {
		r.Data = nil
	}
	return r
}

// RunRequested: a verified person started the run (`openplaybook serve`
// with serve.oidc): By is their subject, ByName and ByEmail their name
// and e-mail claims, Via how they proved it ("oidc", or "operator-token"
// for the bootstrap credential). It follows run.created.
type RunRequested struct {
	By      string `json:"by"`
	ByName  string `json:"byName,omitempty"`
	ByEmail string `json:"byEmail,omitempty"`
	Via     string `json:"via"`
}

func (RunRequested) Kind() EventKind { return KindRunRequested }

// RunCancelled: a person cancelled the run. A run.failed record follows:
// a cancelled run ends failed, with the reason "cancelled by ...".
type RunCancelled struct {
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
}

// AgentTokenIssued: a bearer token for the run's external agent was
// issued (its id; the token itself is stored only as a SHA-256 hash).
type AgentTokenIssued struct {
	Token string `json:"token"`
	// Agent is the agent name the token is for ("" for every step of
	// the run bound to driver mcp).
	Agent   string `json:"agent,omitempty"`
	By      string `json:"by,omitempty"`
	Expires string `json:"expires"`
}

// AgentTokenRevoked: an agent token was revoked.
type AgentTokenRevoked struct {
	Token string `json:"token"`
	By    string `json:"by,omitempty"`
}

// AgentAttached: an external agent (an MCP client) opened a session on
// the run with a valid token. A server records a token's first session
// in each step attempt, and in each time between two steps, only
// (docs/serve.md, "Agent tokens"): Folded counts the token's sessions
// that attached after its previous agent.attached record without a
// record of their own.
type AgentAttached struct {
	Token  string `json:"token"`
	Client string `json:"client,omitempty"`
	// Step is the step executing when the session attached ("" when none
	// was: the run was resuming, between steps or at a gate).
	Step   string `json:"step,omitempty"`
	Folded int    `json:"folded,omitzero"`
}

// AgentRejected: a message of the run's external agent was rejected
// before it reached the decision path (a JSON-RPC batch, a duplicate or
// case-variant member, an unknown method, invalid JSON).
type AgentRejected struct {
	Token  string `json:"token,omitempty"`
	Reason string `json:"reason"`
}

// ViewRead: a person deciding approval Approval read the current state
// of the waiting call's target with a read tool (the record's tool), as
// [Session.View] does: the waiting call's step attempt and index, the
// read's arguments' digest and its result's (of what was shown, redacted;
// "" when it failed), who asked (By) and why it failed (Error).
type ViewRead struct {
	Approval     string `json:"approval"`
	Attempt      int    `json:"attempt"`
	Index        int    `json:"index"`
	ArgsDigest   string `json:"argsDigest"`
	ResultDigest string `json:"resultDigest,omitempty"`
	By           string `json:"by,omitempty"`
	Error        string `json:"error,omitempty"`
}

// ModelUsage: what one model turn of a step's attempt cost, in tokens,
// as the provider reported it (a model driver's [driver.Usage]).
// InputTokens include the cached ones and those written to the cache.
type ModelUsage struct {
	Attempt           int    `json:"attempt"`
	Provider          string `json:"provider"`
	Model             string `json:"model"`
	Turn              int    `json:"turn"`
	InputTokens       int64  `json:"inputTokens"`
	OutputTokens      int64  `json:"outputTokens"`
	CachedInputTokens int64  `json:"cachedInputTokens,omitempty"`
	CacheWriteTokens  int64  `json:"cacheWriteTokens,omitempty"`
}

func (ModelUsage) Kind() EventKind        { return KindModelUsage }
func (RunCancelled) Kind() EventKind      { return KindRunCancelled }
func (AgentTokenIssued) Kind() EventKind  { return KindAgentTokenIssued }
func (AgentTokenRevoked) Kind() EventKind { return KindAgentTokenRevoked }
func (AgentAttached) Kind() EventKind     { return KindAgentAttached }
func (AgentRejected) Kind() EventKind     { return KindAgentRejected }
