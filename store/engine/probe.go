package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/openplaybook/openplaybook/harness"
)

// Finding kinds of [Probe].
const (
	// Unreachable: no connection to the server (refused, no route, DNS,
	// TLS, timeout).
	Unreachable = "unreachable"
	// Auth: the server refused the role or its password.
	Auth = "auth"
	// NoDatabase: the URL's database does not exist.
	NoDatabase = "database"
	// SchemaNewer: the database's schema is newer than this build knows
	// (an error: this build must not write it).
	SchemaNewer = "schema-newer"
	// SchemaOlder: the schema is older; opening the store migrates it (a
	// warning).
	SchemaOlder = "schema-older"
	// SchemaNone: no openplaybook tables yet; opening the store creates
	// them (a note).
	SchemaNone = "schema-none"
	// Other: any other failure (a query error, a malformed URL).
	Other = "other"
)

// ProbeTimeout bounds [Probe]'s connection and queries.
const ProbeTimeout = 10 * time.Second

// Finding is one thing [Probe] found.
type Finding struct {
	// Kind is one of the kinds above.
	Kind string
	// Error is true for what stops a run; false for a warning or note.
	Error bool
	// Message says what was found and what to do, never the URL nor its
	// password.
	Message string
}

// Probe checks that the store hs names can be used, without changing it:
// for PostgreSQL it connects with the resolved store.postgres.url (bounded
// by [ProbeTimeout]), and reads the schema version (table
// schema_version) to compare it with this build's. For SQLite it finds
// nothing: the file is created by the first run. A URL secret that does
// not resolve gives no finding (the secret's own preflight reports it).
func Probe(ctx context.Context, hs *harness.Harness, sec *harness.Secrets) []Finding {
	if hs.Store.Postgres == nil {
		return nil
	}
	if sec == nil {
		sec = hs.SecretResolver()
	}
	u, err := hs.Store.Postgres.Expand(sec)
	if err != nil {
		var se *harness.SecretError
		if errors.As(err, &se) {
			return nil
		}
		return []Finding{{Kind: Other, Error: true, Message: ScrubText(err.Error(), u)}}
	}
	fs := probePostgres(ctx, u, pgSchemaVersion)
	for i := range fs {
		fs[i].Message = ScrubText(fs[i].Message, u)
	}
	return fs
}

// probePostgres connects to u and compares the schema version with want
// (0: not compared).
func probePostgres(ctx context.Context, u string, want int) []Finding {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return []Finding{{Kind: Other, Error: true, Message: "store.postgres.url cannot be read as a PostgreSQL connection URL: " + ScrubText(err.Error(), u)}}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return []Finding{classify(err, cfg)}
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('schema_version') IS NOT NULL`).Scan(&exists); err != nil {
		return []Finding{{Kind: Other, Error: true, Message: fmt.Sprintf("connected, but reading the catalog failed: %v", err)}}
	}
	if !exists {
		return []Finding{{Kind: SchemaNone, Message: fmt.Sprintf("connected to database %q as %q; it has no openplaybook tables yet: the first run creates them (schema version %d), which needs a role that may create tables there (docs/store.md, \"Pointing a harness at PostgreSQL\")", cfg.Database, cfg.User, want)}}
	}
	var v int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return []Finding{{Kind: Other, Error: true, Message: fmt.Sprintf("connected, but reading the schema version failed: %v", err)}}
	}
	switch {
	case want == 0:
	case v > want:
		return []Finding{{Kind: SchemaNewer, Error: true, Message: fmt.Sprintf("the database's openplaybook schema is version %d, newer than this build knows (%d): a newer openplaybook wrote it; run that release, or point store.postgres.url at another database", v, want)}}
	case v < want:
		return []Finding{{Kind: SchemaOlder, Message: fmt.Sprintf("the database's openplaybook schema is version %d, older than this build's %d: the next run migrates it, which needs a role that may alter the tables (docs/store.md)", v, want)}}
	}
	return nil
}

// classify turns a connection error into a finding.
func classify(err error, cfg *pgx.ConnConfig) Finding {
	where := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "28P01", "28000":
			return Finding{Kind: Auth, Error: true, Message: fmt.Sprintf("the PostgreSQL server at %s refused role %q: %s (SQLSTATE %s); check the user and password in store.postgres.url's secret, and pg_hba.conf", where, cfg.User, pe.Message, pe.Code)}
		case "3D000":
			return Finding{Kind: NoDatabase, Error: true, Message: fmt.Sprintf("the PostgreSQL server at %s has no database %q (SQLSTATE 3D000); create it (createdb) or fix the URL's path", where, cfg.Database)}
		}
		return Finding{Kind: Other, Error: true, Message: fmt.Sprintf("the PostgreSQL server at %s refused the connection: %s (SQLSTATE %s)", where, pe.Message, pe.Code)}
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return Finding{Kind: Unreachable, Error: true, Message: fmt.Sprintf("cannot reach the PostgreSQL server at %s: %v", where, err)}
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return Finding{Kind: Unreachable, Error: true, Message: fmt.Sprintf("cannot reach the PostgreSQL server at %s: %v", where, err)}
	}
	return Finding{Kind: Other, Error: true, Message: fmt.Sprintf("connecting to the PostgreSQL server at %s failed: %v", where, err)}
}
