package explain

import (
	"slices"

	"github.com/openplaybook/openplaybook/registry"
)

// confirm checks the values t declares against the registry's definition
// of the same name and lists in t.Claims those the registry does not
// state the same (all of them when it does not have the tool). What the
// registry leaves unsaid (an MCP server states no riskClass, permissions
// or approval) confirms nothing: the document's value stays a claim. An
// undefined tool declares nothing, so it claims nothing either.
func confirm(t *Tool, reg *registry.Registry) {
	t.Claims = []string{}
	entry, ok := reg.Lookup(t.Name)
	if ok {
		t.InRegistry = entry.Origin.String()
	}
	if !t.Defined {
		return
	}
	r := entry.Definition
	claim := func(field string, declared, confirmed bool) {
		if declared && (!ok || !confirmed) {
			t.Claims = append(t.Claims, field)
		}
	}
	// The riskClass as written: a known class, or an invalid one.
	rc, declared := t.RiskClass, t.RiskClass != RiskUnknown
	if t.DeclaredRiskClass != "" {
		rc, declared = t.DeclaredRiskClass, true
	}
	// In the order of Tool's members.
	claim("source", t.Source != "", t.Source == r.Source)
	claim("connectorType", t.ConnectorType != "", t.ConnectorType == r.ConnectorType)
	claim("description", t.Description != "", t.Description == r.Description)
	claim("riskClass", declared, rc == r.RiskClass)
	claim("sideEffecting", t.SideEffecting != nil, sameBool(t.SideEffecting, r.SideEffecting))
	claim("requiresApproval", t.RequiresApproval != nil, sameBool(t.RequiresApproval, r.RequiresApproval))
	claim("scope", t.Scope != "", t.Scope == r.Scope)
	claim("permissions", t.Permissions != nil, sameSet(t.Permissions, r.Permissions))
	claim("dataScopeResources", t.DataScopeResources != nil, sameSet(t.DataScopeResources, r.DataScopeResources))
	claim("dataScopeWrites", t.DataScopeWrites != nil, sameSet(t.DataScopeWrites, r.DataScopeWrites))
}

// sameBool: the registry states b (non-nil) and it is doc's value.
func sameBool(doc, reg *bool) bool { return doc != nil && reg != nil && *doc == *reg }

// sameSet: the registry states the list (non-nil; [] says "none") and it
// holds the same names as doc's, in any order.
func sameSet(doc, reg []string) bool {
	if reg == nil {
		return false
	}
	a, b := slices.Clone(doc), slices.Clone(reg)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// claimed reports whether t's member field is a claim the registry does
// not confirm.
func claimed(t *Tool, field string) bool { return slices.Contains(t.Claims, field) }
