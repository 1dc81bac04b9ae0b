package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/openplaybook/openplaybook/audit"
	"github.com/openplaybook/openplaybook/store"
)

// ReadSnapshot calls fn with reads of one snapshot of the database
// ([store.Snapshotter]): a read transaction of the pool, whose snapshot
// (SQLite takes it at a transaction's first read) is taken before fn
// runs. Writers are not held up by it (WAL).
func (s *Store) ReadSnapshot(ctx context.Context, fn func(store.Snapshot) error) error {
	// The queries run once a page are prepared first, through the pool:
	// inside the transaction a query not prepared is prepared at each
	// run ([readStmts.cached]).
	for _, q := range [...]string{auditQuery, callPageQuery} {
		s.reads.stmt(ctx, q)
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer tx.Rollback()
	q := readTx{s, tx}
	var one int
	if err := q.queryRow(ctx, `SELECT count(*) FROM runs WHERE id = ''`).Scan(&one); err != nil {
		return fmt.Errorf("store: beginning a read: %w", err)
	}
	// A snapshot's reads are mostly one pass over a run's rows, each
	// page read once: SQLite's page cache (2 MB by default, per
	// connection) is kept small while it lasts.
	var cache int64
	if err := tx.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&cache); err != nil {
		return fmt.Errorf("store: beginning a read: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `PRAGMA cache_size = -256`); err != nil {
		return fmt.Errorf("store: beginning a read: %w", err)
	}
	defer tx.ExecContext(context.Background(), `PRAGMA cache_size = `+strconv.FormatInt(cache, 10))
	return fn(snapshot{q})
}

// snapshot is the reads of a read transaction ([Store.ReadSnapshot]).
type snapshot struct{ q readTx }

func (sn snapshot) GetRun(ctx context.Context, id string) (store.Run, error) {
	return getRun(ctx, sn.q, id)
}

func (sn snapshot) Steps(ctx context.Context, run string) ([]store.Step, error) {
	return listSteps(ctx, sn.q, run)
}

func (sn snapshot) Calls(ctx context.Context, run string, f store.CallFilter) ([]store.Call, error) {
	return listCalls(ctx, sn.q, run, f)
}

func (sn snapshot) Approvals(ctx context.Context, run string) ([]store.Approval, error) {
	return runApprovals(ctx, sn.q, run)
}

func (sn snapshot) Gates(ctx context.Context, run string) ([]store.Gate, error) {
	return runGates(ctx, sn.q, run)
}

func (sn snapshot) AuditHead(ctx context.Context, run string) (int64, string, error) {
	return auditHead(ctx, sn.q, run)
}

func (sn snapshot) AuditPage(ctx context.Context, run string, after int64, limit int) ([]audit.Record, error) {
	return auditPage(ctx, sn.q, run, after, limit)
}

func (sn snapshot) CallPage(ctx context.Context, run, step string, attempt, after, limit int) ([]store.Call, error) {
	return callPage(ctx, sn.q, run, step, attempt, after, limit)
}

func (sn snapshot) CallCount(ctx context.Context, run string) (int, error) {
	return callCount(ctx, sn.q, run)
}

var _ store.Snapshotter = (*Store)(nil)
