package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/external"
	"github.com/openplaybook/openplaybook/obs"
	"github.com/openplaybook/openplaybook/store"
)

// FinishTool is the control tool that ends the executing step. The
// prefix "openplaybook_" is reserved for control tools: no document may
// name a tool whose wire name begins with it.
const FinishTool = "openplaybook_finish_step"

// ControlPrefix begins the wire name of every control tool.
const ControlPrefix = "openplaybook_"

// MaxAgentSessions bounds the agents attached to one run (open MCP
// sessions, stateless agents' attachments and subscriptions/listen
// streams) with the requests that may open a session or attach: one
// beyond it is refused (429) until others end (a client closes its
// session, or it is idle for [AgentIdle]).
const MaxAgentSessions = 256

// MaxAgentMessageBytes bounds one JSON-RPC message an agent sends.
const MaxAgentMessageBytes = 4 << 20

// agentMethods are the JSON-RPC methods an agent may send (the methods of
// the MCP server protocol, 2025-06-18 through 2026-07-28, that a gateway
// serves); any other is refused with -32601 and audited.
var agentMethods = []string{
	"initialize", "ping", "server/discover", "tools/list", "tools/call",
	"resources/list", "resources/read", "resources/templates/list",
	"resources/subscribe", "resources/unsubscribe", "subscriptions/listen",
	"prompts/list", "prompts/get", "logging/setLevel", "completion/complete",
	"notifications/initialized", "notifications/cancelled", "notifications/progress",
	"notifications/roots/list_changed",
}

// gateway serves MCP to external agents: /mcp/runs/{run}, with
// sessions (revisions 2024-11-05 through 2025-11-25, on http) and without
// (revision 2026-07-28 and later, on stateless; see [statelessRequest]).
type gateway struct {
	s         *Server
	http      *mcp.StreamableHTTPHandler
	stateless *mcp.StreamableHTTPHandler

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]sessionOwner // attached sessions, and stateless subscriptions/listen streams
	leases   map[leaseKey]*lease                 // stateless agents' attachments
	owners   map[string]sessionOwner             // by MCP session id
	opening  map[string]int                      // by run: requests that may open a session, in flight
	budgets  map[string]*rejectBudget            // by run
	attached map[string]*attachLog               // by token id
	inflight map[string]int                      // by MCP session id: POSTs being answered
	ending   map[string]bool                     // by MCP session id: closed once inflight is 0
	stop     chan struct{}                       // closed by close
}

// sessionOwner is the run and agent token a session was opened with: a
// request naming the session must come with both.
type sessionOwner struct{ run, token string }

type ctxKey int

const (
	runKey ctxKey = iota
	tokenKey
	serverKey
)

// serverSlot holds the MCP server built for one request.
type serverSlot struct{ srv *mcp.Server }

func newGateway(s *Server) *gateway {
	g := &gateway{s: s, sessions: map[*mcp.ServerSession]sessionOwner{}, leases: map[leaseKey]*lease{}, owners: map[string]sessionOwner{}, opening: map[string]int{},
		budgets: map[string]*rejectBudget{}, attached: map[string]*attachLog{}, inflight: map[string]int{}, ending: map[string]bool{},
		stop: make(chan struct{})}
	getServer := func(stateless bool) func(*http.Request) *mcp.Server {
		return func(r *http.Request) *mcp.Server {
			// go-sdk asks twice per request (for the revisions served,
			// then to serve it): one server per request.
			slot, _ := r.Context().Value(serverKey).(*serverSlot)
			if slot == nil {
				return nil
			}
			if slot.srv == nil {
				run, _ := r.Context().Value(runKey).(string)
				tok, _ := r.Context().Value(tokenKey).(store.AgentToken)
				slot.srv = g.newServer(run, tok.ID, tok.Agent, stateless)
			}
			return slot.srv
		}
	}
	g.http = mcp.NewStreamableHTTPHandler(getServer(false), &mcp.StreamableHTTPOptions{
		SessionTimeout:      AgentIdle,
		MaxRequestBodyBytes: MaxAgentMessageBytes,
		// The server checks Host and Origin itself (Server.checkOrigin),
		// against its own listen address and serve.allowedOrigins.
		DisableLocalhostProtection: true,
	})
	g.stateless = mcp.NewStreamableHTTPHandler(getServer(true), &mcp.StreamableHTTPOptions{
		Stateless:                  true,
		MaxRequestBodyBytes:        MaxAgentMessageBytes,
		DisableLocalhostProtection: true,
		// A client that goes away ends its call: one waiting for a
		// person stops waiting (and has not run).
		PropagateRequestCancellation: true,
	})
	go g.watchEnds()
	return g
}

