package harness

import "strings"

// ServerOAuth is mcpServers.<name>.oauth: the OAuth 2.0 client an HTTP MCP
// server's authorization server registered for the runtime, used with the
// client-credentials grant (RFC 6749 section 4.4) when the server answers
// 401 (the MCP authorization spec; go-sdk's extauth handler).
// docs/identity.md, "MCP servers behind OAuth".
type ServerOAuth struct {
	// Issuer is the authorization server's issuer identifier (an http or
	// https URL, no secret references): discovery through the server's
	// protected resource metadata (RFC 9728) must arrive at this issuer,
	// whose metadata (RFC 8414) must name it, or nothing is sent.
	Issuer string
	// ClientID and ClientSecret are as written: they may hold
	// ${secret:NAME} references (bound to "mcp:<server>"), expanded by
	// [MCPServer.Expand]. ClientSecret is never literal text.
	ClientID     string
	ClientSecret string
	Pos          Pos
}

var serverOAuthKeys = []string{"issuer", "clientId", "clientSecret"}

func (d *decoder) serverOAuth(n *node) *ServerOAuth {
	if !d.want(n, kMap, `"oauth"`) {
		return nil
	}
	f := d.fields(n, `"oauth"`, serverOAuthKeys)
	o := &ServerOAuth{Pos: pos(n)}
	ok := true
	for _, k := range serverOAuthKeys {
		if f[k] == nil {
			d.errN(n, RuleRequired, "\"oauth\" needs %q (it has issuer, clientId and clientSecret: the client the server's authorization server registered)", k)
			ok = false
		}
	}
	if v := f["issuer"]; v != nil {
		if u, good := d.nonEmpty(v, `"issuer"`); good && d.noRefs(v, `"issuer"`) && d.httpURL(v, u, `"issuer"`) {
			o.Issuer = strings.TrimSpace(u)
		} else {
			ok = false
		}
	}
	if v := f["clientId"]; v != nil {
		if id, good := d.nonEmpty(v, `"clientId"`); good && d.refs(v) {
			o.ClientID = id
		} else {
			ok = false
		}
	}
	if v := f["clientSecret"]; v != nil {
		sec, good := d.nonEmpty(v, `"clientSecret"`)
		if good && d.refs(v) {
			if !strings.Contains(sec, "${secret:") {
				d.flagged[v.ptr] = true
				d.errN(v, RuleCredential, "\"clientSecret\" holds literal text; the harness file never holds credentials: put it in the environment or a dotenv file and write clientSecret: \"${secret:NAME}\"")
				ok = false
			} else {
				o.ClientSecret = sec
			}
		} else {
			ok = false
		}
	}
	if !ok {
		return nil
	}
	return o
}
