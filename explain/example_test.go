package explain_test

import (
	"fmt"
	"os"

	"github.com/openplaybook/openplaybook/explain"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/registry"
)

// A document is explained once and rendered in any format. This one has an
// undefined tool and a gate without onReject.
func Example() {
	src := []byte(`{
	  "openplaybook": "1.6",
	  "manifest": {"id": "refunds", "name": "Refunds", "version": "1.0.0",
	    "description": "Refunds a charge after approval.", "requiredConnectors": ["stripe"]},
	  "requires": {"connections": [{"provider": "stripe", "authKind": "api_token", "scopes": [], "capabilities": ["charge.refund"]}],
	    "mcpServers": [], "secrets": []},
	  "tools": [{"name": "charge.refund", "source": "connector", "connectorType": "stripe",
	    "description": "Refund a charge.", "permissions": ["refunds:write"],
	    "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
	    "riskClass": "money", "sideEffecting": true, "requiresApproval": true,
	    "dataScopeWrites": ["stripe.refunds"]}],
	  "steps": [
	    {"id": "ask", "kind": "gate", "purpose": "Approve the refund.", "next": "refund"},
	    {"id": "refund", "kind": "agent", "agent": "lou", "purpose": "Refund it.",
	      "allowedTools": ["charge.refund", "slack.post"]}
	  ]
	}`)
	doc, problems := playbook.Read("refunds.json", src, nil)
	e := explain.Build(doc, problems)

	fmt.Println("money:", e.Summary.Money)
	fmt.Println("undefined:", e.Summary.UndefinedTools[0].Tool)
	if err := explain.Render(os.Stdout, e, "mermaid"); err != nil {
		fmt.Println(err)
	}
	// Output:
	// money: [{refund [charge.refund]}]
	// undefined: slack.post
	// flowchart TD
	//   %% document sha256 c565fbc2fd229cfc0f7f00766fe52fb83a678be78c2803ac4bf31f38515e90d8
	//   s0{"ask<br/>gate: a person decides"}
	//   s1["refund<br/>risk: money<br/>needs approval"]
	//   s0 -->|approve| s1
	//   s0 -->|reject| run_rejected
	//   s1 --> run_end
	//   run_end(["end of run"])
	//   run_rejected(["run ends rejected"])
	//   classDef read fill:#e3f4e1,stroke:#2e7d32,color:#14301a
	//   classDef internal fill:#e1ecfb,stroke:#1f5fae,color:#0f2a4d
	//   classDef customer_comms fill:#fdebd3,stroke:#c26a00,color:#4a2a00
	//   classDef money fill:#fbdada,stroke:#b3261e,color:#4d0d09
	//   classDef unknown fill:#fff5c2,stroke:#8a6d00,color:#3d3000
	//   classDef none fill:#eeeeee,stroke:#616161,color:#212121
	//   classDef terminal fill:#ffffff,stroke:#616161,stroke-dasharray:4 3
	//   classDef missing fill:#ffffff,stroke:#b3261e,stroke-dasharray:4 3
	//   classDef approval stroke-width:4px
	//   class s1 money
	//   class s0 none
	//   class run_end,run_rejected terminal
	//   class s1 approval
}

// With a registry, every value a tool definition declares that the
// registry does not state the same is a claim. Here the registry says the
// tool moves money but does not say it needs approval.
func ExampleBuildWith() {
	src := []byte(`{
	  "openplaybook": "1.6",
	  "manifest": {"id": "refunds", "name": "Refunds", "version": "1.0.0",
	    "description": "Refunds a charge.", "requiredConnectors": []},
	  "requires": {"connections": [], "mcpServers": [], "secrets": []},
	  "tools": [{"name": "refund.issue", "source": "primitive",
	    "description": "Refund a charge.", "permissions": ["refunds:write"],
	    "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
	    "riskClass": "money", "sideEffecting": true, "requiresApproval": true,
	    "dataScopeWrites": ["refunds"]}],
	  "steps": [{"id": "refund", "kind": "agent", "agent": "lou", "purpose": "Refund it.",
	    "allowedTools": ["refund.issue"]}]
	}`)
	doc, problems := playbook.Read("refunds.json", src, nil)
	reg := registry.New()
	yes := true
	_ = reg.Add(playbook.Definition{Name: "refund.issue", Source: "primitive", Description: "Refund a charge.",
		Permissions: []string{"refunds:write"}, RiskClass: "money", SideEffecting: &yes, DataScopeWrites: []string{"refunds"}},
		registry.Origin{Kind: registry.Builtin}, nil)
	e := explain.BuildWith(doc, problems, &explain.Options{Registry: reg, Source: "a test registry"})

	tool := e.Steps[0].AllowedTools[0]
	fmt.Println(tool.InRegistry, tool.Claims)
	// Output:
	// builtin [requiresApproval]
}
