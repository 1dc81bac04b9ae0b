package postgres

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Dump returns every row of every table of the store's schema as text,
// for tests that search everything the store has written (for example
// for secret values): one line per row, the table name, then
// "column=value" pairs separated by tabs, text and bytea values as their
// raw bytes (not quoted or escaped), numbers in decimal, NULL as NULL, as
// store/sqlite's Dump writes them. Rows are in the order they were
// inserted where the table has a rowid column (which is left out, as
// SQLite's SELECT * leaves out its rowid), otherwise in column order. It
// reads one snapshot (a repeatable-read, read-only transaction).
func (s *Store) Dump(ctx context.Context) ([]byte, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("store: dump: %w", err)
	}
	defer tx.Rollback(context.Background())
	rows, err := tx.Query(ctx, `SELECT c.relname, a.attname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
		ORDER BY c.relname, a.attnum`)
	if err != nil {
		return nil, fmt.Errorf("store: dump: %w", err)
	}
	type table struct {
		name  string
		cols  []string
		rowid bool
	}
	var tables []*table
	for rows.Next() {
		var name, col string
		if err := rows.Scan(&name, &col); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: dump: %w", err)
		}
		if len(tables) == 0 || tables[len(tables)-1].name != name {
			tables = append(tables, &table{name: name})
		}
		tb := tables[len(tables)-1]
		if col == "rowid" {
			tb.rowid = true
			continue
		}
		tb.cols = append(tb.cols, col)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: dump: %w", err)
	}
	var buf bytes.Buffer
	for _, tb := range tables {
		quoted := make([]string, len(tb.cols))
		order := make([]string, len(tb.cols))
		for i, c := range tb.cols {
			quoted[i] = pgx.Identifier{c}.Sanitize()
			order[i] = strconv.Itoa(i + 1)
		}
		orderBy := strings.Join(order, ", ")
		if tb.rowid {
			orderBy = "rowid"
		}
		rows, err := tx.Query(ctx, `SELECT `+strings.Join(quoted, ", ")+` FROM `+pgx.Identifier{tb.name}.Sanitize()+` ORDER BY `+orderBy)
		if err != nil {
			return nil, fmt.Errorf("store: dump %s: %w", tb.name, err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("store: dump %s: %w", tb.name, err)
			}
			buf.WriteString(tb.name)
			for i, c := range tb.cols {
				buf.WriteByte('\t')
				buf.WriteString(c)
				buf.WriteByte('=')
				switch v := vals[i].(type) {
				case nil:
					buf.WriteString("NULL")
				case []byte:
					buf.Write(v)
				case string:
					buf.WriteString(v)
				default:
					fmt.Fprint(&buf, v)
				}
			}
			buf.WriteByte('\n')
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("store: dump %s: %w", tb.name, err)
		}
	}
	return buf.Bytes(), nil
}
