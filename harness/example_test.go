package harness_test

import (
	"fmt"

	"github.com/openplaybook/openplaybook/harness"
)

func ExampleParse() {
	src := []byte(`mcpServers:
  acme:
    url: https://mcp.example.com/mcp
    headers: {Authorization: "Bearer ${secret:ACME_MCP_TOKEN}"}
  memory:
    command: node
    args: [server.js]
    timout: 5s
`)
	h, ds := harness.Parse("harness.yaml", src, "/srv/playbooks")
	for _, d := range ds {
		fmt.Printf("%s:%d:%d: %s [%s]\n", d.File, d.Line, d.Column, d.Message, d.Rule)
	}
	fmt.Println(h.MCPServers["memory"].Cwd)
	for _, r := range h.SecretRefs() {
		fmt.Println(r.Name, r.Pos.Pointer)
	}
	// Output:
	// harness.yaml:8:5: unknown key "timout" in MCP server "memory" (did you mean "timeout"?) [harness-unknown-key]
	// /srv/playbooks
	// ACME_MCP_TOKEN /mcpServers/acme/headers/Authorization
}

func ExampleSecrets_Expand() {
	env := map[string]string{"ACME_MCP_TOKEN": "tok-0123456789"}
	s := harness.NewSecrets(nil, &harness.SecretsOptions{
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	v, err := s.Expand("Bearer ${secret:ACME_MCP_TOKEN}")
	fmt.Println(len(v), err)
	_, err = s.Expand("Bearer ${secret:MISSING}")
	fmt.Println(err)
	fmt.Println(s.Redact("sent Bearer tok-0123456789"))
	// Output:
	// 21 <nil>
	// harness: secret "MISSING" is not set (looked in the environment variable MISSING)
	// sent Bearer [redacted]
}
