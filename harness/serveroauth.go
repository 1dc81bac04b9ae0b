package harness

import (
	"net"
	"net/url"
	"strings"
)

// loopbackURL reports whether s is http://127.0.0.1:PORT/..., http://[::1]:PORT/...
// or http://localhost:PORT/... without user, query or fragment.
func loopbackURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() == "" {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

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
	// Grant is "client_credentials" (the default) or
	// "authorization_code": a person consents once with `openplaybook
	// auth login SERVER` and the tokens live in the credential vault.
	Grant string
	// RedirectURL, for authorization_code, is the loopback URL
	// (http://127.0.0.1:PORT/PATH or http://localhost:PORT/PATH) auth
	// login listens on, registered at the authorization server.
	RedirectURL string
	Pos         Pos
}

var serverOAuthKeys = []string{"issuer", "clientId", "clientSecret", "grant", "redirectUrl"}

func (d *decoder) serverOAuth(n *node) *ServerOAuth {
	if !d.want(n, kMap, `"oauth"`) {
		return nil
	}
	f := d.fields(n, `"oauth"`, serverOAuthKeys)
	o := &ServerOAuth{Pos: pos(n)}
	ok := true
	o.Grant = "client_credentials"
	if v := f["grant"]; v != nil {
		if g, good := d.str(v, `"grant"`); good && (g == "client_credentials" || g == "authorization_code") {
			o.Grant = g
		} else {
			if good {
				d.errN(v, RuleValue, "\"grant\" is %q; it is client_credentials (a headless client) or authorization_code (a person consents once with openplaybook auth login)", clip(g))
			}
			ok = false
		}
	}
	need := []string{"issuer", "clientId", "clientSecret"}
	if o.Grant == "authorization_code" {
		need = []string{"issuer", "clientId", "redirectUrl"}
	} else if v := f["redirectUrl"]; v != nil {
		d.errN(v, RuleValue, "\"redirectUrl\" is for grant authorization_code; client credentials redirect nowhere")
		ok = false
	}
	for _, k := range need {
		if f[k] == nil {
			d.errN(n, RuleRequired, "\"oauth\" with grant %s needs %q (%s: the client the server's authorization server registered)", o.Grant, k, strings.Join(need, ", "))
			ok = false
		}
	}
	if v := f["redirectUrl"]; v != nil && o.Grant == "authorization_code" {
		if u, good := d.nonEmpty(v, `"redirectUrl"`); good && d.noRefs(v, `"redirectUrl"`) && loopbackURL(u) {
			o.RedirectURL = u
		} else {
			if good {
				d.errN(v, RuleValue, "\"redirectUrl\" must be a loopback http URL with a port, such as http://127.0.0.1:8976/callback (auth login listens there; RFC 8252 section 7.3)")
			}
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
