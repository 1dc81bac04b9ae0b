// Package testgen generates valid OpenPlaybook documents of any size for
// benchmarks and fuzz seeds.
package testgen

import (
	"bytes"
	"fmt"
)

// Large returns a valid 1.6 document with the given number of steps and
// embedded tools. Tools alternate between the built-in, connector (Stripe)
// and MCP families; each has a realistic input and output schema of about
// 1 KB, so Large(1000, 5000) is about 5 MB. Step i is an agent step
// allowing five tools and going to step i+1, every tenth step a gate.
func Large(steps, tools int) []byte {
	var b bytes.Buffer
	name := func(i int) string {
		switch i % 3 {
		case 0:
			return fmt.Sprintf("records.item%d.get", i)
		case 1:
			return fmt.Sprintf("charge.op%d", i)
		default:
			return fmt.Sprintf("mcp.bulk.tool_%d", i)
		}
	}
	b.WriteString(`{
  "openplaybook": "1.6",
  "manifest": {"id": "large", "name": "Large generated playbook", "version": "1.0.0", "description": "Generated for benchmarks.", "requiredConnectors": ["stripe"]},
  "inputSchema": {"type": "object", "properties": {"accountId": {"type": "string"}}},
  "requires": {
    "connections": [{"provider": "stripe", "authKind": "api_token", "scopes": [], "capabilities": [`)
	first := true
	for i := 0; i < tools; i++ {
		if i%3 == 1 {
			if !first {
				b.WriteString(", ")
			}
			first = false
			fmt.Fprintf(&b, "%q", name(i))
		}
	}
	b.WriteString(`]}],
    "mcpServers": [{"name": "bulk", "toolNames": [`)
	first = true
	for i := 0; i < tools; i++ {
		if i%3 == 2 {
			if !first {
				b.WriteString(", ")
			}
			first = false
			fmt.Fprintf(&b, "%q", name(i))
		}
	}
	b.WriteString(`], "capabilities": []}],
    "secrets": [{"name": "STRIPE_API_KEY", "purpose": "auth for the Stripe connection"}]
  },
  "tools": [`)
	for i := 0; i < tools; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		src, extra := "primitive", ""
		switch i % 3 {
		case 1:
			src, extra = "connector", `, "connectorType": "stripe"`
		case 2:
			src = "mcp"
		}
		risk, side := "read", "false"
		writes := `[]`
		if i%7 == 0 {
			risk, side, writes = "internal", "true", `["records.items"]`
		}
		fmt.Fprintf(&b, `
    {"name": %q, "source": %q%s, "description": "Generated tool number %d: looks up or changes one record and returns its current state.",
     "permissions": ["records:read"], "riskClass": %q, "sideEffecting": %s, "requiresApproval": false,
     "dataScopeResources": ["records.items"], "dataScopeWrites": %s,
     "inputSchema": {"type": "object", "properties": {"id": {"type": "string", "description": "Record id.", "pattern": "^rec_[A-Za-z0-9]+$"}, "limit": {"type": "integer", "minimum": 1, "maximum": 100}, "cursor": {"type": "string"}, "expand": {"type": "array", "items": {"type": "string", "enum": ["owner", "history", "notes"]}}}, "required": ["id"], "additionalProperties": false},
     "outputSchema": {"type": "object", "properties": {"id": {"type": "string"}, "status": {"type": "string", "enum": ["open", "closed", "pending"]}, "amount": {"type": "integer", "description": "Amount in cents."}, "updatedAt": {"type": "string", "format": "date-time"}, "owner": {"type": "object", "properties": {"id": {"type": "string"}, "email": {"type": "string"}}}}, "required": ["id", "status"]}}`,
			name(i), src, extra, i, risk, side, writes)
	}
	b.WriteString(`
  ],
  "steps": [`)
	for i := 0; i < steps; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		next := ""
		if i+1 < steps {
			next = fmt.Sprintf(`, "next": "s%d"`, i+1)
		}
		if i%10 == 9 {
			fmt.Fprintf(&b, "\n    {\"id\": \"s%d\", \"kind\": \"gate\", \"purpose\": \"A person checks the work so far.\"%s}", i, next)
			continue
		}
		b.WriteString(fmt.Sprintf("\n    {\"id\": \"s%d\", \"kind\": \"agent\", \"agent\": \"worker\", \"purpose\": \"Process batch %d of the records.\", \"allowedTools\": [", i, i))
		for j := 0; j < 5 && tools > 0; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", name((i*5+j)%tools))
		}
		b.WriteString("]" + next + "}")
	}
	b.WriteString("\n  ]\n}\n")
	return b.Bytes()
}
