package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// migrations[i] brings the schema from version i to version i+1. Append
// new migrations; never edit one that has shipped.
var migrations = []string{
	// 1: the first schema.
	`
CREATE TABLE runs (
	id               TEXT PRIMARY KEY,
	playbook_id      TEXT NOT NULL,
	playbook_version TEXT NOT NULL,
	document_digest  TEXT NOT NULL,
	document         BLOB NOT NULL,
	harness_path     TEXT NOT NULL,
	input            TEXT,
	status           TEXT NOT NULL CHECK (status IN ('running', 'waiting', 'completed', 'rejected', 'failed')),
	current_step     TEXT NOT NULL,
	reason           TEXT NOT NULL,
	created_at       TEXT NOT NULL,
	updated_at       TEXT NOT NULL,
	audit_last_seq   INTEGER NOT NULL,
	audit_last_hash  TEXT NOT NULL
) STRICT;

CREATE TABLE steps (
	run         TEXT NOT NULL REFERENCES runs (id),
	step        TEXT NOT NULL,
	attempt     INTEGER NOT NULL CHECK (attempt >= 1),
	status      TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'waiting')),
	output      TEXT,
	error       TEXT NOT NULL,
	started_at  TEXT NOT NULL,
	finished_at TEXT,
	PRIMARY KEY (run, step, attempt)
) STRICT;

CREATE TABLE calls (
	run            TEXT NOT NULL,
	step           TEXT NOT NULL,
	attempt        INTEGER NOT NULL,
	idx            INTEGER NOT NULL CHECK (idx >= 0),
	tool           BLOB NOT NULL,
	def_digest     TEXT NOT NULL,
	args           TEXT,
	args_digest    TEXT NOT NULL,
	decision       TEXT NOT NULL CHECK (decision IN ('allowed', 'refused', 'waiting')),
	reason         TEXT NOT NULL,
	state          TEXT NOT NULL CHECK (state IN ('started', 'succeeded', 'failed', 'outcome_unknown', 'refused', 'waiting')),
	side_effecting INTEGER NOT NULL CHECK (side_effecting IN (0, 1)),
	result         TEXT,
	error          TEXT NOT NULL,
	started_at     TEXT NOT NULL,
	finished_at    TEXT,
	UNIQUE (run, step, attempt, idx),
	FOREIGN KEY (run, step, attempt) REFERENCES steps (run, step, attempt)
) STRICT;

CREATE INDEX calls_state ON calls (state) WHERE state IN ('started', 'outcome_unknown', 'waiting');

CREATE TABLE approvals (
	id           TEXT PRIMARY KEY,
	kind         TEXT NOT NULL CHECK (kind IN ('call', 'outcome_unknown')),
	run          TEXT NOT NULL REFERENCES runs (id),
	step         TEXT NOT NULL,
	tool         BLOB NOT NULL,
	def_digest   TEXT NOT NULL,
	args_digest  TEXT NOT NULL,
	call_attempt INTEGER,
	call_idx     INTEGER,
	status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'used')),
	reason       TEXT NOT NULL,
	decided_by   TEXT NOT NULL,
	created_at   TEXT NOT NULL,
	expires_at   TEXT,
	decided_at   TEXT,
	used_at      TEXT,
	CHECK ((call_attempt IS NULL) = (call_idx IS NULL)),
	FOREIGN KEY (run, step, call_attempt, call_idx) REFERENCES calls (run, step, attempt, idx)
) STRICT;

CREATE INDEX approvals_match ON approvals (run, step, tool, def_digest, args_digest) WHERE status = 'approved';
CREATE INDEX approvals_run ON approvals (run, status);

CREATE TABLE gates (
	run        TEXT NOT NULL,
	step       TEXT NOT NULL,
	attempt    INTEGER NOT NULL,
	status     TEXT NOT NULL CHECK (status IN ('waiting', 'approved', 'rejected')),
	reason     TEXT NOT NULL,
	decided_by TEXT NOT NULL,
	opened_at  TEXT NOT NULL,
	decided_at TEXT,
	PRIMARY KEY (run, step, attempt),
	FOREIGN KEY (run, step, attempt) REFERENCES steps (run, step, attempt)
) STRICT;

CREATE TABLE audit (
	run  TEXT NOT NULL REFERENCES runs (id),
	seq  INTEGER NOT NULL CHECK (seq >= 1),
	time TEXT NOT NULL,
	kind TEXT NOT NULL,
	step TEXT NOT NULL,
	tool BLOB NOT NULL,
	data TEXT,
	prev TEXT NOT NULL,
	hash TEXT NOT NULL,
	PRIMARY KEY (run, seq)
) STRICT;

CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
	SELECT RAISE(ABORT, 'audit records are append-only: UPDATE refused');
END;

CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN
	SELECT RAISE(ABORT, 'audit records are append-only: DELETE refused');
END;

CREATE TRIGGER audit_head_forward BEFORE UPDATE OF audit_last_seq ON runs
WHEN NEW.audit_last_seq < OLD.audit_last_seq
BEGIN
	SELECT RAISE(ABORT, 'the audit head only moves forward');
END;

CREATE TABLE customers (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	email      TEXT NOT NULL,
	company    TEXT NOT NULL,
	plan       TEXT NOT NULL,
	tags       TEXT NOT NULL,
	created_at TEXT
) STRICT;

CREATE TABLE notes (
	id          TEXT PRIMARY KEY,
	customer_id TEXT NOT NULL,
	body        TEXT NOT NULL,
	tags        TEXT NOT NULL,
	author      TEXT NOT NULL,
	run         TEXT NOT NULL,
	step        TEXT NOT NULL,
	created_at  TEXT NOT NULL
) STRICT;

CREATE INDEX notes_customer ON notes (customer_id, created_at);

CREATE TABLE today (
	id           TEXT PRIMARY KEY,
	title        TEXT NOT NULL,
	summary      TEXT NOT NULL,
	priority     TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high')),
	customer_id  TEXT NOT NULL,
	link         TEXT NOT NULL,
	run          TEXT NOT NULL,
	step         TEXT NOT NULL,
	created_at   TEXT NOT NULL,
	dismissed_at TEXT
) STRICT;
`,
	// 2: a refusal's stable code in its own column, never parsed back out
	// of the reason text.
	`
ALTER TABLE calls ADD COLUMN code TEXT NOT NULL DEFAULT '';
`,
	// 3: bearer tokens of runs' external agents, by SHA-256 hash only.
	`
CREATE TABLE agent_tokens (
	id         TEXT PRIMARY KEY,
	run        TEXT NOT NULL REFERENCES runs (id),
	agent      TEXT NOT NULL,
	hash       TEXT NOT NULL UNIQUE,
	created_by TEXT NOT NULL,
	created_at TEXT NOT NULL,
	expires_at TEXT NOT NULL,
	revoked_at TEXT
) STRICT;
CREATE INDEX agent_tokens_run ON agent_tokens (run);
`,
	// 4: lists of runs read one page from an index that holds every
	// column a list shows (Store.RunPage), never a run's row with its
	// document; waiting gates found by run.
	`
CREATE INDEX runs_list ON runs (created_at DESC, id, status, playbook_id, playbook_version, current_step, reason, updated_at);
CREATE INDEX gates_waiting ON gates (run) WHERE status = 'waiting';
`,
	// 5: the notifications' outbox (store.Outbox): one row per event owed
	// to an endpoint.
	`
CREATE TABLE outbox (
	endpoint   TEXT NOT NULL,
	event_id   TEXT NOT NULL,
	event      BLOB NOT NULL,
	attempts   INTEGER NOT NULL CHECK (attempts >= 0),
	next_at    TEXT NOT NULL,
	last_error TEXT NOT NULL,
	done       INTEGER NOT NULL CHECK (done IN (0, 1)),
	dead       INTEGER NOT NULL CHECK (dead IN (0, 1)),
	created_at TEXT NOT NULL,
	PRIMARY KEY (endpoint, event_id)
) STRICT;
CREATE INDEX outbox_due ON outbox (next_at) WHERE done = 0 AND dead = 0;
`,
	// 6: replicas of serve and run ownership (docs/store.md, "Replicas").
	// One process uses an SQLite store: it claims runs as a replica of
	// one, and nothing adopts them.
	`
ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN owner_epoch INTEGER NOT NULL DEFAULT 0;
CREATE TABLE replicas (
	id         TEXT PRIMARY KEY,
	address    TEXT NOT NULL,
	lock_key   INTEGER NOT NULL,
	started_at TEXT NOT NULL
) STRICT;
`,
	// 7: the credential vault (store.Vault): sealed OAuth tokens by
	// destination, and the leases that make a refresh single-flight.
	`
CREATE TABLE vault (
	name       TEXT PRIMARY KEY,
	sealed     BLOB NOT NULL,
	version    INTEGER NOT NULL CHECK (version >= 1),
	updated_at TEXT NOT NULL
) STRICT;
CREATE TABLE vault_leases (
	name   TEXT PRIMARY KEY,
	holder TEXT NOT NULL,
	until  TEXT NOT NULL
) STRICT;
`,
	// 8: console logins (store.ConsoleLogins): by the SHA-256 of the
	// session cookie, so that a login holds on every replica.
	`
CREATE TABLE console_logins (
	hash       TEXT PRIMARY KEY,
	csrf_hash  TEXT NOT NULL,
	who        BLOB NOT NULL,
	created_at TEXT NOT NULL,
	expires_at TEXT NOT NULL
) STRICT;
CREATE INDEX console_logins_expires ON console_logins (expires_at);
`,
}

// SchemaVersion is the schema version this engine creates and reads.
var SchemaVersion = len(migrations)

// migrate brings the database to SchemaVersion in one transaction per
// migration. A database newer than this package is an error.
func migrate(db *sql.DB) error {
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
	version    INTEGER PRIMARY KEY,
	applied_at TEXT NOT NULL
) STRICT`); err != nil {
		return fmt.Errorf("creating schema_version: %w", err)
	}
	for {
		done, err := migrateOne(ctx, db)
		if err != nil || done {
			return err
		}
	}
}

func migrateOne(ctx context.Context, db *sql.DB) (done bool, err error) {
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: two processes opening at once take turns
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return false, fmt.Errorf("reading schema version: %w", err)
	}
	if v > len(migrations) {
		return false, fmt.Errorf("the database has schema version %d; this build knows versions up to %d", v, len(migrations))
	}
	if v == len(migrations) {
		return true, nil
	}
	if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
		return false, fmt.Errorf("migrating to schema version %d: %w", v+1, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`, v+1, formatTime(time.Now())); err != nil {
		return false, err
	}
	return false, tx.Commit()
}
