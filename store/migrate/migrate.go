// Package migrate copies a store from one engine to another: today an
// SQLite store (store/sqlite) into an empty PostgreSQL store
// (store/postgres), what `openplaybook store migrate --to postgres` runs.
//
// The copy is verbatim: every row of every table, each column's value as
// the source holds it (text stays the same text, so every audit record's
// hash and every run's audit head are unchanged and the chains verify on
// the target). It is one PostgreSQL transaction: the target ends with all
// of it or, on any error, with nothing. A target that already holds a run
// or any other row is refused: the copy never merges.
package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the source's driver, as store/sqlite uses it

	"github.com/openplaybook/openplaybook/store/engine"
	"github.com/openplaybook/openplaybook/store/postgres"
	"github.com/openplaybook/openplaybook/store/sqlite"
)

// Tables are the tables copied, in an order that keeps every foreign key
// satisfied as rows arrive. schema_version is not copied: each engine
// keeps its own.
var Tables = []string{"runs", "steps", "calls", "approvals", "gates", "audit", "agent_tokens", "outbox", "vault", "customers", "notes", "today"}

// Report is what a copy did.
type Report struct {
	// Rows maps each table to the rows copied.
	Rows map[string]int64
	// Runs is the number of runs whose audit chain verified on the
	// target after the copy (every run: otherwise SQLiteToPostgres
	// returns an error).
	Runs int
}

// ErrNotEmpty is returned (wrapped, with the tables and their row
// counts) when the target store already holds rows.
var ErrNotEmpty = errors.New("the target store is not empty")

// SQLiteToPostgres copies the SQLite store at path into the PostgreSQL
// database at the connection URL to (which Open migrates to this build's
// schema first). The source is first opened as the runtime opens it
// (migrating it to this build's SQLite schema, finishing its WAL), then
// read in one read transaction: a consistent snapshot. Stop the runs that
// use it first; a run that writes during the copy is not in it.
//
// Errors: the source cannot be opened, a table of one engine lacks a
// column of the other's, the target is not empty ([ErrNotEmpty]), a row
// is refused by the target's constraints (nothing is kept), an audit
// chain does not verify after the commit. No error holds the URL or its
// password.
func SQLiteToPostgres(ctx context.Context, path, to string) (*Report, error) {
	rep, err := copyStore(ctx, path, to)
	return rep, engine.Scrub(err, to)
}

func copyStore(ctx context.Context, path, to string) (*Report, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("the SQLite store: %w", err)
	}
	src, err := sqlite.Open(path, nil)
	if err != nil {
		return nil, fmt.Errorf("opening the SQLite store: %w", err)
	}
	src.Close()
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "query_only(1)")
	sdb, err := sql.Open("sqlite", "file:"+url.PathEscape(path)+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("opening the SQLite store: %w", err)
	}
	defer sdb.Close()
	stx, err := sdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("reading the SQLite store: %w", err)
	}
	defer stx.Rollback()

	pst, err := postgres.Open(ctx, to, nil)
	if err != nil {
		return nil, fmt.Errorf("opening the PostgreSQL store: %w", err)
	}
	pst.Close()
	conn, err := pgx.Connect(ctx, to)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(context.Background())
	ptx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer ptx.Rollback(context.Background())
	// No runtime writes the target while it is checked and filled.
	quoted := make([]string, len(Tables))
	for i, t := range Tables {
		quoted[i] = pgx.Identifier{t}.Sanitize()
	}
	if _, err := ptx.Exec(ctx, "LOCK TABLE "+strings.Join(quoted, ", ")+" IN EXCLUSIVE MODE"); err != nil {
		return nil, fmt.Errorf("locking the PostgreSQL tables: %w", err)
	}
	var full []string
	for _, t := range Tables {
		var n int64
		if err := ptx.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{t}.Sanitize()).Scan(&n); err != nil {
			return nil, fmt.Errorf("counting %s on PostgreSQL: %w", t, err)
		}
		if n > 0 {
			full = append(full, fmt.Sprintf("%s: %d rows", t, n))
		}
	}
	if len(full) > 0 {
		return nil, fmt.Errorf("%w (%s): the copy never merges; point --url at an empty database or schema", ErrNotEmpty, strings.Join(full, ", "))
	}

	rep := &Report{Rows: map[string]int64{}}
	for _, t := range Tables {
		n, err := copyTable(ctx, stx, ptx, t)
		if err != nil {
			return nil, fmt.Errorf("copying table %s: %w", t, err)
		}
		rep.Rows[t] = n
	}
	if err := ptx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("committing the copy: %w", err)
	}

	// Check on the target as the runtime reads it.
	pst, err = postgres.Open(ctx, to, nil)
	if err != nil {
		return rep, fmt.Errorf("reopening the PostgreSQL store: %w", err)
	}
	defer pst.Close()
	runs, err := pst.ListRuns(ctx)
	if err != nil {
		return rep, fmt.Errorf("listing the copied runs: %w", err)
	}
	for _, r := range runs {
		ps, err := pst.VerifyAudit(ctx, r.ID)
		if err != nil {
			return rep, fmt.Errorf("verifying run %s on PostgreSQL: %w", r.ID, err)
		}
		if len(ps) > 0 {
			return rep, fmt.Errorf("run %s's audit chain does not verify on PostgreSQL after the copy: %v", r.ID, ps[0])
		}
		rep.Runs++
	}
	return rep, nil
}

