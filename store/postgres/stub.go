package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/store"
)

// errTODO marks what the skeleton does not do yet.
var errTODO = errors.New("store/postgres: not implemented yet")

// Compile-time checks that the engine keeps the contract.
var (
	_ store.Store    = (*Store)(nil)
	_ store.Tx       = (*tx)(nil)
	_ builtin.Data   = (*Store)(nil)
	_ builtin.DataTx = (*tx)(nil)
)

// SchemaVersion is the schema version this engine creates and reads.
const SchemaVersion = 3

// Options configure [Open]. A nil *Options means the defaults.
type Options struct {
	Synchronous string
	MaxConns    int32
	Now         func() time.Time
}

// Store is an open PostgreSQL store.
type Store struct{}

// Open connects to url, migrates the schema and checks its version.
func Open(ctx context.Context, url string, opt *Options) (*Store, error) { return nil, errTODO }

func (s *Store) SchemaVersion(ctx context.Context) (int, error) { return 0, errTODO }
func (s *Store) SetClock(now func() time.Time)                  {}
func (s *Store) Now() time.Time                                 { return time.Now() }
func (s *Store) Close() error                                   { return nil }
func (s *Store) Tx(ctx context.Context, fn func(store.Tx) error) error {
	return errTODO
}
func (s *Store) Queue(ctx context.Context, fn func(store.Tx) error) store.Queued { return nil }
func (s *Store) Flush(ctx context.Context) error                                 { return errTODO }
func (s *Store) LockRun(run string) (func(), error)                              { return nil, errTODO }
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	return store.Run{}, errTODO
}
func (s *Store) ListRuns(ctx context.Context, statuses ...store.RunStatus) ([]store.Run, error) {
	return nil, errTODO
}
func (s *Store) Steps(ctx context.Context, run string) ([]store.Step, error) { return nil, errTODO }
func (s *Store) Calls(ctx context.Context, run string, f store.CallFilter) ([]store.Call, error) {
	return nil, errTODO
}
func (s *Store) GetApproval(ctx context.Context, id string) (store.Approval, error) {
	return store.Approval{}, errTODO
}
func (s *Store) PendingApprovals(ctx context.Context, run string) ([]store.Approval, error) {
	return nil, errTODO
}
func (s *Store) Approvals(ctx context.Context, run string) ([]store.Approval, error) {
	return nil, errTODO
}
func (s *Store) Gates(ctx context.Context, run string) ([]store.Gate, error)   { return nil, errTODO }
func (s *Store) Audit(ctx context.Context, run string) ([]audit.Record, error) { return nil, errTODO }
func (s *Store) AuditHead(ctx context.Context, run string) (int64, string, error) {
	return 0, "", errTODO
}
func (s *Store) VerifyAudit(ctx context.Context, run string) ([]audit.Problem, error) {
	return nil, errTODO
}
func (s *Store) AgentTokenByHash(ctx context.Context, hash string) (store.AgentToken, error) {
	return store.AgentToken{}, errTODO
}
func (s *Store) AgentTokens(ctx context.Context, run string) ([]store.AgentToken, error) {
	return nil, errTODO
}
func (s *Store) AgentTokenByID(ctx context.Context, id string) (store.AgentToken, error) {
	return store.AgentToken{}, errTODO
}
func (s *Store) Dump(ctx context.Context) ([]byte, error) { return nil, errTODO }

func (s *Store) GetCustomer(ctx context.Context, id string) (store.Customer, error) {
	return store.Customer{}, errTODO
}
func (s *Store) SearchCustomers(ctx context.Context, query string, limit int) ([]store.Customer, error) {
	return nil, errTODO
}
func (s *Store) SeedCustomers(ctx context.Context, cs []store.Customer) error { return errTODO }
func (s *Store) ListNotes(ctx context.Context, customerID, tag string, limit int) ([]store.Note, error) {
	return nil, errTODO
}
func (s *Store) ListToday(ctx context.Context, includeDismissed bool) ([]store.TodayItem, error) {
	return nil, errTODO
}

type tx struct{}

