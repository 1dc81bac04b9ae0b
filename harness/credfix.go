package harness

import (
	"fmt"
	"strings"
)

// What a credential message tells the user to write instead of the value
// it found. The form depends on the place: where ${secret:NAME} is
// expanded (an MCP server's args, env values, url and headers; agent
// settings) it is a reference; where the value is a secret's name (a
// connection's secret roles, an agent's apiKeySecret, serve's
// operatorTokenSecret) it is the name alone, and a reference there is an
// error; anywhere else no secret is expanded at all. Every message ends
// with the fix for its own place, so that doing what it says is never an
// error itself (TestCredentialFixIsValid).

// place is how the value at a place of the harness file refers to a
// secret.
type place int

const (
	placeNone place = iota // no secret is expanded here ("command", "cwd", a connection's "baseURL", store paths, ...)
	placeRef               // ${secret:NAME} is expanded here
	placeName              // the value is a secret's name
)

// placeOf says how the value at JSON Pointer ptr (RFC 6901) refers to a
// secret, and a valid secret name to suggest there, derived from the
// place (GH for env: {GH: ...}, STRIPE_API_KEY for the stripe
// connection's apiKey).
func placeOf(ptr string) (place, string) {
	var seg []string
	if ptr != "" {
		for _, s := range strings.Split(ptr[1:], "/") {
			seg = append(seg, strings.NewReplacer("~1", "/", "~0", "~").Replace(s))
		}
	}
	at := func(i int) string {
		if i < len(seg) {
			return seg[i]
		}
		return ""
	}
	switch at(0) {
	case "mcpServers":
		name := suggestName(at(1), "TOKEN")
		switch {
		case len(seg) == 4 && seg[2] == "env":
			if secretName.MatchString(seg[3]) {
				name = seg[3]
			}
			return placeRef, name
		case len(seg) == 4 && (seg[2] == "args" || seg[2] == "headers"), len(seg) == 3 && seg[2] == "url":
			return placeRef, name
		}
	case "connections":
		if len(seg) == 4 && seg[2] == "secrets" {
			return placeName, suggestName(at(1), snake(seg[3]))
		}
	case "agents":
		name := suggestName(at(1), "API_KEY")
		switch {
		case len(seg) == 3 && seg[2] == "apiKeySecret":
			return placeName, name
		case len(seg) >= 3 && seg[2] != "driver":
			return placeRef, name
		}
	case "serve":
		if len(seg) == 2 && seg[1] == "operatorTokenSecret" {
			return placeName, "OPENPLAYBOOK_OPERATOR_TOKEN"
		}
	}
	return placeNone, ""
}

// suggestName is a valid secret name (^[A-Za-z_][A-Za-z0-9_]*$) made of
// owner, upper-cased with every other character as "_", and suffix:
// ACME_MCP_TOKEN for "acme-mcp" and "TOKEN". An owner that leaves no
// valid name gives suffix alone.
func suggestName(owner, suffix string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(owner) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := strings.ToUpper(suffix)
	if o := strings.Trim(b.String(), "_"); o != "" {
		name = o + "_" + name
	}
	if !secretName.MatchString(name) {
		return strings.ToUpper(suffix)
	}
	return name
}

// credentialFix ends every credential message found at JSON Pointer ptr:
// what to write there instead, in the form valid at that place. v is the
// value found there: a header's Authorization scheme in it ("Bearer
// ghp_...") is kept in the form shown ("Bearer ${secret:NAME}"), so that
// only the credential moves to the secret.
func credentialFix(ptr, v string) string {
	switch p, name := placeOf(ptr); p {
	case placeRef:
		if strings.HasSuffix(ptr, "/url") && strings.HasPrefix(ptr, "/mcpServers/") {
			return headerFix(name, "Bearer")
		}
		if key, ok := agentKeySetting(ptr); ok {
			return fmt.Sprintf("the harness file never holds credentials: put the value in the environment or a dotenv file as %s and write apiKeySecret: %s in place of %q (the model drivers take their key only from \"apiKeySecret\", by the secret's name)", name, name, key)
		}
		ref := "${secret:" + name + "}"
		if scheme := authScheme(ptr, v); scheme != "" {
			ref = scheme + " " + ref
		}
		return fmt.Sprintf("the harness file never holds credentials: put the value in the environment or a dotenv file as %s and write \"%s\" here", name, ref)
	case placeName:
		return nameFix(name)
	}
	return "the harness file never holds credentials, and no secret is expanded here: remove the value (and revoke it); ${secret:NAME} is expanded only in an MCP server's args, env, url, headers and oauth client and in agent settings, and a connection names its secrets under \"secrets\""
}

// agentKeySetting reports whether ptr is an agent's own setting whose
// name says it is a credential ("apiKey", "token", ...: sensitiveSetting),
// and that name. No driver takes such a setting: the model drivers read
// their key from "apiKeySecret" (docs/drivers.md).
func agentKeySetting(ptr string) (string, bool) {
	seg := strings.Split(ptr, "/")
	if len(seg) != 4 || seg[1] != "agents" {
		return "", false
	}
	key := strings.NewReplacer("~1", "/", "~0", "~").Replace(seg[3])
	return key, key != "apiKeySecret" && sensitiveSetting.MatchString(key)
}

// authScheme is the HTTP authentication scheme (RFC 9110 section 11.1)
// that the value v of an MCP server's header at ptr starts with, "Bearer",
// "Basic" or "Token" as written, or "" when v starts with none or ptr is
// no header.
func authScheme(ptr, v string) string {
	if !strings.HasPrefix(ptr, "/mcpServers/") || !strings.Contains(ptr, "/headers/") {
		return ""
	}
	w, rest, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || strings.TrimSpace(rest) == "" {
		return ""
	}
	for _, s := range []string{"Bearer", "Basic", "Token"} {
		if strings.EqualFold(w, s) {
			return w
		}
	}
	return ""
}

// headerFix is the fix for a credential in an MCP server's url: a header.
// scheme is the Authorization scheme shown.
func headerFix(name, scheme string) string {
	return fmt.Sprintf("the harness file never holds credentials: take it out of the URL, put it in the environment or a dotenv file as %s and send it in a header: \"headers\": {Authorization: \"%s ${secret:%s}\"}", name, scheme, name)
}

// nameFix is the fix where the value is a secret's name.
func nameFix(name string) string {
	return fmt.Sprintf("the harness file never holds credentials: put the value in the environment or a dotenv file as %s and write %s here (the name alone, not \"${secret:%s}\")", name, name, name)
}

// keyFix ends the message of a key that looks like a credential.
const keyFix = "the harness file never holds credentials, and a key cannot refer to a secret: remove it (and revoke it)"

// roleFix is the fix for a connection's secret role (at ptr) whose value v
// is not a secret's name. A reference to a valid name, "${secret:K}",
// is told to become K; anything else is taken for the credential itself.
func roleFix(v, ptr string) string {
	if refs, err := scanRefs(v); err == nil && len(refs) == 1 && refs[0].start == 0 && refs[0].end == len(v) {
		return fmt.Sprintf("not a reference: the value is already a name, so write %s here (the name alone, not \"${secret:%s}\")", refs[0].name, refs[0].name)
	}
	_, name := placeOf(ptr)
	return "never the credential itself; " + nameFix(name)
}