// column is one column of the target table.
type column struct {
	name, typ string
	defaulted bool // has a default or is an identity
}

// copyTable copies every row of table t, ordered by rowid, with the
// target's columns (each must exist in the source).
func copyTable(ctx context.Context, stx *sql.Tx, ptx pgx.Tx, t string) (int64, error) {
	rows, err := ptx.Query(ctx, `SELECT column_name, data_type, column_default IS NOT NULL OR is_identity = 'YES'
		FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, t)
	if err != nil {
		return 0, err
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		err := r.Scan(&c.name, &c.typ, &c.defaulted)
		return c, err
	})
	if err != nil {
		return 0, err
	}
	if len(cols) == 0 {
		return 0, fmt.Errorf("the PostgreSQL schema has no table %s", t)
	}
	srcCols, err := sqliteColumns(ctx, stx, t)
	if err != nil {
		return 0, err
	}
	// A PostgreSQL column SQLite lacks: rowid (the engine's explicit
	// insertion order) takes SQLite's implicit rowid, so rows keep their
	// order; another with a default takes it; any other is an error.
	var names, sel []string
	var kept []column
	identity := false
	for _, c := range cols {
		switch {
		case slices.Contains(srcCols, c.name):
			sel = append(sel, `"`+c.name+`"`)
		case c.name == "rowid":
			sel = append(sel, "rowid")
			identity = true
		case c.defaulted:
			continue
		default:
			return 0, fmt.Errorf("column %s is on PostgreSQL but not in the SQLite store, and has no default", c.name)
		}
		names = append(names, c.name)
		kept = append(kept, c)
	}
	cols = kept
	for _, c := range srcCols {
		if !slices.Contains(names, c) {
			return 0, fmt.Errorf("column %s is in the SQLite store but not on PostgreSQL: it would be lost", c)
		}
	}
	srows, err := stx.QueryContext(ctx, "SELECT "+strings.Join(sel, ", ")+` FROM "`+t+`" ORDER BY rowid`)
	if err != nil {
		return 0, err
	}
	defer srows.Close()
	var batch [][]any
	for srows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := srows.Scan(ptrs...); err != nil {
			return 0, err
		}
		for i, c := range cols {
			v, err := convert(vals[i], c.typ)
			if err != nil {
				return 0, fmt.Errorf("row %d, column %s: %w", len(batch)+1, c.name, err)
			}
			vals[i] = v
		}
		batch = append(batch, vals)
	}
	if err := srows.Err(); err != nil {
		return 0, err
	}
	if len(batch) == 0 {
		return 0, nil
	}
	n, err := ptx.CopyFrom(ctx, pgx.Identifier{t}, names, pgx.CopyFromRows(batch))
	if err != nil || !identity {
		return n, err
	}
	// The identity's next value comes after the copied rows.
	_, err = ptx.Exec(ctx, `SELECT setval(pg_get_serial_sequence($1, 'rowid'), (SELECT max(rowid) FROM `+pgx.Identifier{t}.Sanitize()+`))`, pgx.Identifier{t}.Sanitize())
	return n, err
}

func sqliteColumns(ctx context.Context, stx *sql.Tx, t string) ([]string, error) {
	rows, err := stx.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, t)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	if len(out) == 0 && rows.Err() == nil {
		return nil, fmt.Errorf("the SQLite store has no table %s", t)
	}
	return out, rows.Err()
}

// convert maps an SQLite value to what the PostgreSQL column of type typ
// takes, unchanged in content: text as text, blobs as bytes, integers as
// integers; 0/1 to a boolean; SQLite's RFC 3339 text to a timestamp.
func convert(v any, typ string) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch typ {
	case "text", "character varying", "character":
		switch x := v.(type) {
		case string:
			return x, nil
		case []byte:
			return string(x), nil
		}
	case "bytea":
		switch x := v.(type) {
		case []byte:
			if x == nil {
				return []byte{}, nil // an empty blob, not NULL
			}
			return x, nil
		case string:
			return []byte(x), nil
		}
	case "bigint", "integer", "smallint":
		if x, ok := v.(int64); ok {
			return x, nil
		}
	case "boolean":
		if x, ok := v.(int64); ok && (x == 0 || x == 1) {
			return x == 1, nil
		}
	case "double precision", "real", "numeric":
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return x, nil
		}
	case "json", "jsonb":
		switch x := v.(type) {
		case string:
			return []byte(x), nil
		case []byte:
			return x, nil
		}
	case "timestamp with time zone", "timestamp without time zone":
		if x, ok := v.(string); ok {
			tm, err := time.Parse(time.RFC3339Nano, x)
			if err != nil {
				return nil, fmt.Errorf("a time that does not parse: %v", err)
			}
			return tm, nil
		}
	}
	return nil, fmt.Errorf("a %T value for a %s column", v, typ)
}