func (t *tx) CreateRun(r store.Run) (store.Run, error)                             { return store.Run{}, errTODO }
func (t *tx) SetRunStatus(run string, status store.RunStatus, reason string) error { return errTODO }
func (t *tx) ReopenRun(run string) error                                           { return errTODO }
func (t *tx) StartStep(run, step string) (int, error)                              { return 0, errTODO }
func (t *tx) SetStepWaiting(run, step string, attempt int) error                   { return errTODO }
func (t *tx) SetStepRunning(run, step string, attempt int) error                   { return errTODO }
func (t *tx) FinishStep(run, step string, attempt int, status store.StepStatus, output jsontext.Value, errText string) error {
	return errTODO
}
func (t *tx) StartCall(c store.Call) (store.Call, error)           { return store.Call{}, errTODO }
func (t *tx) RecordCall(c store.Call) (store.Call, error)          { return store.Call{}, errTODO }
func (t *tx) RecordCalls(calls []store.Call) ([]store.Call, error) { return nil, errTODO }
func (t *tx) FinishCall(k store.CallKey, state store.CallState, result jsontext.Value, errText string) error {
	return errTODO
}
func (t *tx) DecideCall(k store.CallKey, allowed bool, code, reason string) error { return errTODO }
func (t *tx) MarkOutcomeUnknown(k store.CallKey, reason string) (store.Approval, error) {
	return store.Approval{}, errTODO
}
func (t *tx) CreateApproval(a store.Approval) (store.Approval, error) {
	return store.Approval{}, errTODO
}
func (t *tx) DecideApproval(id string, approve bool, reason, decidedBy string) (store.Approval, error) {
	return store.Approval{}, errTODO
}
func (t *tx) ConsumeApproval(run, step, tool, defDigest, argsDigest string) (store.Approval, bool, error) {
	return store.Approval{}, false, errTODO
}
func (t *tx) ConsumeApprovalFor(k store.CallKey, defDigest, argsDigest string) (store.Approval, bool, error) {
	return store.Approval{}, false, errTODO
}
func (t *tx) VoidApprovals(k store.CallKey, reason string) ([]store.Approval, error) {
	return nil, errTODO
}
func (t *tx) ExpireAttemptApprovals(run, step string, attempt int, reason string) ([]store.Approval, error) {
	return nil, errTODO
}
func (t *tx) ExpireApprovals(run string) ([]store.Approval, error) { return nil, errTODO }
func (t *tx) VoidOutcomeUnknownApproval(id, reason string) (store.Approval, bool, error) {
	return store.Approval{}, false, errTODO
}
func (t *tx) OpenGate(run, step string, attempt int) (store.Gate, error) {
	return store.Gate{}, errTODO
}
func (t *tx) DecideGate(run, step string, attempt int, approve bool, reason, decidedBy string) (store.Gate, error) {
	return store.Gate{}, errTODO
}
func (t *tx) CreateAgentToken(run, agent, hash, by string, expires time.Time) (store.AgentToken, error) {
	return store.AgentToken{}, errTODO
}
func (t *tx) RevokeAgentTokens(run, id string) ([]store.AgentToken, error) { return nil, errTODO }
func (t *tx) Append(rec audit.Record) (audit.Record, error)                { return audit.Record{}, errTODO }
func (t *tx) AppendAll(recs ...audit.Record) ([]audit.Record, error)       { return nil, errTODO }
func (t *tx) Run(id string) (store.Run, error)                             { return store.Run{}, errTODO }
func (t *tx) Call(k store.CallKey) (store.Call, error)                     { return store.Call{}, errTODO }
func (t *tx) Calls(run string, f store.CallFilter) ([]store.Call, error)   { return nil, errTODO }
func (t *tx) Approval(id string) (store.Approval, error)                   { return store.Approval{}, errTODO }
func (t *tx) Approvals(run string) ([]store.Approval, error)               { return nil, errTODO }
func (t *tx) Audit(run string) ([]audit.Record, error)                     { return nil, errTODO }
func (t *tx) VerifyAudit(run string) ([]audit.Problem, error)              { return nil, errTODO }
func (t *tx) PutCustomer(c store.Customer) error                           { return errTODO }
func (t *tx) AddNote(n store.Note) (store.Note, error)                     { return store.Note{}, errTODO }
func (t *tx) SurfaceToday(it store.TodayItem) (store.TodayItem, error) {
	return store.TodayItem{}, errTODO
}
func (t *tx) DismissToday(id string) error { return errTODO }
