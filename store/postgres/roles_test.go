package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/openplaybook/openplaybook/internal/pgtest"
	"github.com/openplaybook/openplaybook/store"
)

// runtimeGrants are docs/store.md's grants of the runtime role ({role})
// on the store's schema ({schema}), which the migration role owns.
const runtimeGrants = `
GRANT USAGE ON SCHEMA {schema} TO {role};
GRANT SELECT ON {schema}.schema_version TO {role};
GRANT SELECT, INSERT, UPDATE ON {schema}.runs, {schema}.steps, {schema}.calls, {schema}.approvals, {schema}.gates,
	{schema}.agent_tokens, {schema}.outbox, {schema}.customers, {schema}.notes, {schema}.today TO {role};
GRANT SELECT, INSERT ON {schema}.audit TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.vault, {schema}.vault_leases,
	{schema}.replicas, {schema}.console_logins TO {role};
`

// TestRuntimeRoleCannotRewriteAudit: connected as the runtime role of
// docs/store.md, a store runs audited calls, while every way of changing
// or removing audit records the role could try is refused by the
// database: UPDATE, DELETE, TRUNCATE, disabling or dropping the
// triggers, dropping the table, turning triggers off for the session,
// and DDL at all. As the owner (here a superuser) the triggers still
// refuse UPDATE, DELETE and TRUNCATE. The chain verifies afterwards.
func TestRuntimeRoleCannotRewriteAudit(t *testing.T) {
	ownerURL := pgtest.Schema(t)
	owner := openURL(t, ownerURL, nil) // migrates, as the owner
	owner.Close()

	var rnd [6]byte
	rand.Read(rnd[:])
	role := "opb_runtime_" + hex.EncodeToString(rnd[:])
	password := hex.EncodeToString(rnd[:]) + "pw"
	admin, err := pgx.Connect(bg, ownerURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	schema := ""
	if err := admin.QueryRow(bg, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(bg, `CREATE ROLE `+role+` LOGIN PASSWORD '`+password+`'`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), ownerURL)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), `DROP OWNED BY `+role+`; DROP ROLE `+role); err != nil {
			t.Errorf("dropping the runtime role: %v", err)
		}
	})
	grants := strings.NewReplacer("{schema}", pgx.Identifier{schema}.Sanitize(), "{role}", role).Replace(runtimeGrants)
	if _, err := admin.Exec(bg, grants); err != nil {
		t.Fatal(err)
	}

	u, err := url.Parse(ownerURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	runtimeURL := u.String()

	// The store works as the runtime role: nothing to migrate.
	s := openURL(t, runtimeURL, nil)
	run, attempt := newRun(t, s)
	for i := range 3 {
		mustTx(t, s, func(tx store.Tx) error {
			_, err := auditedCall(tx, run, "work", attempt, "note.add", `{"i":`+string(rune('0'+i))+`}`)
			return err
		})
	}
	before, err := s.Audit(bg, run)
	if err != nil || len(before) != 7 {
		t.Fatalf("%d records, %v; want 7", len(before), err)
	}

	rt, err := pgx.Connect(bg, runtimeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	for _, stmt := range []string{
		`UPDATE audit SET kind = 'forged' WHERE run = '` + run + `'`,
		`DELETE FROM audit WHERE run = '` + run + `'`,
		`TRUNCATE audit`,
		`TRUNCATE audit CASCADE`,
		`ALTER TABLE audit DISABLE TRIGGER audit_no_update`,
		`ALTER TABLE audit DISABLE TRIGGER ALL`,
		`DROP TRIGGER audit_no_delete ON audit`,
		`DROP FUNCTION audit_append_only() CASCADE`,
		`CREATE OR REPLACE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$`,
		`DROP TABLE audit CASCADE`,
		`ALTER TABLE audit RENAME TO audit_old`,
		`SET session_replication_role = replica`,
		`CREATE TABLE audit2 (x int)`,
		`UPDATE runs SET audit_last_seq = 0, audit_last_hash = '' WHERE id = '` + run + `'`,
	} {
		_, err := rt.Exec(bg, stmt)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			t.Errorf("as the runtime role, %s: %v, want the database to refuse it", stmt, err)
			continue
		}
		t.Logf("refused: %s: %s %s", stmt, pe.Code, pe.Message)
	}

	// The owner (a superuser here) is refused by the triggers.
	for _, stmt := range []string{
		`UPDATE audit SET kind = 'forged' WHERE run = '` + run + `'`,
		`DELETE FROM audit WHERE run = '` + run + `'`,
		`TRUNCATE audit`,
	} {
		_, err := admin.Exec(bg, stmt)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "OPB10" {
			t.Errorf("as the owner, %s: %v, want the append-only trigger's refusal", stmt, err)
		}
	}

	after, err := s.Audit(bg, run)
	if err != nil || len(after) != len(before) {
		t.Fatalf("%d records after, %v; want %d", len(after), err, len(before))
	}
	for i := range after {
		if !reflect.DeepEqual(after[i], before[i]) {
			t.Errorf("record %d changed: %+v", i+1, after[i])
		}
	}
	if probs, err := s.VerifyAudit(bg, run); err != nil || len(probs) != 0 {
		t.Errorf("VerifyAudit = %v, %v", probs, err)
	}
	// And runs go on.
	mustTx(t, s, func(tx store.Tx) error {
		_, err := auditedCall(tx, run, "work", attempt, "note.add", `{"after":true}`)
		return err
	})
}
