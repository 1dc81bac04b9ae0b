package host

import (
	"slices"
	"sort"

	"github.com/openplaybook/openplaybook/builtin"
	"github.com/openplaybook/openplaybook/playbook"
)

// Catalog is everything the runtime can call: the JSON contract of
// `openplaybook registry --format json` (docs/connectors.md, "The registry
// listing"). Each DEF is the spec's embedded definition object
// ("Embedded tool definitions").
type Catalog struct {
	Builtins  []playbook.Definition `json:"builtins"`
	Providers []ProviderEntry       `json:"providers"`
	// MCPServers is there only for a catalog built from a harness: the
	// servers it binds, each with the tools it lists now.
	MCPServers []ServerEntry `json:"mcpServers,omitzero"`
}

// ProviderEntry is one connector in a [Catalog].
type ProviderEntry struct {
	Provider string `json:"provider"`
	Title    string `json:"title"`
	// AuthKinds are the auth kinds a connection may use; Secrets the
	// secret roles any of them needs, in order (Auth says which needs
	// which).
	AuthKinds []string    `json:"authKinds"`
	Secrets   []string    `json:"secrets"`
	Auth      []AuthEntry `json:"auth"`
	// APIRoot is the API's base URL (a harness connection's baseURL
	// replaces it).
	APIRoot string                `json:"apiRoot"`
	Tools   []playbook.Definition `json:"tools"`
}

// AuthEntry is one auth kind of a provider and the roles it binds.
type AuthEntry struct {
	AuthKind string   `json:"authKind"`
	Secrets  []string `json:"secrets"`
	Optional []string `json:"optional,omitempty"`
}

// ServerEntry is one MCP server a harness binds.
type ServerEntry struct {
	Name  string                `json:"name"`
	Tools []playbook.Definition `json:"tools"`
	// Error says why the server's tools could not be listed.
	Error string `json:"error,omitempty"`
}

// NewCatalog lists the built-ins and every connector; with h (a host
// connected with [Options.AllServers]), also the MCP servers it binds.
func NewCatalog(h *Host) Catalog {
	c := Catalog{Builtins: builtin.Definitions(), Providers: []ProviderEntry{}}
	for _, p := range Providers() {
		info := p.Info()
		e := ProviderEntry{Provider: p.Name(), Title: info.Title, APIRoot: info.APIRoot, Tools: p.Definitions(), AuthKinds: []string{}, Secrets: []string{}}
		for _, k := range info.AuthKinds {
			e.AuthKinds = append(e.AuthKinds, k.Kind)
			e.Auth = append(e.Auth, AuthEntry{AuthKind: k.Kind, Secrets: k.Secrets, Optional: k.Optional})
			for _, s := range k.Secrets {
				if !slices.Contains(e.Secrets, s) {
					e.Secrets = append(e.Secrets, s)
				}
			}
		}
		c.Providers = append(c.Providers, e)
	}
	if h == nil {
		return c
	}
	c.MCPServers = []ServerEntry{}
	var names []string
	for name := range h.Harness.MCPServers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		e := ServerEntry{Name: name, Tools: []playbook.Definition{}}
		if err := h.ServerErrs[name]; err != nil {
			e.Error = err.Error()
		}
		for _, t := range h.ServerTools[name] {
			if t.Problem == "" {
				e.Tools = append(e.Tools, t.Definition)
			}
		}
		c.MCPServers = append(c.MCPServers, e)
	}
	return c
}
