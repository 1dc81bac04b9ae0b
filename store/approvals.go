package store

import (
	"time"
)

// ApprovalKind says what a person is asked to decide.
type ApprovalKind string

const (
	// KindCall: may this call, which its tool's requiresApproval holds
	// back, run?
	KindCall ApprovalKind = "call"
	// KindOutcomeUnknown: this side-effecting call was started but its
	// outcome was never recorded; may it run again?
	KindOutcomeUnknown ApprovalKind = "outcome_unknown"
)

// ApprovalStatus is where an approval is.
type ApprovalStatus string

const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved" // and not yet used
	ApprovalDenied   ApprovalStatus = "denied"
	ApprovalExpired  ApprovalStatus = "expired"
	ApprovalUsed     ApprovalStatus = "used" // approved, and the call it allows has been let through once
)

// DefaultApprovalTTL is how long an approval of kind call stays valid when
// [Tx.CreateApproval] is given no expiry.
const DefaultApprovalTTL = 24 * time.Hour

// Approval is a person's permission for exactly one call: one run, one
// step, one tool (by exact name and definition digest) and one set of
// arguments (by the SHA-256 of their RFC 8785 canonical JSON), once.
type Approval struct {
	ID         string // "apr_" and 16 hex digits
	Kind       ApprovalKind
	Run        string
	Step       string
	Tool       string // exact bytes
	DefDigest  string
	ArgsDigest string
	Call       *CallKey // the call waiting on it or whose outcome is unknown; nil when none was recorded
	Status     ApprovalStatus
	Reason     string // why it was asked for, then why it was decided
	DecidedBy  string // who decided
	Created    time.Time
	Expires    time.Time // zero: never
	Decided    time.Time
	Used       time.Time
}

// GateStatus is where a gate is.
type GateStatus string

const (
	GateWaiting  GateStatus = "waiting"
	GateApproved GateStatus = "approved"
	GateRejected GateStatus = "rejected"
)

// Gate is a person's decision on one attempt at a gate step.
type Gate struct {
	Run       string
	Step      string
	Attempt   int
	Status    GateStatus
	Reason    string
	DecidedBy string
	Opened    time.Time
	Decided   time.Time // zero while waiting
}
