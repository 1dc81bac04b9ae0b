package playbook

import "strings"

// Step kinds of format 1.6 (docs/format.md, "steps").
const (
	KindAgent = "agent"
	KindGate  = "gate"
)

// Tool families (spec, "The allowedTools list": built-in, connector and
// MCP tools).
const (
	FamilyBuiltIn   = "built-in"
	FamilyConnector = "connector"
	FamilyMCP       = "mcp"
	FamilyUnknown   = "unknown"
)

// MCPParts splits an MCP-family tool name "mcp.<server>.<tool>". tool is
// everything after the second dot, as the MCP server names it. ok is false
// for names of other families (including "mcp.x" with no tool part).
func MCPParts(name string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, "mcp.")
	if !found {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, ".")
	return server, tool, ok && server != "" && tool != ""
}

// Family returns the family of a tool name given its definition's source
// ("" when there is no definition): the MCP family by name, otherwise
// built-in for source "primitive" and connector for source "connector",
// and [FamilyUnknown] when nothing says.
func Family(name, source string) string {
	if _, _, ok := MCPParts(name); ok {
		return FamilyMCP
	}
	switch source {
	case "primitive":
		return FamilyBuiltIn
	case "connector":
		return FamilyConnector
	case "mcp":
		return FamilyMCP
	}
	return FamilyUnknown
}

// MaxToolNameLen is the longest tool name, in bytes (docs/format.md,
// "Names").
const MaxToolNameLen = 128

// ToolNameProblem returns why s is not a well-formed tool name, or "" when
// it is one: ASCII segments of [A-Za-z0-9_-] joined by single dots, at most
// [MaxToolNameLen] bytes (docs/format.md, "Names"). Nothing is trimmed or
// normalised.
func ToolNameProblem(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > MaxToolNameLen:
		return "is longer than 128 bytes"
	case s[0] == '.' || s[len(s)-1] == '.':
		return "starts or ends with a dot"
	case strings.Contains(s, ".."):
		return "has an empty segment (two dots in a row)"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '.' || c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			continue
		}
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return "contains whitespace"
		case c < 0x20 || c == 0x7f:
			return "contains a control character"
		case c >= 0x80:
			return "contains a non-ASCII character"
		default:
			return "contains '" + string(rune(c)) + "'"
		}
	}
	return ""
}