func (g *gateway) close() {
	g.mu.Lock()
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	ss := make([]*mcp.ServerSession, 0, len(g.sessions))
	for s := range g.sessions {
		ss = append(ss, s)
	}
	ls := make([]leaseKey, 0, len(g.leases))
	for k := range g.leases {
		ls = append(ls, k)
	}
	g.mu.Unlock()
	for _, s := range ss {
		_ = s.Close()
	}
	for _, k := range ls {
		g.unlease(k)
	}
}

// revoked ends the sessions of a run opened with the tokens revoked.
func (g *gateway) revoked(run string, tokens []string) {
	g.mu.Lock()
	var ss []*mcp.ServerSession
	for s, o := range g.sessions {
		if o.run == run && slices.Contains(tokens, o.token) {
			ss = append(ss, s)
		}
	}
	g.mu.Unlock()
	for _, tok := range tokens {
		g.unlease(leaseKey{run, tok})
	}
	for _, s := range ss {
		go s.Close() // not waiting for its handlers: a call waiting for approval sees the revocation itself
	}
}

// ServeHTTP authenticates the agent, checks the message strictly, and
// passes it to the MCP handler.
func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	run := r.PathValue("run")
	tok := bearerOf(r)
	rec, err := g.s.agentBearer(ctx, run, tok)
	if err != nil {
		if status, ended := endedRun(ctx, g.s, rec, run); ended {
			// The holder of a token of this run, which has ended: its
			// sessions ended with it (MCP, "Session Management": a
			// request naming an ended session is answered 404, also a
			// DELETE), and its token with it.
			if r.Header.Get("Mcp-Session-Id") != "" {
				http.Error(w, fmt.Sprintf("run %s has ended (%s): its MCP sessions ended with it, and there is nothing for an agent to do", run, status), http.StatusNotFound)
				return
			}
			w.Header().Set("WWW-Authenticate", g.s.challenge(run, true))
			http.Error(w, fmt.Sprintf("unauthorized: run %s has ended (%s), and its agent tokens ended with it", run, status), http.StatusUnauthorized)
			return
		}
		w.Header().Set("WWW-Authenticate", g.s.challenge(run, tok != ""))
		http.Error(w, "unauthorized: "+ErrBadAgentToken.Error()+"; the operator issues one with POST /api/v1/runs/"+run+"/agent-token", http.StatusUnauthorized)
		return
	}
	stateless, version, why := statelessRequest(r.Header)
	if why != "" {
		g.reject(w, run, rec.ID, nil, http.StatusBadRequest, -32600, why)
		return
	}
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		// The handler's sessions are shared by every run: a session is
		// used only under the run and token that opened it.
		g.mu.Lock()
		o, known := g.owners[sid]
		g.mu.Unlock()
		if known && (o.run != run || o.token != rec.ID) {
			http.Error(w, "the MCP session was opened for another run or with another token", http.StatusNotFound)
			return
		}
	}
	if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
		// A request without a session may open one: it holds a place
		// under the limit from before its body is read until it is
		// answered (by then, a session it opened is attached).
		g.mu.Lock()
		full := g.opening[run]+g.s.x.Attached(run) >= MaxAgentSessions
		if !full {
			g.opening[run]++
		}
		g.mu.Unlock()
		if full {
			w.Header().Set("Retry-After", "60")
			http.Error(w, fmt.Sprintf("run %s has %d open agent sessions, the most it may have; close one (DELETE with its Mcp-Session-Id) or wait", run, MaxAgentSessions), http.StatusTooManyRequests)
			return
		}
		defer func() {
			g.mu.Lock()
			if g.opening[run]--; g.opening[run] <= 0 {
				delete(g.opening, run)
			}
			g.mu.Unlock()
		}()
	}
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxAgentMessageBytes+1))
		if err != nil {
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(body) > MaxAgentMessageBytes {
			g.reject(w, run, rec.ID, nil, http.StatusRequestEntityTooLarge, -32600, fmt.Sprintf("the message is over %d bytes", MaxAgentMessageBytes))
			return
		}
		if code, msg := checkAgentMessage(body); msg != "" {
			status := http.StatusBadRequest
			if code == -32601 {
				status = http.StatusOK
			}
			g.reject(w, run, rec.ID, idOf(body), status, code, msg)
			return
		}
		if code, msg := checkRevision(body, stateless, version); msg != "" {
			g.reject(w, run, rec.ID, idOf(body), http.StatusBadRequest, code, msg)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && r.Method == http.MethodPost {
		// A session whose run has ended is closed once the POSTs it is
		// answering are answered (go-sdk sends nothing once a session
		// is closing).
		g.mu.Lock()
		g.inflight[sid]++
		g.mu.Unlock()
		defer g.answered(sid)
	}
	ctx = context.WithValue(ctx, runKey, run)
	ctx = context.WithValue(ctx, tokenKey, rec)
	ctx = context.WithValue(ctx, serverKey, &serverSlot{})
	if stateless {
		g.stateless.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	g.http.ServeHTTP(w, r.WithContext(ctx))
}

// note audits a call refused before the decision path (no step of the
// agent was executing): agent.rejected, within the run's budget.
func (g *gateway) note(run, tokenID, msg string) { g.noteRejected(run, tokenID, msg) }

// reject answers a message refused before MCP handling with a JSON-RPC
// error, and audits it.
func (g *gateway) reject(w http.ResponseWriter, run, tokenID string, id jsontext.Value, status, code int, msg string) {
	g.noteRejected(run, tokenID, msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(rejection(id, code, clipText(g.s.redact(msg), MaxReasonBytes)))
}

// newServer is the MCP server of one agent session on run, opened with
// token tokenID for agent ("" for every agent bound to driver mcp); with
// stateless, of one request of the sessionless revision.
func (g *gateway) newServer(run, tokenID, agent string, stateless bool) *mcp.Server {
	if run == "" {
		return nil
	}
	as := &agentServer{agent: agent, token: tokenID, stateless: stateless}
	var srv *mcp.Server
	srv = mcp.NewServer(&mcp.Implementation{Name: "openplaybook", Title: "openplaybook run " + run, Version: g.s.opt.Version}, &mcp.ServerOptions{
		Instructions: g.instructions(run, agent),
		GetSessionID: g.sessionID,
		// What a list shows depends on the run's step and the token:
		// no intermediary may keep it, and the client asks again.
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
			c.TTLMs, c.CacheScope = 0, "private"
		},
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true},
		},
	})
	srv.AddResource(&mcp.Resource{
		URI: stepURI(run), Name: "step", Title: "The executing step",
		Description: "The executing step's purpose, the run's input and the outputs of earlier steps (JSON).",
		MIMEType:    "application/json",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		b, err := json.MarshalIndent(g.stepView(run, agent), "", "  ")
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: stepURI(run), MIMEType: "application/json", Text: string(b)}}}, nil
	})
	// Every tools/call, whatever its name, goes to the decision path (an
	// unlisted name is refused there and audited, not answered "unknown
	// tool" by the SDK); only the control tool is the SDK's.
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			// The first message of a session attaches it (a client of the
			// sessionless protocol sends no initialize).
			// server/discover is the client asking what the server speaks,
			// in a session of its own, before it opens the real one.
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil && method != "server/discover" {
				if as.stateless {
					// A request of the sessionless revision attaches its
					// token for as long as it is answered and AgentIdle
					// after.
					release := g.lease(run, tokenID, clientOf(req, ss))
					defer release()
					if method == "subscriptions/listen" {
						// Its stream is notified as the run's step
						// changes, until the client ends it or the run
						// ends.
						g.follow(run, tokenID, as, ss)
					}
				} else {
					as.once.Do(func() { g.attach(run, tokenID, as, ss, clientOf(req, ss)) })
				}
			}
			if method == "tools/list" || method == "tools/call" {
				// A session that has just attached resumed the run: let
				// it reach its step, so that a client's first list (or
				// call) sees the step's tools.
				g.syncTools(as, run, g.settle(ctx, run, as.agent))
			}
			if ct, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && ct.Params != nil && ct.Params.Name != FinishTool {
				return g.dispatch(ctx, run, as, ct)
			}
			return next(ctx, method, req)
		}
	})
	as.srv = srv
	g.syncTools(as, run, nil)
	return srv
}

