package mcphost

import (
	"regexp"
	"strconv"

	"github.com/openplaybook/openplaybook/playbook"
)

const maxToolNameLen = playbook.MaxToolNameLen

// serverNameRE is the shape of a logical MCP server name (docs/format.md,
// "requires").
var serverNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// ComposeName returns the tool name of upstream tool tool on server:
// mcp.<server>.<tool>, with tool as the server names it. It does not check
// the result: [Tool.Problem] says when a listed name cannot round-trip.
func ComposeName(server, tool string) string {
	return "mcp." + server + "." + tool
}

// nameProblem returns why the upstream tool name tool cannot round-trip as
// the tool name mcp.<server>.<tool>, or "" when it can. server is assumed
// to be a valid logical server name.
//
// A tool name is ASCII: segments of [A-Za-z0-9_-] joined by single dots, at
// most 128 bytes (docs/format.md, "Names"). Nothing is cleaned or folded:
// a name that is not already in that shape is reported, never mangled.
func nameProblem(server, tool string) string {
	if tool == "" {
		return "the server lists a tool with an empty name"
	}
	if p := segmentsProblem(tool); p != "" {
		return "upstream tool name " + quoteName(tool) + " " + p
	}
	if n := len(ComposeName(server, tool)); n > maxToolNameLen {
		return "upstream tool name " + quoteName(tool) + " makes " + quoteName(ComposeName(server, tool)) +
			", which is longer than 128 bytes"
	}
	return ""
}

// segmentsProblem is why s is not dot-joined segments of [A-Za-z0-9_-]
// ([playbook.ToolNameProblem] without its length limit, which applies to
// the composed name), or "".
func segmentsProblem(s string) string {
	if len(s) > playbook.MaxToolNameLen {
		s = s[:playbook.MaxToolNameLen] // the composed name's length is checked apart
	}
	return playbook.ToolNameProblem(s)
}

// quoteName quotes a name for a message: Go syntax, so control characters,
// invalid UTF-8 and look-alikes are visible. Long names are cut.
func quoteName(s string) string {
	const max = 160
	if len(s) > max {
		return strconv.QuoteToASCII(s[:max]) + "..."
	}
	return strconv.QuoteToASCII(s)
}
