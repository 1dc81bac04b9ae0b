package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/openplaybook/openplaybook/store"
)

// CreateAgentToken stores a token of run (for agent, "" for any) by its
// hash and returns it. The INSERT goes with the next batch.
func (t *tx) CreateAgentToken(run, agent, hash, by string, expires time.Time) (store.AgentToken, error) {
	if err := t.lockLater(run); err != nil {
		return store.AgentToken{}, err
	}
	now, at := t.stamp()
	tok := store.AgentToken{ID: newID("tok_"), Run: run, Agent: agent, Hash: hash, CreatedBy: by, Created: at, Expires: expires.UTC()}
	if err := t.defer_(item{sql: `INSERT INTO agent_tokens (id, run, agent, hash, created_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		args: []any{tok.ID, run, agent, hash, by, now, formatTime(tok.Expires)}, what: "creating an agent token"}); err != nil {
		return store.AgentToken{}, err
	}
	return tok, nil
}

// RevokeAgentTokens revokes every token of run not revoked yet (id "") or
// the one token id, and returns the tokens it revoked.
func (t *tx) RevokeAgentTokens(run, id string) ([]store.AgentToken, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	now, at := t.stamp()
	var toks []store.AgentToken
	err := t.send(append(t.lockItem(run), item{
		sql: `WITH u AS (UPDATE agent_tokens SET revoked_at = $1 WHERE run = $2 AND ($3 = '' OR id = $3) AND revoked_at IS NULL
			RETURNING rowid, ` + tokenCols + `) SELECT ` + tokenCols + ` FROM u ORDER BY created_at, rowid`,
		args: []any{now, run, id}, what: "revoking agent tokens",
		rows: func(rows pgx.Rows) (err error) { toks, err = scanTokens(rows); return err },
	})...)
	if err != nil {
		return nil, err
	}
	for i := range toks {
		toks[i].Revoked = at
	}
	return toks, nil
}

const tokenCols = `id, run, agent, hash, created_by, created_at, expires_at, revoked_at`

func (s *Store) tokens(ctx context.Context, where string, args ...any) ([]store.AgentToken, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenCols+` FROM agent_tokens `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("store: reading agent tokens: %w", err)
	}
	return scanTokens(rows)
}

func scanTokens(rows pgx.Rows) ([]store.AgentToken, error) {
	defer rows.Close()
	var out []store.AgentToken
	for rows.Next() {
		var tok store.AgentToken
		var created, expires, revoked *string
		if err := rows.Scan(&tok.ID, &tok.Run, &tok.Agent, &tok.Hash, &tok.CreatedBy, &created, &expires, &revoked); err != nil {
			return nil, fmt.Errorf("store: reading agent tokens: %w", err)
		}
		tok.Created, tok.Expires, tok.Revoked = parseTime(created), parseTime(expires), parseTime(revoked)
		out = append(out, tok)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading agent tokens: %w", err)
	}
	return out, nil
}

// AgentTokenByHash returns the token with the hash, or [store.ErrNoToken].
func (s *Store) AgentTokenByHash(ctx context.Context, hash string) (store.AgentToken, error) {
	return s.oneToken(ctx, `WHERE hash = $1`, hash)
}

// AgentTokenByID returns the token with the id, or [store.ErrNoToken].
func (s *Store) AgentTokenByID(ctx context.Context, id string) (store.AgentToken, error) {
	return s.oneToken(ctx, `WHERE id = $1`, id)
}

func (s *Store) oneToken(ctx context.Context, where string, arg string) (store.AgentToken, error) {
	toks, err := s.tokens(ctx, where, arg)
	if err != nil {
		return store.AgentToken{}, err
	}
	if len(toks) == 0 {
		return store.AgentToken{}, store.ErrNoToken
	}
	return toks[0], nil
}

// AgentTokens lists run's tokens, oldest first.
func (s *Store) AgentTokens(ctx context.Context, run string) ([]store.AgentToken, error) {
	return s.tokens(ctx, `WHERE run = $1 ORDER BY created_at, rowid`, run)
}
