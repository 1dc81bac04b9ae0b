package validate

import (
	"strings"

	"github.com/openplaybook/openplaybook/playbook"
)

// isReferenceForm reports whether an allowedTools string is a pattern or a
// reference URI rather than a name: those are the allowed-tools-form rule's
// concern, and no other rule reports them again.
func isReferenceForm(s string) bool {
	return strings.ContainsAny(s, "*?[") || strings.Contains(s, "://")
}

// toolNameProblem is [playbook.ToolNameProblem].
func toolNameProblem(s string) string { return playbook.ToolNameProblem(s) }

// mcpParts is [playbook.MCPParts].
func mcpParts(name string) (server, tool string, ok bool) { return playbook.MCPParts(name) }
