package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// AgentToken is a bearer token of a run's external agent (docs/serve.md).
// The store keeps only the SHA-256 of the token, hex (Hash): a copy of the
// database does not hold a usable token.
type AgentToken struct {
	ID  string // "tok_" and 16 hex digits
	Run string
	// Agent is the agent name the token is for ("": every step of the
	// run bound to driver mcp).
	Agent     string
	Hash      string
	CreatedBy string
	Created   time.Time
	Expires   time.Time
	Revoked   time.Time // zero: not revoked
}

// ErrNoToken is returned when no agent token has the hash or id asked for.
var ErrNoToken = errors.New("no such agent token")

// CreateAgentToken stores a token of run (for agent, "" for any) by its
// hash and returns it.
func (t *Tx) CreateAgentToken(run, agent, hash, by string, expires time.Time) (AgentToken, error) {
	now, at := t.stamp()
	tok := AgentToken{ID: newID("tok_"), Run: run, Agent: agent, Hash: hash, CreatedBy: by, Created: at, Expires: expires.UTC()}
	_, err := t.exec(`INSERT INTO agent_tokens (id, run, agent, hash, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		tok.ID, run, agent, hash, by, now, formatTime(tok.Expires))
	if err != nil {
		return AgentToken{}, fmt.Errorf("store: creating an agent token: %w", err)
	}
	return tok, nil
}

// RevokeAgentTokens revokes every token of run not revoked yet (id "" ) or
// the one token id, and returns the tokens it revoked.
func (t *Tx) RevokeAgentTokens(run, id string) ([]AgentToken, error) {
	toks, err := listTokens(context.Background(), t.tx, `WHERE run = ? AND (? = '' OR id = ?) AND revoked_at IS NULL`, run, id, id)
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
func (s *Store) AgentTokenByHash(ctx context.Context, hash string) (AgentToken, error) {
	toks, err := listTokens(ctx, s.pool(), `WHERE hash = ?`, hash)
	if err != nil {
		return AgentToken{}, err
	}
	if len(toks) == 0 {
		return AgentToken{}, ErrNoToken
	}
	return toks[0], nil
}

// AgentTokens lists run's tokens, oldest first.
func (s *Store) AgentTokens(ctx context.Context, run string) ([]AgentToken, error) {
	return listTokens(ctx, s.pool(), `WHERE run = ? ORDER BY created_at, rowid`, run)
}

func listTokens(ctx context.Context, q querier, where string, args ...any) ([]AgentToken, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, run, agent, hash, created_by, created_at, expires_at, revoked_at FROM agent_tokens `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("store: reading agent tokens: %w", err)
	}
	defer rows.Close()
	var out []AgentToken
	for rows.Next() {
		var tok AgentToken
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
func (s *Store) AgentTokenByID(ctx context.Context, id string) (AgentToken, error) {
	toks, err := listTokens(ctx, s.pool(), `WHERE id = ?`, id)
	if err != nil {
		return AgentToken{}, err
	}
	if len(toks) == 0 {
		return AgentToken{}, ErrNoToken
	}
	return toks[0], nil
}
