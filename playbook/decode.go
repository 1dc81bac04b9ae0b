package playbook

import "github.com/openplaybook/openplaybook/syntax"

// Member names of each object of the format, in the order docs/format.md
// lists them.
var (
	DocumentMembers   = []string{"$schema", "openplaybook", "manifest", "inputSchema", "requires", "tools", "steps"}
	ManifestMembers   = []string{"id", "name", "version", "description", "requiredConnectors"}
	RequiresMembers   = []string{"connections", "mcpServers", "secrets"}
	ConnectionMembers = []string{"provider", "authKind", "scopes", "capabilities"}
	MCPServerMembers  = []string{"name", "toolNames", "capabilities"}
	SecretMembers     = []string{"name", "purpose"}
	ToolMembers       = []string{"name", "source", "description", "permissions", "inputSchema", "outputSchema", "harnessInputSchema", "harnessOutputSchema", "dataScopeResources", "dataScopeWrites", "requiresApproval", "riskClass", "sideEffecting", "connectorType", "scope"}
	// StepMembers are the members any step may carry; which of them a
	// step of a given kind may use is the step-members rule's concern.
	StepMembers = []string{"id", "kind", "purpose", "agent", "allowedTools", "next", "onReject"}
)

func (r *reader) document(n *syntax.Node) {
	d := r.doc
	r.object(n, "the document", DocumentMembers, false, func(name string, v *syntax.Node) {
		switch name {
		case "$schema":
			// For editors, which find the JSON Schema of the file
			// there; the model ignores it, only its type is checked.
			r.str(v, name)
		case "openplaybook":
			d.OpenPlaybook = r.str(v, name)
		case "manifest":
			d.Manifest = r.manifest(v)
		case "inputSchema":
			d.InputSchema = r.schemaObject(v, name)
		case "requires":
			d.Requires = r.requires(v)
		case "tools":
			r.objects(v, name, func(e *syntax.Node) { d.Tools = append(d.Tools, r.tool(e)) })
		case "steps":
			r.objects(v, name, func(e *syntax.Node) { d.Steps = append(d.Steps, r.step(e)) })
		}
	})
}

func (r *reader) manifest(n *syntax.Node) *Manifest {
	m := &Manifest{Node: n}
	if !r.object(n, `"manifest"`, ManifestMembers, false, func(name string, v *syntax.Node) {
		switch name {
		case "id":
			m.ID = r.str(v, name)
		case "name":
			m.Name = r.str(v, name)
		case "version":
			m.Version = r.str(v, name)
		case "description":
			m.Description = r.str(v, name)
		case "requiredConnectors":
			m.RequiredConnectors = r.strs(v, name, false)
		}
	}) {
		return nil
	}
	return m
}

func (r *reader) requires(n *syntax.Node) *Requires {
	q := &Requires{Node: n}
	if !r.object(n, `"requires"`, RequiresMembers, false, func(name string, v *syntax.Node) {
		switch name {
		case "connections":
			r.objects(v, name, func(e *syntax.Node) { q.Connections = append(q.Connections, r.connection(e)) })
		case "mcpServers":
			r.objects(v, name, func(e *syntax.Node) { q.MCPServers = append(q.MCPServers, r.mcpServer(e)) })
		case "secrets":
			r.objects(v, name, func(e *syntax.Node) { q.Secrets = append(q.Secrets, r.secret(e)) })
		}
	}) {
		return nil
	}
	return q
}

func (r *reader) connection(n *syntax.Node) *Connection {
	c := &Connection{Node: n}
	r.object(n, "a connection", ConnectionMembers, false, func(name string, v *syntax.Node) {
		switch name {
		case "provider":
			c.Provider = r.str(v, name)
		case "authKind":
			c.AuthKind = r.str(v, name)
		case "scopes":
			c.Scopes = r.strs(v, name, false)
		case "capabilities":
			c.Capabilities = r.strs(v, name, false)
		}
	})
	return c
}

func (r *reader) mcpServer(n *syntax.Node) *MCPServer {
	s := &MCPServer{Node: n}
	r.object(n, "an MCP server", MCPServerMembers, false, func(name string, v *syntax.Node) {
		switch name {
		case "name":
			s.Name = r.str(v, name)
		case "toolNames":
			s.ToolNames = r.strs(v, name, false)
		case "capabilities":
			s.Capabilities = r.strs(v, name, false)
		}
	})
	return s
}

// secret reads a secrets entry. Members other than name and purpose are
// left to the secret-members rule, whose message explains that a document
// never holds a secret's value.
func (r *reader) secret(n *syntax.Node) *Secret {
	s := &Secret{Node: n}
	r.object(n, "a secret", SecretMembers, true, func(name string, v *syntax.Node) {
		switch name {
		case "name":
			s.Name = r.str(v, name)
		case "purpose":
			s.Purpose = r.str(v, name)
		}
	})
	return s
}

func (r *reader) tool(n *syntax.Node) *Tool {
	t := &Tool{Node: n}
	r.object(n, "a tool definition", ToolMembers, false, func(name string, v *syntax.Node) {
		switch name {
		case "name":
			t.Name = r.str(v, name)
		case "source":
			t.Source = r.str(v, name)
		case "description":
			t.Description = r.str(v, name)
		case "permissions":
			t.Permissions = r.strs(v, name, false)
		case "inputSchema":
			t.InputSchema = r.schemaObject(v, name)
		case "outputSchema":
			t.OutputSchema = r.schemaObject(v, name)
		case "harnessInputSchema":
			t.HarnessInputSchema = v
		case "harnessOutputSchema":
			t.HarnessOutputSchema = v
		case "dataScopeResources":
			t.DataScopeResources = r.strs(v, name, false)
		case "dataScopeWrites":
			t.DataScopeWrites = r.strs(v, name, false)
		case "requiresApproval":
			t.RequiresApproval = r.boolean(v, name)
		case "riskClass":
			t.RiskClass = r.str(v, name)
		case "sideEffecting":
			t.SideEffecting = r.boolean(v, name)
		case "connectorType":
			t.ConnectorType = r.str(v, name)
		case "scope":
			t.Scope = r.str(v, name)
		}
	})
	return t
}

func (r *reader) step(n *syntax.Node) *Step {
	s := &Step{Node: n}
	r.object(n, "a step", StepMembers, false, func(name string, v *syntax.Node) {
		switch name {
		case "id":
			s.ID = r.str(v, name)
		case "kind":
			s.Kind = r.str(v, name)
		case "purpose":
			s.Purpose = r.str(v, name)
		case "agent":
			s.Agent = r.str(v, name)
		case "allowedTools":
			s.AllowedTools = r.strs(v, name, true)
		case "next":
			s.Next = r.str(v, name)
		case "onReject":
			s.OnReject = r.str(v, name)
		}
	})
	return s
}
