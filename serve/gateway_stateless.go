package serve

import (
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway speaks two kinds of MCP revision on one endpoint. Up to
// 2025-11-25 a client opens a session with initialize and names it in
// every request (Mcp-Session-Id); from 2026-07-28 (SEP-2575, the
// sessionless revision) there are no sessions: every request carries its
// revision in the Mcp-Protocol-Version header and in its
// _meta["io.modelcontextprotocol/protocolVersion"], with the client's
// name and capabilities beside it, and a client starts with
// server/discover. go-sdk serves the sessionless revision only from a
// stateless handler, which opens a throwaway session per request, and
// a stateful one answers such requests "unsupported protocol version"
// (the client then negotiates 2025-11-25): so the gateway has one
// handler of each kind and sends each request to one of them by its
// header ([statelessRequest]), after it has authenticated the token and
// checked the message, which it does alike for both.
//
// A run resumes its agent's step while an agent is attached to it. A
// session is attached while it is open; a stateless agent, which has no
// session, is attached by its token: from its first request (other than
// server/discover) while any of its requests is being answered and for
// [AgentIdle] after the last, until the run ends or the token is
// revoked (a lease). Its first request of a lease is audited as
// agent.attached, as a session's first is.

// StatelessRevision is the first MCP revision without sessions; a
// request whose Mcp-Protocol-Version is it or later is served
// statelessly.
const StatelessRevision = "2026-07-28"

// AgentIdle is how long an agent stays attached to its run without a
// request: an MCP session idle this long is closed, and a stateless
// agent's lease ends.
const AgentIdle = 30 * time.Minute

// revisionForm is the form of an MCP revision: a date.
var revisionForm = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)

// statelessRequest reports whether a request with header h is one of the
// sessionless revision (its Mcp-Protocol-Version is [StatelessRevision]
// or later), and its Mcp-Protocol-Version ("" when absent). why is the
// reason it is refused, or "": more than one Mcp-Protocol-Version, one
// that is not a revision (YYYY-MM-DD), or a sessionless request that
// names a session (Mcp-Session-Id: the revision has none, so the
// request is forged or confused, and is served under neither).
func statelessRequest(h http.Header) (stateless bool, version, why string) {
	vs := h.Values("Mcp-Protocol-Version")
	switch len(vs) {
	case 0:
		return false, "", ""
	case 1:
	default:
		return false, "", fmt.Sprintf("the request has %d Mcp-Protocol-Version headers; send one", len(vs))
	}
	v := vs[0]
	if !revisionForm.MatchString(v) {
		return false, "", fmt.Sprintf("the Mcp-Protocol-Version header %s is not a protocol revision (YYYY-MM-DD)", clipQuote(v, maxShownName))
	}
	if v < StatelessRevision {
		return false, v, ""
	}
	if len(h.Values("Mcp-Session-Id")) > 0 {
		return false, v, fmt.Sprintf("protocol revision %s has no sessions, so its requests name none: send it without Mcp-Session-Id, or open a session with initialize at revision 2025-11-25", v)
	}
	return true, v, ""
}