// agentServer is the MCP server of one agent session, with the names of
// the tools it offers.
type agentServer struct {
	agent     string // the token's agent ("" any)
	token     string // the token's id
	stateless bool   // it serves one request of the sessionless revision
	srv       *mcp.Server
	once      sync.Once // attaches the session
	mu        sync.Mutex
	synced    bool           // the tools offered are those of step
	step      *external.Step // nil: the control tool only
	offered   []string
}

// current is the run's executing external step if it is agent's (any,
// for ""), and a channel closed when the executing step changes.
func (g *gateway) current(run, agent string) (*external.Step, <-chan struct{}) {
	cur, changed := g.s.x.Current(run)
	return mine(cur, agent), changed
}

// live is the run's executing external step unless it has ended (its
// agent finished it and the run is moving on, so the next step may be
// another agent's), and a channel closed when the executing step
// changes.
func (g *gateway) live(run string) (*external.Step, <-chan struct{}) {
	cur, changed := g.s.x.Current(run)
	if cur != nil {
		select {
		case <-cur.Done():
			return nil, changed
		default:
		}
	}
	return cur, changed
}

// mine is cur if it is agent's step (any agent's, for ""), else nil.
func mine(cur *external.Step, agent string) *external.Step {
	if cur != nil && agent != "" && cur.In.Agent != agent {
		return nil
	}
	return cur
}

