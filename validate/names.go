package validate

import "strings"

// MaxToolNameLen is the longest tool name, in bytes (docs/format.md,
// "Names").
const MaxToolNameLen = 128

// isReferenceForm reports whether an allowedTools string is a pattern or a
// reference URI rather than a name: those are the allowed-tools-form rule's
// concern, and no other rule reports them again.
func isReferenceForm(s string) bool {
	return strings.ContainsAny(s, "*?[") || strings.Contains(s, "://")
}

// toolNameProblem returns why s is not a well-formed tool name, or "".
// A name is ASCII segments of [A-Za-z0-9_-] joined by single dots, at most
// 128 bytes.
func toolNameProblem(s string) string {
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
			return "contains " + strconvQuoteByte(c)
		}
	}
	return ""
}

func strconvQuoteByte(c byte) string { return "'" + string(rune(c)) + "'" }

// mcpParts splits an MCP-family name mcp.<server>.<tool>; tool is
// everything after the second dot. ok is false for other names.
func mcpParts(name string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, "mcp.")
	if !found {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, ".")
	return server, tool, ok && server != "" && tool != ""
}
