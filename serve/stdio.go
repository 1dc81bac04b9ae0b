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
	w := &lockedWriter{w: out, pending: newPending()}
	// When the run ends, the session ends once every request passed on
	// is answered (go-sdk writes no answer once a session is closing).
	ctx, cancel := s.untilEnded(ctx, run, w.pending.wait)
	defer cancel()
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
			if isRequest(line) {
				w.pending.add(1)
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
	srv := s.gateway.newServer(run, rec.ID, rec.Agent, false)
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
// gateway's own rejections, and counts the answers the transport wrote.
type lockedWriter struct {
	mu      sync.Mutex
	w       io.Writer
	pending *pending // requests passed to the transport, not yet answered
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	n, err := l.w.Write(p)
	l.mu.Unlock()
	if isResponse(p) {
		l.pending.add(-1)
	}
	return n, err
}

// pending counts the requests of a stdio session not yet answered.
type pending struct {
	mu      sync.Mutex
	n       int
	changed chan struct{} // has a value after a change
}

func newPending() *pending { return &pending{changed: make(chan struct{}, 1)} }

func (p *pending) add(d int) {
	p.mu.Lock()
	p.n += d
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// wait returns when no request is unanswered, or ctx ends.
func (p *pending) wait(ctx context.Context) {
	for {
		p.mu.Lock()
		n := p.n
		p.mu.Unlock()
		if n <= 0 {
			return
		}
		select {
		case <-p.changed:
		case <-ctx.Done():
			return
		}
	}
}

// isRequest reports whether msg, a message that passed
// checkAgentMessage, is a request (it has an id, so it is answered).
func isRequest(msg []byte) bool {
	var head struct {
		ID jsontext.Value `json:"id"`
	}
	return json.Unmarshal(msg, &head) == nil && head.ID != nil && head.ID.Kind() != 'n'
}

// isResponse reports whether msg, a line go-sdk wrote, is an answer (an
// id, no method).
func isResponse(msg []byte) bool {
	var head struct {
		ID     jsontext.Value `json:"id"`
		Method jsontext.Value `json:"method"`
	}
	return json.Unmarshal(msg, &head) == nil && head.ID != nil && head.Method == nil
}

func (l *lockedWriter) writeLine(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(append(b, '\n'))
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
