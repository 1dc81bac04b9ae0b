package validate

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/openplaybook/openplaybook/playbook"
)

// ruleMCPServerName checks the logical names of requires.mcpServers: each
// matches ^[a-z][a-z0-9_-]*$ and no two are the same (docs/format.md,
// "requires" and "Names"; spec "The requires declaration":
// "mcpServers[].name ... Logical MCP server name — the local handle tool
// names compose from (mcp.<name>.<tool>). Never a URL and never auth
// material").
//
// A name that looks like a URL, a host or a path is not echoed in the
// message, since such a string may carry user info or a token (the
// credential rule reports those).
type ruleMCPServerName struct{}

func (ruleMCPServerName) Name() string { return "mcp-server-name" }
func (ruleMCPServerName) Description() string {
	return "MCP server names are unique logical handles matching ^[a-z][a-z0-9_-]*$, never URLs, hosts or paths"
}

var mcpServerNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

func (ruleMCPServerName) Check(c *Context) {
	if c.Doc.Requires == nil {
		return
	}
	first := map[string]*playbook.MCPServer{}
	for _, s := range c.Doc.Requires.MCPServers {
		if s.Name == nil {
			continue
		}
		name := s.Name.Value
		switch {
		case strings.ContainsAny(name, ":/.@"):
			c.Errorf(s.Name.Node, "MCP server name looks like a URL, host or path; the name is a local handle that tool names compose from (mcp.<name>.<tool>), never a URL, host, path or auth material: use a short name matching ^[a-z][a-z0-9_-]*$%s and leave the server's address to the harness",
				handleFromToolNames(s))
			continue
		case !mcpServerNameRE.MatchString(name):
			c.Errorf(s.Name.Node, "MCP server name %q %s; a server name matches ^[a-z][a-z0-9_-]*$%s",
				name, serverNameProblem(name), serverNameHint(name))
			continue
		}
		if f, dup := first[name]; dup {
			c.Errorf(s.Name.Node, "MCP server %q is declared twice in requires.mcpServers (first at %s); merge the two entries into one",
				name, f.Node.Pointer())
			continue
		}
		first[name] = s
	}
}

// serverNameProblem says why name, which is not URL-like, does not match
// ^[a-z][a-z0-9_-]*$.
func serverNameProblem(name string) string {
	switch {
	case name == "":
		return "is empty"
	case name[0] < 'a' || name[0] > 'z':
		if name[0] >= 'A' && name[0] <= 'Z' || strings.ToLower(name) != name {
			return "has upper-case letters"
		}
		return "does not start with a lower-case letter"
	case strings.ToLower(name) != name:
		return "has upper-case letters"
	}
	return "has characters other than a-z, 0-9, '_' and '-'"
}

// serverNameHint suggests the lower-cased name when that is valid.
func serverNameHint(name string) string {
	if l := strings.ToLower(name); l != name && mcpServerNameRE.MatchString(l) {
		return " (did you mean " + strconv.Quote(l) + "?)"
	}
	return ""
}

// handleFromToolNames suggests the logical name the server's toolNames
// already use (" such as \"acme\"" for mcp.acme.* entries), or "".
func handleFromToolNames(s *playbook.MCPServer) string {
	handle := ""
	for _, v := range s.ToolNames.Values() {
		server, _, ok := mcpParts(v)
		if !ok || !mcpServerNameRE.MatchString(server) || handle != "" && server != handle {
			return ""
		}
		handle = server
	}
	if handle == "" {
		return ""
	}
	return " such as " + strconv.Quote(handle) + " (the name its toolNames use)"
}
