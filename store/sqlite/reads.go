package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// maxReadStmts bounds the read pool's statement cache; queries past it
// (a filter combination seen late) are prepared per call.
const maxReadStmts = 256

// readStmts caches the read pool's prepared statements, one per query
// text. A *sql.Stmt of a *sql.DB is safe for concurrent use: database/sql
// prepares it once on each pool connection that runs it and keeps it.
type readStmts struct {
	db     *sql.DB
	mu     sync.Mutex
	m      map[string]*sql.Stmt
	closed bool
}

// stmt returns query's prepared statement, preparing it the first time,
// or nil when the cache is closed or full or the query does not prepare
// (the caller then runs it unprepared, and gets its error).
func (c *readStmts) stmt(ctx context.Context, query string) *sql.Stmt {
	c.mu.Lock()
	st, ok := c.m[query]
	full := c.closed || len(c.m) >= maxReadStmts
	c.mu.Unlock()
	if ok {
		return st
	}
	if full {
		return nil
	}
	st, err := c.db.PrepareContext(ctx, query) // outside the lock: it may wait for a connection
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[query]; ok || c.closed || len(c.m) >= maxReadStmts {
		st.Close()
		return old // nil when closed or full
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[query] = st
	return st
}

// cached returns query's prepared statement when it is cached, nil
// otherwise. Inside a read transaction, which holds a pool connection,
// only this may be used: preparing through the pool would need a second
// connection, and with every connection held by such transactions that
// waits forever.
func (c *readStmts) cached(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[query]
}

func (c *readStmts) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for q, st := range c.m {
		errs = append(errs, st.Close())
		delete(c.m, q)
	}
	return errors.Join(errs...)
}

// pool is the read pool as a querier, through the statement cache.
type pool struct{ s *Store }

func (s *Store) pool() pool { return pool{s} }

func (p pool) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := p.s.reads.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.s.rdb.QueryContext(ctx, query, args...)
}

func (p pool) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := p.s.reads.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.s.rdb.QueryRowContext(ctx, query, args...)
}

// readTx is a read transaction of the pool as a querier, through the
// statement cache: a cached statement is bound to the transaction's
// connection (prepared on it the first time), a query not cached runs
// unprepared (see [readStmts.cached]).
type readTx struct {
	s  *Store
	tx *sql.Tx
}

func (r readTx) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := r.s.reads.cached(query); st != nil {
		return r.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return r.tx.QueryContext(ctx, query, args...)
}

func (r readTx) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := r.s.reads.cached(query); st != nil {
		return r.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return r.tx.QueryRowContext(ctx, query, args...)
}
