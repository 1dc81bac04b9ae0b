package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves run's MCP endpoint over stdio (newline-delimited
// JSON-RPC on in and out), for MCP clients that only launch commands
// (Claude Desktop): `openplaybook mcp --run RUN`. The agent token, from
// the environment, is checked as the HTTP endpoint checks it; every
// message is checked strictly, as there. It returns when in ends or ctx
// does, or when the run ends (its session ends with it); the run stays
// resumable.
func (s *Server) ServeStdio(ctx context.Context, run, token string, in io.Reader, out io.Writer) error {
	r, err := s.st.GetRun(ctx, run)
	if err != nil {
		return fmt.Errorf("run %s: %w ('openplaybook status' lists the runs)", run, err)
	}
	if r.Status.Ended() {
		return fmt.Errorf("run %s has ended (%s); there is nothing for an agent to do", run, r.Status)
	}
	if token == "" {
		return fmt.Errorf("OPENPLAYBOOK_AGENT_TOKEN is not set: set it to a token of run %s (the operator issues one with `openplaybook agent-token RUN` or POST /api/v1/runs/%s/agent-token)", run, run)
	}
	rec, err := AgentToken(ctx, s.st, run, token)
	if err != nil {
		return fmt.Errorf("%w (set OPENPLAYBOOK_AGENT_TOKEN to a token of run %s; the operator issues one with `openplaybook agent-token RUN` or POST /api/v1/runs/%s/agent-token)", err, run, run)
	}
	// The run executes in this process while the client is connected;
	// one that another process executes (openplaybook serve) cannot.
	unlock, err := s.st.LockRun(run)
	if err != nil {
		return fmt.Errorf("run %s is executing in another process (an openplaybook serve?): connect the agent there, at its /mcp/runs/%s, or stop it first (%v)", run, run, err)
	}
	unlock()
	ctx, cancel := s.untilEnded(ctx, run)
	defer cancel()
	w := &lockedWriter{w: out}
	pr, pw := io.Pipe()
	defer pr.Close() // the reader below stops at its next line
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), MaxAgentMessageBytes+1)
		for sc.Scan() {
			line := sc.Bytes()
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			// The token is checked again for every message, as the HTTP
			// endpoint checks it for every request: a revoked or expired
			// token, or an ended run, ends the session.
			if err := stillUsable(ctx, s.st, rec.ID, run); err != nil {
				msg := fmt.Sprintf("%v: the session ends", err)
				s.gateway.noteRejected(run, rec.ID, msg)
				w.writeLine(rejection(idOf(line), -32001, msg))
				break
			}
			if code, msg := checkAgentMessage(line); msg != "" {
				s.gateway.noteRejected(run, rec.ID, msg)
				w.writeLine(rejection(idOf(line), code, clipText(s.redact(msg), MaxReasonBytes)))
				continue
			}
			if _, err := pw.Write(append(slices.Clip(line), '\n')); err != nil {
				return
			}
		}
		if err := sc.Err(); err != nil {
			msg := fmt.Sprintf("the client sent a line over %d bytes", MaxAgentMessageBytes)
			s.gateway.noteRejected(run, rec.ID, msg)
			w.writeLine(rejection(nil, -32600, msg))
		}
		pw.Close()
	}()
	srv := s.gateway.newServer(run, rec.ID, rec.Agent)
	err = srv.Run(ctx, &mcp.IOTransport{Reader: pr, Writer: nopCloser{w}, MaxLineLength: MaxAgentMessageBytes + 1})
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// rejection is the JSON-RPC error answering a refused message: id as
// the message had it (null when it had none, or one that is not
// echoed; see [idOf]).
func rejection(id jsontext.Value, code int, msg string) []byte {
	if len(id) == 0 {
		id = jsontext.Value("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "error": map[string]any{"code": code, "message": msg}})
	return b
}

// lockedWriter serialises whole lines from the transport and from the
// gateway's own rejections.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) writeLine(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(append(b, '\n'))
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
