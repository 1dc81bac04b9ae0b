package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// ReadSnapshot calls fn with reads of one snapshot of the database
// ([store.Snapshotter]): a repeatable-read, read-only transaction, whose
// snapshot (PostgreSQL takes it at the transaction's first statement) is
// taken before fn runs.
func (s *Store) ReadSnapshot(ctx context.Context, fn func(store.Snapshot) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("store: beginning a read: %w", err)
	}
	defer tx.Rollback(context.Background())
	var one int
	if err := tx.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("store: beginning a read: %w", err)
	}
	return fn(snapshot{tx})
}

// snapshot is the reads of a read-only transaction ([Store.ReadSnapshot]).
type snapshot struct{ tx pgx.Tx }

func (sn snapshot) GetRun(ctx context.Context, id string) (store.Run, error) {
	return getRun(ctx, sn.tx, id)
}

func (sn snapshot) Steps(ctx context.Context, run string) ([]store.Step, error) {
	return listSteps(ctx, sn.tx, run)
}

func (sn snapshot) Calls(ctx context.Context, run string, f store.CallFilter) ([]store.Call, error) {
	return listCalls(ctx, sn.tx, run, f)
}

func (sn snapshot) Approvals(ctx context.Context, run string) ([]store.Approval, error) {
	return runApprovals(ctx, sn.tx, run)
}

func (sn snapshot) Gates(ctx context.Context, run string) ([]store.Gate, error) {
	return runGates(ctx, sn.tx, run)
}

func (sn snapshot) AuditHead(ctx context.Context, run string) (int64, string, error) {
	return auditHead(ctx, sn.tx, run)
}

func (sn snapshot) AuditPage(ctx context.Context, run string, after int64, limit int) ([]audit.Record, error) {
	return auditPage(ctx, sn.tx, run, after, limit)
}

func (sn snapshot) CallPage(ctx context.Context, run, step string, attempt, after, limit int) ([]store.Call, error) {
	return callPage(ctx, sn.tx, run, step, attempt, after, limit)
}

func (sn snapshot) CallCount(ctx context.Context, run string) (int, error) {
	return callCount(ctx, sn.tx, run)
}

var _ store.Snapshotter = (*Store)(nil)