// SettleWait bounds how long an agent's tools/list or tools/call waits
// for a run that is executing here but has no step for the agent yet
// while the run is at a step no external agent of it serves (an LLM or
// builtin step before the agent's, or between steps). While the run is
// at the agent's own step (being opened, resumed or reaching it), the
// wait is bounded only by the request.
const SettleWait = 5 * time.Second

// settle returns the run's step for its agent. When there is none but
// the run is executing here (or is about to: [Server.executingSoon]), it
// first waits until there is one or the run stops executing (a gate, the
// end), or until ctx ends; a step that
// has ended counts as none (the run is moving to its next step). Every
// wake-up (a step published or ended, an event of the run) reads the
// state again after subscribing, so none is missed. The wait is not bounded by time
// while the run is at a step of this agent ([Runner.AtExternalStep]): the
// step is published once the run reaches it, however long opening the
// run takes under load; otherwise it is bounded by [SettleWait].
func (g *gateway) settle(ctx context.Context, run, agent string) *external.Step {
	cur, changed := g.live(run)
	if cur != nil || !g.s.executingSoon(ctx, run) {
		// A step is published (for this agent, or for another: then
		// none is this agent's now), or nothing will be soon.
		return mine(cur, agent)
	}
	ch, cancel := g.s.events.Subscribe(run)
	defer cancel()
	deadline := time.Now().Add(SettleWait)
	for {
		cur, changed = g.live(run)
		if cur != nil || !g.s.executingSoon(ctx, run) {
			return mine(cur, agent)
		}
		var t *time.Timer
		var bound <-chan time.Time
		if !g.s.runner.AtExternalStep(ctx, run, agent) {
			d := time.Until(deadline)
			if d <= 0 {
				return nil
			}
			t = time.NewTimer(d)
			bound = t.C
		}
		woke := true
		select {
		case <-changed:
		case <-ch:
		case <-bound:
			woke = false
		case <-ctx.Done():
			woke = false
		}
		if t != nil {
			t.Stop()
		}
		if !woke {
			return nil
		}
	}
}

func stepURI(run string) string { return "openplaybook://runs/" + run + "/step" }

