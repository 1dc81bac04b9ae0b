package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
)

// Dump returns every row of every table as text, for tests that search
// everything the store has written (for example for secret values). Each
// row is one line: the table name, then "column=value" pairs separated by
// tabs, with TEXT and BLOB values written as their raw bytes (not quoted or
// escaped, so a search finds a value exactly as it was stored), numbers in
// decimal and NULL as NULL. The format is for searching, not parsing.
func (s *Store) Dump(ctx context.Context) ([]byte, error) {
	tx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: dump: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: dump: %w", err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return nil, err
		}
		tables = append(tables, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for _, table := range tables {
		rows, err := tx.QueryContext(ctx, `SELECT * FROM "`+table+`" ORDER BY rowid`)
		if err != nil {
			// A WITHOUT ROWID table has no rowid.
			rows, err = tx.QueryContext(ctx, `SELECT * FROM "`+table+`"`)
		}
		if err != nil {
			return nil, fmt.Errorf("store: dump %s: %w", table, err)
		}
		cols, err := rows.Columns()
		if err != nil {
			rows.Close()
			return nil, err
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, fmt.Errorf("store: dump %s: %w", table, err)
			}
			buf.WriteString(table)
			for i, c := range cols {
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
				case int64:
					buf.WriteString(strconv.FormatInt(v, 10))
				case float64:
					buf.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
				default:
					fmt.Fprint(&buf, v)
				}
			}
			buf.WriteByte('\n')
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("store: dump %s: %w", table, err)
		}
	}
	return buf.Bytes(), nil
}
