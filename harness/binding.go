package harness

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/openplaybook/openplaybook/internal/suggest"
)

// Secret binding: a secret goes only to the destinations the harness
// binds it to: an MCP server, a connection or an agent. The harness binds
// secrets under secrets.declare, by the sections that name the
// destinations:
//
//	secrets:
//	  declare:
//	    STRIPE_API_KEY: {connections: [stripe]}
//	    GITHUB_TOKEN:   {mcpServers: [github, github-issues], agents: [rita]}
//
// In Go, and in SecretRef.For, a destination is a string "mcp:<server>",
// "connection:<provider>" or "agent:<name>" (see [Destination]).
//
// With a declare section, every secret the file uses must be declared for
// the destination that uses it. Without one, a secret that the file uses
// for one destination only is bound to that destination, and a secret
// used for more than one is an error asking for the declaration.

// Destination kinds, the part of a destination before the colon, in the
// order of declKeys.
var destinationKinds = []string{"mcp", "connection", "agent"}

// Destination returns the destination string of a kind ("mcp",
// "connection" or "agent") and a name: Destination("mcp", "acme") is
// "mcp:acme".
func Destination(kind, name string) string { return kind + ":" + name }

// describeDest names a destination for a message: `MCP server "acme"`.
func describeDest(dest string) string {
	kind, name, _ := strings.Cut(dest, ":")
	switch kind {
	case "mcp":
		return fmt.Sprintf("MCP server %q", name)
	case "connection":
		return fmt.Sprintf("connection %q", name)
	case "agent":
		return fmt.Sprintf("agent %q", name)
	}
	return strconv.Quote(dest)
}

// declarations reads secrets.declare: a map from a secret name to the
// destinations that may use it, by section: {mcpServers: [acme],
// connections: [stripe], agents: [rita]}.
func (d *decoder) declarations(n *node) {
	if !d.want(n, kMap, `"declare"`) {
		return
	}
	d.declare = n
	d.decls = map[string]*secretDecl{}
	for _, m := range n.members {
		if !secretName.MatchString(m.key) {
			d.errKey(m, RuleName, "%q is not a secret name (^[A-Za-z_][A-Za-z0-9_]*$)", clip(m.key))
			continue
		}
		where := fmt.Sprintf("the declaration of secret %q", m.key)
		if !d.want(m.val, kMap, where) {
			continue
		}
		f := d.fields(m.val, where, declKeys)
		if len(m.val.members) == 0 {
			d.errN(m.val, RuleValue, "%s binds it to nothing: list the destinations that may use it, such as {mcpServers: [acme]} or {connections: [stripe]}, or remove it", where)
		}
		decl := &secretDecl{name: m.key, key: m, dest: map[string]*node{}}
		for i, section := range declKeys {
			v := f[section]
			if v == nil || !d.want(v, kList, strconv.Quote(section)) {
				continue
			}
			for _, e := range v.elems {
				name, ok := d.nonEmpty(e, "each name in "+strconv.Quote(section))
				if !ok {
					continue
				}
				dest := Destination(destinationKinds[i], name)
				if _, dup := decl.dest[dest]; dup {
					d.warnN(e, RuleDuplicate, "%s is listed twice", describeDest(dest))
					continue
				}
				decl.dest[dest] = e
			}
		}
		d.decls[m.key] = decl
		d.declOrder = append(d.declOrder, m.key)
	}
}

// declHint is what to write in a declaration to bind a secret to dest:
// "mcpServers: [acme]".
func declHint(dest string) string {
	kind, name, _ := strings.Cut(dest, ":")
	i := slices.Index(destinationKinds, kind)
	if i < 0 {
		return dest
	}
	return fmt.Sprintf("%s: [%s]", declKeys[i], name)
}

