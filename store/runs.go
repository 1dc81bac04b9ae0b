package store

import (
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// RunStatus is where a run is.
type RunStatus string

const (
	RunRunning   RunStatus = "running"   // executing, or interrupted and resumable
	RunWaiting   RunStatus = "waiting"   // waiting for a person (gate, approval, outcome-unknown decision)
	RunCompleted RunStatus = "completed" // ended normally
	RunRejected  RunStatus = "rejected"  // a gate rejected it with no onReject
	RunFailed    RunStatus = "failed"    // ended with an error
)

// Ended reports whether the status is final: completed, rejected or failed.
func (s RunStatus) Ended() bool {
	return s == RunCompleted || s == RunRejected || s == RunFailed
}

// Valid reports whether s is one of the run statuses.
func (s RunStatus) Valid() bool { return s == RunRunning || s == RunWaiting || s.Ended() }

// Run is one execution of a playbook.
type Run struct {
	ID              string         // "run_" and 16 hex digits
	PlaybookID      string         // manifest.id
	PlaybookVersion string         // manifest.version
	DocumentDigest  string         // SHA-256 (hex) of Document
	Document        []byte         // the document's bytes exactly as imported; nil from ListRuns
	HarnessPath     string         // the harness file the run was started with
	Input           jsontext.Value // the run's input (JSON); nil when none
	Status          RunStatus
	CurrentStep     string // the step last started; "" before the first
	Reason          string // why the run was rejected or failed, or is waiting
	Created         time.Time
	Updated         time.Time
	AuditSeq        int64  // the audit head: seq of the run's last audit record (0: none)
	AuditHash       string // and its hash ([audit.Genesis] when none)
	Owner           string // the replica that last claimed it ([Tx.ClaimRun]); "" before the first claim
	OwnerEpoch      int64  // how many times it was claimed (0: never)
}

// StepStatus is where a step attempt is.
type StepStatus string

const (
	StepRunning StepStatus = "running"
	StepDone    StepStatus = "done"
	StepFailed  StepStatus = "failed"
	StepWaiting StepStatus = "waiting" // a gate, or an agent step waiting for a person
)

// Step is one attempt at one step of a run. Attempts count from 1.
type Step struct {
	Run      string
	Step     string
	Attempt  int
	Status   StepStatus
	Output   jsontext.Value // nil until done, and when the step has none
	Error    string
	Started  time.Time
	Finished time.Time // zero while running or waiting
}