// attach records an initialized agent session: the run is served by an
// agent now, so a run waiting for it resumes, and the session's tools
// follow the run's executing step until the session ends.
func (g *gateway) attach(run, tokenID string, srv *agentServer, ss *mcp.ServerSession, client string) {
	g.follow(run, tokenID, srv, ss)
	if g.noteAttached(run, tokenID, client) {
		g.s.events.Publish(run, Event{Type: "progress", Text: "agent attached: " + showClient(g.s.redact(client))})
	}
	g.s.runner.Kick(run)
}

// follow attaches session ss to run until it ends, offering the run's
// executing step's tools on srv as the step changes; ended runs' and
// revoked tokens' sessions are closed ([gateway.closeEnded],
// [gateway.revoked]).
func (g *gateway) follow(run, tokenID string, srv *agentServer, ss *mcp.ServerSession) {
	detach := g.s.x.Attach(run)
	g.mu.Lock()
	g.sessions[ss] = sessionOwner{run: run, token: tokenID}
	if id := ss.ID(); id != "" {
		g.owners[id] = sessionOwner{run: run, token: tokenID}
	}
	g.mu.Unlock()
	go func() {
		done := make(chan struct{})
		go func() {
			_ = ss.Wait()
			close(done)
		}()
		var last *external.Step
		for {
			cur, changed := g.current(run, srv.agent)
			if cur != last {
				g.syncTools(srv, run, cur)
				last = cur
			}
			select {
			case <-changed:
			case <-done:
				g.mu.Lock()
				delete(g.sessions, ss)
				delete(g.owners, ss.ID())
				delete(g.ending, ss.ID())
				g.mu.Unlock()
				detach()
				return
			}
		}
	}()
}

// clientOf is the "name version" of the client of session ss, from req
// when it is the initialize request (the session has not stored it
// yet), else from the session; "" when unknown.
func clientOf(req mcp.Request, ss *mcp.ServerSession) string {
	var info *mcp.Implementation
	if p, ok := req.GetParams().(*mcp.InitializeParams); ok && p != nil {
		info = p.ClientInfo
	} else if p := ss.InitializeParams(); p != nil {
		info = p.ClientInfo
	}
	if info == nil {
		return ""
	}
	return strings.TrimSpace(info.Name + " " + info.Version)
}

// syncTools offers the executing step's allowed tools (wire names) and
// the control tool; cur nil offers the control tool only.
func (g *gateway) syncTools(as *agentServer, run string, cur *external.Step) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if as.synced && as.step == cur {
		return
	}
	as.synced, as.step = true, cur
	srv := as.srv
	var keep []string
	if cur != nil {
		for _, t := range cur.In.Tools {
			keep = append(keep, driver.WireName(t.Name))
		}
	}
	if len(as.offered) > 0 {
		srv.RemoveTools(as.offered...)
		as.offered = nil
	}
	if len(as.offered) == 0 {
		srv.AddTool(&mcp.Tool{
			Name:  FinishTool,
			Title: "Finish the step",
			Description: "Ends the executing step of the run with its output (any JSON value: the answer the step's purpose asks for). " +
				"The run then goes on to the next step; its tools replace these.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"output":{"description":"The step's output: any JSON value."}},"required":["output"],"additionalProperties":false}`),
		}, g.finish(run, as.agent))
	}
	if cur == nil {
		return
	}
	for _, t := range cur.In.Tools {
		schema := objectSchema(t.InputSchema)
		srv.AddTool(&mcp.Tool{Name: driver.WireName(t.Name), Title: t.Name, Description: t.Description, InputSchema: schema}, listed)
	}
	as.offered = keep
}

// listed is the handler of a step's tools as the SDK lists them; calls
// never reach it (see dispatch).
func listed(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return errorResult("internal: this call was not routed to the decision path"), nil
}

