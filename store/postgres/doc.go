// Package postgres is the PostgreSQL engine of the [store] contract
// (github.com/jackc/pgx/v5): the same tables as store/sqlite, in
// PostgreSQL's dialect, one PostgreSQL transaction per Tx or queued
// function on a pooled connection, run locks as session advisory locks.
// See docs/store.md, "PostgreSQL".
package postgres
