// Package rawcommit is the peer the store's and the runtime's benchmarks
// measure against: bare SQLite commits, one tiny INSERT per transaction
// (BEGIN IMMEDIATE ... COMMIT), WAL, synchronous=FULL, through
// database/sql and modernc.org/sqlite as the store uses them, with
// nothing of the store around it (BENCHMARKS.md, round 3).
package rawcommit

import (
	"database/sql"
	"fmt"

	_ "modernc.org/sqlite"
)

// DB is a database for raw commits.
type DB struct {
	db  *sql.DB
	ins *sql.Stmt
	n   int
}

// Open creates the database file at path (which must not exist yet) with
// one table.
func Open(path string) (*DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		db.Close()
		return nil, fmt.Errorf("rawcommit: journal mode %q (%v), want wal", mode, err)
	}
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)`); err != nil {
		db.Close()
		return nil, err
	}
	ins, err := db.Prepare(`INSERT INTO t (v) VALUES (?)`)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &DB{db: db, ins: ins}, nil
}

// Commit makes n commits of one tiny insert each.
func (d *DB) Commit(n int) error {
	for range n {
		tx, err := d.db.Begin() // BEGIN IMMEDIATE (_txlock)
		if err != nil {
			return err
		}
		d.n++
		if _, err := tx.Stmt(d.ins).Exec(d.n); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// Close closes the database.
func (d *DB) Close() error {
	d.ins.Close()
	return d.db.Close()
}