// dispatch passes one tools/call to the executing step's decision path.
// The tool name is the one in the request, mapped from its wire name and
// otherwise untouched: the decision path compares it byte for byte.
func (g *gateway) dispatch(ctx context.Context, run string, as *agentServer, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	step, _ := g.current(run, as.agent)
	if step == nil {
		msg := fmt.Sprintf("no step of the run is waiting for this agent now (the run waits for a person, or has moved on or ended), so the call to %s was not run; read %s", clipQuote(req.Params.Name, maxShownName), stepURI(run)) + g.refusal(run)
		g.note(run, as.token, msg)
		return errorResult(msg), nil
	}
	args := jsontext.Value(req.Params.Arguments)
	if len(args) == 0 {
		args = jsontext.Value("{}")
	}
	c := driver.Call{Name: driver.SpecName(req.Params.Name), Arguments: args}
	// The agent's W3C trace contexts (its request's traceparent header,
	// the call's _meta.traceparent): the call's execute_tool span links
	// to them (docs/operate.md, "Traces").
	if req.Extra != nil {
		// The HTTP request that carried this call, not the session's
		// first one.
		ctx = g.s.obs.LinkRequest(ctx, req.Extra.Header)
	}
	ctx = obs.LinkTraceContext(ctx, req.Params.Meta)
	deadline := time.Now().Add(g.s.opt.Harness.H.Serve.ApprovalWait)
	var progress float64
	for {
		res, err := step.Call(ctx, c)
		switch {
		case err == nil:
			if res.Error != "" {
				return errorResult(res.Error), nil
			}
			out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(res.Content)}}}
			if res.Content.Kind() == '{' {
				// structuredContent is an object before protocol
				// 2026-07-28; any other result is the text alone.
				out.StructuredContent = json.RawMessage(res.Content)
			}
			return out, nil
		case errors.Is(err, driver.ErrSuspended):
			id := "id unknown"
			if pe := (*driver.PendingError)(nil); errors.As(err, &pe) && pe.Approval != "" {
				id = pe.Approval
			}
			if !time.Now().Before(deadline) {
				return errorResult(fmt.Sprintf("the call to %s is pending: it waits for a person's approval (%s) and has not run. Call it again with the same arguments to learn the decision.", c.Name, id)), nil
			}
			progress++
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: progress,
					Message: fmt.Sprintf("waiting for a person to approve the call to %s (%s)", c.Name, id)})
			}
			if !g.waitDecision(ctx, run, deadline) {
				return errorResult("the call was cancelled while it waited for approval; it has not run"), nil
			}
			// The token may have been revoked (or the run ended) while
			// the call waited: then it does not run for this session.
			if err := stillUsable(ctx, g.s.st, as.token, run); err != nil {
				msg := fmt.Sprintf("the call to %s was not run: %v", c.Name, err)
				g.note(run, as.token, msg)
				return errorResult(msg), nil
			}
		case errors.Is(err, external.ErrStepEnded):
			msg := fmt.Sprintf("the step has ended, so the call to %s was not run; its tools are no longer offered", clipQuote(req.Params.Name, maxShownName))
			g.note(run, as.token, msg)
			return errorResult(msg), nil
		case errors.Is(err, driver.ErrCallLimit):
			return errorResult("the step reached its tool call limit and has ended"), nil
		default:
			return errorResult("the step failed: " + g.s.redact(err.Error())), nil
		}
	}
}

// waitDecision waits until something about run changed (a decision), at
// most until deadline and at most 1 s (decisions made by another process
// are seen by asking again); false when ctx ended.
func (g *gateway) waitDecision(ctx context.Context, run string, deadline time.Time) bool {
	ch, cancel := g.s.events.Subscribe(run)
	defer cancel()
	d := min(time.Until(deadline), time.Second)
	if d <= 0 {
		d = time.Millisecond
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case ev := <-ch:
			if ev.Type == "status" {
				return true
			}
		}
	}
}

