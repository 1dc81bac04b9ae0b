package sqlite

import (
	"database/sql"
	"slices"
	"testing"

	"github.com/openplaybook/openplaybook/store"
)

// TestChainedColumnsCoverTheSchema: every column of the run-state tables
// is either compared with the audit chain (ChainedColumns) or says why it
// is not (UnchainedColumns), never both; a column added to the schema
// fails here until it is classified, and so joins the byte-flip test of
// package runtime, which flips every chained column. Every table of the
// schema is a run-state table or one the lists say they leave out.
func TestChainedColumnsCoverTheSchema(t *testing.T) {
	s := openTest(t)
	db, err := sql.Open("sqlite", "file:"+s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	chained := map[store.Column]bool{}
	for _, c := range store.ChainedColumns {
		if chained[c] {
			t.Errorf("%s is listed twice in ChainedColumns", c)
		}
		chained[c] = true
		if _, ok := store.UnchainedColumns[c]; ok {
			t.Errorf("%s is both chained and unchained", c)
		}
	}
	seen := map[store.Column]bool{}
	for _, table := range store.RunStateTables {
		rows, err := db.Query(`SELECT name FROM pragma_table_info(?)`, table)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			n++
			c := store.Column{Table: table, Name: name}
			seen[c] = true
			if _, ok := store.UnchainedColumns[c]; !ok && !chained[c] {
				t.Errorf("column %s is in neither ChainedColumns nor UnchainedColumns: say whether the audit chain records it", c)
			}
		}
		rows.Close()
		if n == 0 {
			t.Errorf("RunStateTables names %q, which the schema does not have", table)
		}
	}
	for c := range chained {
		if !seen[c] {
			t.Errorf("ChainedColumns lists %s, which the schema does not have", c)
		}
	}
	for c := range store.UnchainedColumns {
		if !seen[c] {
			t.Errorf("UnchainedColumns lists %s, which the schema does not have", c)
		}
	}
	others := []string{"audit", "schema_version", "agent_tokens", "outbox", "customers", "notes", "today", "replicas", "vault", "vault_leases", "console_logins"}
	rows, err := db.Query(`SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(store.RunStateTables, name) && !slices.Contains(others, name) {
			t.Errorf("table %q is neither a run-state table nor one RunStateTables says it leaves out", name)
		}
	}
}