// bind checks every use of a secret against the bindings and fills the
// BoundSecrets of servers, connections and agents (rule
// harness-secret-binding).
func (d *decoder) bind() {
	bound := map[string][]string{} // destination -> secret names
	if d.declare != nil {
		for _, name := range d.declOrder {
			decl := d.decls[name]
			for dest, e := range decl.dest {
				if !d.inFile[dest] {
					d.errN(e, RuleSecretBinding, "secret %q is declared for %s, which the harness does not have%s", name, describeDest(dest), d.destHint(dest))
					continue
				}
				bound[dest] = append(bound[dest], name)
			}
		}
		for _, r := range d.h.refs {
			if r.For == "" {
				continue
			}
			decl := d.decls[r.Name]
			switch {
			case decl == nil:
				d.errAt(r.Pos.Line, r.Pos.Column, r.Pos.Pointer, RuleSecretBinding,
					"secret %q is not declared; with a \"declare\" section under \"secrets\", every secret the file uses is declared with the destinations that may use it: add %s: {%s} there", r.Name, r.Name, declHint(r.For))
			case decl.dest[r.For] == nil:
				d.errAt(r.Pos.Line, r.Pos.Column, r.Pos.Pointer, RuleSecretBinding,
					"secret %q is not bound to %s; it is declared (line %d) for %s only: to let %s use it, add %s to its declaration",
					r.Name, describeDest(r.For), decl.key.line, d.destList(decl), describeDest(r.For), declHint(r.For))
			}
		}
	} else {
		uses := map[string][]string{} // secret -> destinations, in file order
		for _, r := range d.h.refs {
			if r.For != "" && !slices.Contains(uses[r.Name], r.For) {
				uses[r.Name] = append(uses[r.Name], r.For)
			}
		}
		for _, r := range d.h.refs {
			dests := uses[r.Name]
			if len(dests) > 1 {
				names := make([]string, len(dests))
				for i, dd := range dests {
					names[i] = describeDest(dd)
				}
				d.errAt(r.Pos.Line, r.Pos.Column, r.Pos.Pointer, RuleSecretBinding,
					"secret %q is used by %s; a secret goes to one destination unless the harness binds it to more: add under \"secrets\": declare: {%s: {%s}}",
					r.Name, joinAnd(names), r.Name, declaration(dests))
			}
		}
		for name, dests := range uses {
			if len(dests) == 1 {
				bound[dests[0]] = append(bound[dests[0]], name)
			}
		}
	}
	for name, s := range d.h.MCPServers {
		s.BoundSecrets = sortedNames(bound[Destination("mcp", name)])
	}
	for name, c := range d.h.Connections {
		c.BoundSecrets = sortedNames(bound[Destination("connection", name)])
	}
	for name, a := range d.h.Agents {
		a.BoundSecrets = sortedNames(bound[Destination("agent", name)])
	}
}

// declaration is the body of a declaration binding a secret to dests:
// "mcpServers: [acme, m], connections: [stripe]".
func declaration(dests []string) string {
	var parts []string
	for i, kind := range destinationKinds {
		var names []string
		for _, dd := range dests {
			if k, n, _ := strings.Cut(dd, ":"); k == kind {
				names = append(names, n)
			}
		}
		if len(names) > 0 {
			slices.Sort(names)
			parts = append(parts, fmt.Sprintf("%s: [%s]", declKeys[i], strings.Join(names, ", ")))
		}
	}
	return strings.Join(parts, ", ")
}

func sortedNames(names []string) []string {
	out := slices.Clone(names)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (d *decoder) destList(decl *secretDecl) string {
	var ds []string
	for dest := range decl.dest {
		ds = append(ds, dest)
	}
	if len(ds) == 0 {
		return "nothing"
	}
	slices.Sort(ds)
	for i, dd := range ds {
		ds[i] = describeDest(dd)
	}
	return joinAnd(ds)
}

// destHint suggests the destination of the same kind in the file nearest
// to dest.
func (d *decoder) destHint(dest string) string {
	kind, name, _ := strings.Cut(dest, ":")
	var have []string
	for k := range d.inFile {
		if hk, hn, _ := strings.Cut(k, ":"); hk == kind {
			have = append(have, hn)
		}
	}
	slices.Sort(have)
	return suggest.Phrase(name, have)
}

func joinAnd(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// BindingError is the error of a secret used for a destination it is not
// bound to. It names the secret and the destination, never a value.
type BindingError struct {
	// Name is the secret's name.
	Name string
	// For is the destination ("mcp:acme").
	For string
}

func (e *BindingError) Error() string {
	return fmt.Sprintf("harness: secret %q is not bound to %s (see secrets.declare in the harness file)", e.Name, describeDest(e.For))
}

// Resolve returns the value of the secret that holds role ("apiKey",
// ...), resolved by sec (see [Secrets.Resolve]). It fails closed: a role
// the connection does not bind, and a secret not among
// [Connection.BoundSecrets], are errors, and no secret is looked up.
func (c *Connection) Resolve(sec *Secrets, role string) (string, error) {
	name := c.Secrets[role]
	if name == "" {
		return "", fmt.Errorf("harness: the %s connection binds no %s secret", c.Provider, role)
	}
	if !slices.Contains(c.BoundSecrets, name) {
		return "", &BindingError{Name: name, For: Destination("connection", c.Provider)}
	}
	return sec.Resolve(name)
}