func (g *gateway) finish(run, agent string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		step, _ := g.current(run, agent)
		if step == nil {
			return errorResult("no step of the run is waiting for this agent now (the run waits for a person, or has moved on or ended); read " + stepURI(run) + g.refusal(run)), nil
		}
		var in struct {
			Output jsontext.Value `json:"output"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || len(in.Output) == 0 {
			return errorResult(`openplaybook_finish_step takes {"output": <any JSON value>}`), nil
		}
		if err := step.Finish(in.Output); err != nil {
			return errorResult(err.Error()), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "step " + step.In.StepID + " finished; list the tools again for the next step"}}}, nil
	}
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// stepView is what the agent reads of the executing step.
type stepView struct {
	Run     string          `json:"run"`
	Step    string          `json:"step,omitempty"`
	Purpose string          `json:"purpose,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
	Prior   []priorView     `json:"prior,omitempty"`
	Tools   []string        `json:"tools,omitempty"`
	Status  string          `json:"status"`
	Note    string          `json:"note,omitempty"`
}

type priorView struct {
	Step   string          `json:"step"`
	Output json.RawMessage `json:"output"`
}

func (g *gateway) stepView(run, agent string) stepView {
	cur, _ := g.current(run, agent)
	if cur == nil {
		v := stepView{Run: run, Status: "no step for this agent now"}
		if r, err := g.s.st.GetRun(context.Background(), run); err == nil {
			v.Status = string(r.Status)
			v.Note = r.Reason
		}
		return v
	}
	in := cur.In
	v := stepView{Run: run, Step: in.StepID, Purpose: in.Purpose, Input: json.RawMessage(in.Input), Status: "executing"}
	for _, p := range in.Prior {
		v.Prior = append(v.Prior, priorView{Step: p.StepID, Output: json.RawMessage(p.Output)})
	}
	for _, t := range in.Tools {
		v.Tools = append(v.Tools, driver.WireName(t.Name))
	}
	return v
}

// instructions is the server's instructions at initialize: how to act
// as the run's agent, and the executing step when there is one.
func (g *gateway) instructions(run, agent string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are the agent of openplaybook run %s. The run's steps bound to you are given to you one at a time: "+
		"the tools listed are exactly the executing step's allowed tools (a call to any other is refused), plus %s, which ends the step with its output. "+
		"When the run moves to another step the tool list changes (notifications/tools/list_changed). "+
		"The resource %s holds the executing step's purpose, the run's input and earlier steps' outputs.", run, FinishTool, stepURI(run))
	if agent != "" {
		fmt.Fprintf(&b, " You act as agent %q: only its steps are given to you.", agent)
	}
	if cur, _ := g.current(run, agent); cur != nil {
		v := g.stepView(run, agent)
		b2, _ := json.Marshal(v)
		fmt.Fprintf(&b, "\n\nThe executing step: %s", b2)
	}
	return b.String()
}

// objectSchema returns the tool's input schema when it is a JSON object
// whose "type" is "object", as MCP requires of a tool's inputSchema;
// otherwise one that says so and holds the schema under allOf (the
// decision path validates the arguments against the embedded schema
// either way).
func objectSchema(v jsontext.Value) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err == nil && string(m["type"]) == `"object"` {
		return json.RawMessage(v)
	}
	if len(v) == 0 || m == nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	return json.RawMessage(`{"type":"object","allOf":[` + string(v) + `]}`)
}

// refusal is what an agent is told, after "no step ... waits", when the
// server refused to resume its run as it attached (another harness, say):
// "; the server did not resume the run: WHY", or "".
func (g *gateway) refusal(run string) string {
	if why := g.s.runner.Refusal(run); why != "" {
		return "; the server did not resume the run: " + why
	}
	return ""
}

// sessionID returns a new MCP session id: with replicas, the id of this
// replica, ".", and 43 random characters (256 bits, base64url), so that
// any replica asked about a session knows where it was opened (see
// [staleSession]); otherwise the random part alone.
func (g *gateway) sessionID() string {
	id := randomToken("")
	if rs := g.s.replicas; rs != nil {
		if m := rs.member(); m != nil {
			return m.ID() + "." + id
		}
	}
	return id
}

// staleSession returns the replica an MCP session of r was opened at
// when that is not owner, the replica that executes the run now: the
// session lived in that replica's memory and is gone (the run was
// adopted, or moved), so the client must initialize a new one. "" when
// r names no session, a session without a replica id, or one of owner.
func staleSession(r *http.Request, owner string) string {
	sid := r.Header.Get("Mcp-Session-Id")
	opened, _, ok := strings.Cut(sid, ".")
	if !ok || !strings.HasPrefix(opened, "rep_") || opened == owner {
		return ""
	}
	return opened
}
