// Command chaincheck is the peer `openplaybook audit --verify` is
// measured against (BENCHMARKS.md, issue 20): a bare streaming SHA-256
// hash-chain check of one run's audit records in a store file written
// by bench/auditgen. It reads the records in seq order in one query
// through the SQLite driver the store uses, checks that each seq follows
// the one before, that each record's prev is the hash before it and that
// its hash is the SHA-256 of its RFC 8785 canonical content
// (audit.Record.Canonical), and that the log ends at the run's head;
// it keeps nothing of a record once checked and compares no row.
//
//	go run ./bench/chaincheck -db DIR/store.db RUN
//
// It prints the records checked and exits 1 when the chain breaks.
package main

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"flag"
	"fmt"
	"os"

	"github.com/go-json-experiment/json/jsontext"
	_ "modernc.org/sqlite"

	"github.com/openplaybook/openplaybook/audit"
)

func main() {
	path := flag.String("db", "", "the SQLite store file (required)")
	flag.Parse()
	if *path == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: chaincheck -db FILE RUN")
		os.Exit(2)
	}
	n, bad, err := check(*path, flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaincheck:", err)
		os.Exit(2)
	}
	fmt.Printf("%d records, %d broken\n", n, bad)
	if bad > 0 {
		os.Exit(1)
	}
}

func check(path, run string) (n, bad int64, err error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	var headSeq int64
	var headHash string
	if err := db.QueryRow(`SELECT audit_last_seq, audit_last_hash FROM runs WHERE id = ?`, run).Scan(&headSeq, &headHash); err != nil {
		return 0, 0, err
	}
	rows, err := db.Query(`SELECT run, seq, time, kind, step, tool, data, prev, hash FROM audit WHERE run = ? ORDER BY seq`, run)
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	prev, prevSeq := audit.Genesis, int64(0)
	for rows.Next() {
		var r audit.Record
		var tool, data []byte
		if err := rows.Scan(&r.Run, &r.Seq, &r.Time, &r.Kind, &r.Step, &tool, &data, &r.Prev, &r.Hash); err != nil {
			return n, bad, err
		}
		r.Tool = string(tool)
		if len(data) > 0 {
			r.Data = jsontext.Value(data)
		}
		n++
		c, err := r.Canonical()
		sum := sha256.Sum256(c)
		if err != nil || r.Seq != prevSeq+1 || r.Prev != prev || hex.EncodeToString(sum[:]) != r.Hash {
			bad++
		}
		prev, prevSeq = r.Hash, r.Seq
	}
	if err := rows.Err(); err != nil {
		return n, bad, err
	}
	if prevSeq != headSeq || prev != headHash {
		bad++
	}
	return n, bad, nil
}