// checkRevision says why msg, a message checkAgentMessage accepted, is
// refused for the revision its request's header names (version, "" for
// none; stateless as [statelessRequest] says), with the JSON-RPC code to
// answer; "" when it is served. The revision in its
// _meta["io.modelcontextprotocol/protocolVersion"], when it has one,
// must be a string equal to version (-32020, go-sdk's header mismatch:
// a request must not be served under a revision other than the one it
// names); a request (not a notification) of the sessionless revision
// must have one (-32602).
func checkRevision(msg []byte, stateless bool, version string) (code int, why string) {
	var m struct {
		ID     jsontext.Value `json:"id"`
		Params jsontext.Value `json:"params"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return -32600, "the message is not a JSON-RPC request or notification (a JSON object)"
	}
	var pv jsontext.Value
	if m.Params.Kind() == '{' {
		var p struct {
			Meta jsontext.Value `json:"_meta"`
		}
		if err := json.Unmarshal(m.Params, &p); err == nil && p.Meta.Kind() == '{' {
			var meta map[string]jsontext.Value
			if err := json.Unmarshal(p.Meta, &meta); err == nil {
				pv = meta[mcp.MetaKeyProtocolVersion]
			}
		}
	}
	if pv == nil {
		if stateless && m.ID != nil {
			return -32602, fmt.Sprintf("a request of protocol revision %s carries its revision in _meta[%q]; this one has none", version, mcp.MetaKeyProtocolVersion)
		}
		return 0, ""
	}
	var v string
	if pv.Kind() != '"' || json.Unmarshal(pv, &v) != nil {
		return -32020, fmt.Sprintf("_meta[%q] is %s, not a protocol revision", mcp.MetaKeyProtocolVersion, shownValue(pv))
	}
	if v != version {
		hdr := "no Mcp-Protocol-Version header"
		if version != "" {
			hdr = fmt.Sprintf("the Mcp-Protocol-Version header %q", version)
		}
		return -32020, fmt.Sprintf("the request has %s but _meta[%q] %s: they must name the same revision", hdr, mcp.MetaKeyProtocolVersion, clipQuote(v, maxShownName))
	}
	return 0, ""
}

// leaseKey names a stateless agent's attachment: its run and token id.
type leaseKey struct{ run, token string }

// lease is a stateless agent's attachment to its run.
type lease struct {
	detach   func()      // of the run's Exchange
	timer    *time.Timer // ends it once idle
	inflight int         // requests being answered
	until    time.Time   // when it ends if no request is being answered
}

// lease attaches the token tokenID to run for a request of the
// sessionless revision and returns what ends the request: the token
// stays attached while any of its requests is being answered and for
// [AgentIdle] after the last. A token's first request of a lease
// attaches it (audited as agent.attached, with client, the client's
// "name version") and resumes the run if it waits for its agent.
func (g *gateway) lease(run, tokenID, client string) (release func()) {
	k := leaseKey{run, tokenID}
	g.mu.Lock()
	l := g.leases[k]
	fresh := l == nil
	if fresh {
		l = &lease{detach: g.s.x.Attach(run)}
		l.timer = time.AfterFunc(AgentIdle, func() { g.expire(k, l) })
		g.leases[k] = l
	}
	l.inflight++
	g.mu.Unlock()
	if fresh {
		if g.noteAttached(run, tokenID, client) {
			g.s.events.Publish(run, Event{Type: "progress", Text: "agent attached: " + showClient(g.s.redact(client))})
		}
		g.s.runner.Kick(run)
	}
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		l.inflight--
		if g.leases[k] == l {
			l.until = time.Now().Add(AgentIdle)
			l.timer.Reset(AgentIdle)
		}
	}
}

// expire ends lease l of k if it is still k's, has no request being
// answered and is idle past its end; otherwise it looks again later.
func (g *gateway) expire(k leaseKey, l *lease) {
	g.mu.Lock()
	if g.leases[k] != l {
		g.mu.Unlock()
		return
	}
	if l.inflight > 0 {
		// A request is being answered (a listen stream may last): the
		// release of the last one arms the timer again.
		g.mu.Unlock()
		return
	}
	if d := time.Until(l.until); d > 0 {
		l.timer.Reset(d)
		g.mu.Unlock()
		return
	}
	delete(g.leases, k)
	g.mu.Unlock()
	l.detach()
}

// unlease ends k's lease, if it has one (the run has ended, the token is
// revoked, the gateway closes).
func (g *gateway) unlease(k leaseKey) {
	g.mu.Lock()
	l := g.leases[k]
	delete(g.leases, k)
	g.mu.Unlock()
	if l != nil {
		l.timer.Stop()
		l.detach()
	}
}
