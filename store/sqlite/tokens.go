package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/openplaybook/openplaybook/store"
)

// CreateAgentToken stores a token of run (for agent, "" for any) by its
// hash and returns it.
func (t *Tx) CreateAgentToken(run, agent, hash, by string, expires time.Time) (store.AgentToken, error) {
	now, at := t.stamp()
	tok := store.AgentToken{ID: newID("tok_"), Run: run, Agent: agent, Hash: hash, CreatedBy: by, Created: at, Expires: expires.UTC()}
	_, err := t.exec(`INSERT INTO agent_tokens (id, run, agent, hash, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		tok.ID, run, agent, hash, by, now, formatTime(tok.Expires))
	if err != nil {
		return store.AgentToken{}, fmt.Errorf("store: creating an agent token: %w", err)
	}
	return tok, nil
}

// RevokeAgentTokens revokes every token of run not revoked yet (id "" ) or
// the one token id, and returns the tokens it revoked.
func (t *Tx) RevokeAgentTokens(run, id string) ([]store.AgentToken, error) {
	toks, err := listTokens(context.Background(), t, `WHERE run = ? AND (? = '' OR id = ?) AND revoked_at IS NULL`, run, id, id)
	if err != nil {
		return nil, err
	}
	now, at := t.stamp()
	for i := range toks {
		if _, err := t.exec(`UPDATE agent_tokens SET revoked_at = ? WHERE id = ?`, now, toks[i].ID); err != nil {
			return nil, fmt.Errorf("store: revoking an agent token: %w", err)
		}
		toks[i].Revoked = at
	}
	return toks, nil
}

// AgentTokenByHash returns the token with the hash, or [ErrNoToken].
func (s *Store) AgentTokenByHash(ctx context.Context, hash string) (store.AgentToken, error) {
	toks, err := listTokens(ctx, s.pool(), `WHERE hash = ?`, hash)
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
	return listTokens(ctx, s.pool(), `WHERE run = ? ORDER BY created_at, rowid`, run)
}

func listTokens(ctx context.Context, q querier, where string, args ...any) ([]store.AgentToken, error) {
	rows, err := q.query(ctx, `SELECT id, run, agent, hash, created_by, created_at, expires_at, revoked_at FROM agent_tokens `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("store: reading agent tokens: %w", err)
	}
	defer rows.Close()
	var out []store.AgentToken
	for rows.Next() {
		var tok store.AgentToken
		var created, expires, revoked sql.NullString
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

// AgentTokenByID returns the token with the id, or [ErrNoToken].
func (s *Store) AgentTokenByID(ctx context.Context, id string) (store.AgentToken, error) {
	toks, err := listTokens(ctx, s.pool(), `WHERE id = ?`, id)
	if err != nil {
		return store.AgentToken{}, err
	}
	if len(toks) == 0 {
		return store.AgentToken{}, store.ErrNoToken
	}
	return toks[0], nil
}
