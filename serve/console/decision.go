package console

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/explain"
)

// schemaProp is what a call's card reads of one property of a tool's
// inputSchema (JSON Schema 2020-12): its title, description, type,
// enum, default and whether it is required.
type schemaProp struct {
	Title       string           `json:"title"`
	Description string           `json:"description"`
	Type        any              `json:"type"` // a string or a list of strings
	Enum        []jsontext.Value `json:"enum"`
	Default     jsontext.Value   `json:"default"`
	Minimum     *float64         `json:"minimum"`
	Maximum     *float64         `json:"maximum"`
}

type inputSchema struct {
	Properties map[string]schemaProp `json:"properties"`
	Required   []string              `json:"required"`
	// order is the properties' names in the order the schema lists them.
	order []string
}

// readInputSchema reads the properties of a tool's inputSchema; the zero
// value when it has none or is not an object.
func readInputSchema(raw jsontext.Value) inputSchema {
	var s inputSchema
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return inputSchema{}
	}
	// The property order of the schema, for the omitted ones.
	var top map[string]jsontext.Value
	if json.Unmarshal(raw, &top) == nil {
		if props, ok := top["properties"]; ok {
			dec := jsontext.NewDecoder(bytes.NewReader(props))
			if tok, err := dec.ReadToken(); err == nil && tok.Kind() == '{' {
				for dec.PeekKind() == '"' {
					tok, err := dec.ReadToken()
					if err != nil {
						break
					}
					name := tok.String() // before the next read reuses tok
					if dec.SkipValue() != nil {
						break
					}
					s.order = append(s.order, name)
				}
			}
		}
	}
	if len(s.order) != len(s.Properties) {
		s.order = s.order[:0]
		for k := range s.Properties {
			s.order = append(s.order, k)
		}
		sort.Strings(s.order)
	}
	return s
}

func (p schemaProp) typeName() string {
	switch t := p.Type.(type) {
	case string:
		return t
	case []any:
		var parts []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, " or ")
	}
	return ""
}

// decisionArg is one argument of a call as its card shows it: the value
// the call runs with, and what the tool's inputSchema says of it.
type decisionArg struct {
	argument
	Title       string
	Description string
	// Schema is the schema's type and constraints in a few words
	// ("integer, minimum 0", "one of duplicate, fraudulent").
	Schema   string
	Required bool
	// Unknown is set when the inputSchema does not name the argument.
	Unknown bool
}

// omittedArg is a property of the inputSchema the call leaves out.
type omittedArg struct {
	Name        string
	Title       string
	Description string
	// Default is the schema's default (JSON), "" when it gives none.
	Default string
}

// decisionArgs pairs a call's arguments with the tool's inputSchema.
func (c *Console) decisionArgs(args jsontext.Value, schema jsontext.Value) ([]decisionArg, []omittedArg, []string) {
	s := readInputSchema(schema)
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	var out []decisionArg
	given := map[string]bool{}
	raws := c.argumentsRaw(args)
	for _, a := range raws {
		d := decisionArg{argument: a.shown}
		if a.name != "" {
			given[a.name] = true
			if p, ok := s.Properties[a.name]; ok {
				d.Title, d.Description, d.Schema = c.line(p.Title), c.text(p.Description), c.schemaWords(p)
				d.Required = req[a.name]
			} else if s.Properties != nil {
				d.Unknown = true
			}
		}
		out = append(out, d)
	}
	var omitted []omittedArg
	for _, name := range s.order {
		if given[name] {
			continue
		}
		p := s.Properties[name]
		o := omittedArg{Name: c.line(name), Title: c.line(p.Title), Description: c.text(p.Description)}
		if len(p.Default) > 0 {
			o.Default = c.line(string(p.Default))
		}
		omitted = append(omitted, o)
	}
	// The summary names the arguments in the schema's order (then the
	// others as given), not in whatever order the agent sent them.
	var line []string
	shown := map[string]string{}
	for i, a := range raws {
		if a.name != "" {
			shown[a.name] = summaryValue(out[i].argument)
		}
	}
	for _, name := range s.order {
		if v, ok := shown[name]; ok {
			line = append(line, c.line(name)+" "+v)
			delete(shown, name)
		}
	}
	for i, a := range raws {
		if v, ok := shown[a.name]; ok && a.name != "" {
			line = append(line, out[i].Name+" "+v)
		}
	}
	return out, omitted, line
}

// summaryValue is an argument's value for the one-line summary: itself
// when short, else its size.
func summaryValue(a argument) string {
	if len(a.Value) > 60 || strings.Contains(a.Value, "\n") {
		return fmt.Sprintf("(%d bytes)", a.Bytes)
	}
	return a.Value
}

func (c *Console) schemaWords(p schemaProp) string {
	var parts []string
	if t := p.typeName(); t != "" {
		parts = append(parts, t)
	}
	if p.Minimum != nil {
		parts = append(parts, "minimum "+strconv.FormatFloat(*p.Minimum, 'g', -1, 64))
	}
	if p.Maximum != nil {
		parts = append(parts, "maximum "+strconv.FormatFloat(*p.Maximum, 'g', -1, 64))
	}
	if len(p.Enum) > 0 {
		var vs []string
		for _, v := range p.Enum {
			var s string
			if json.Unmarshal(v, &s) == nil {
				vs = append(vs, s)
			} else {
				vs = append(vs, string(v))
			}
		}
		parts = append(parts, "one of "+strings.Join(vs, ", "))
	}
	if len(p.Default) > 0 {
		parts = append(parts, "default "+string(p.Default))
	}
	return c.line(strings.Join(parts, ", "))
}

// rawArg is one member of an arguments object: its name as it is (for
// the schema lookup) and as shown.
type rawArg struct {
	name  string
	shown argument
}

// argumentsRaw is [Console.arguments] with each member's raw name.
func (c *Console) argumentsRaw(v jsontext.Value) []rawArg {
	shown := c.arguments(v)
	var names []string
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	if tok, err := dec.ReadToken(); err == nil && tok.Kind() == '{' {
		for dec.PeekKind() == '"' {
			tok, err := dec.ReadToken()
			if err != nil {
				names = nil
				break
			}
			name := tok.String() // before the next read reuses tok
			if dec.SkipValue() != nil {
				names = nil
				break
			}
			names = append(names, name)
		}
	}
	out := make([]rawArg, len(shown))
	for i, a := range shown {
		out[i].shown = a
		if len(names) == len(shown) && a.Name != "" {
			out[i].name = names[i]
		}
	}
	return out
}

// callSummary is the one line of what a call does: the tool's
// description's first sentence and the arguments it is called with.
func (c *Console) callSummary(tool string, def *explain.Tool, with []string, omitted []omittedArg) string {
	var b strings.Builder
	what := ""
	if def != nil {
		what = firstSentence(def.Description)
	}
	if what == "" {
		what = "Call " + tool
	}
	b.WriteString(strings.TrimSuffix(c.line(what), "."))
	if len(with) > 0 {
		b.WriteString(" with " + strings.Join(with, ", "))
	}
	var left []string
	for _, o := range omitted {
		left = append(left, o.Name)
	}
	if len(left) > 0 {
		b.WriteString("; leaves out " + strings.Join(left, ", "))
	}
	if def != nil && def.SideEffecting != nil && *def.SideEffecting {
		b.WriteString(" (side-effecting")
		if def.RiskClass != "" && def.RiskClass != "unknown" {
			b.WriteString(", risk " + def.RiskClass)
		}
		b.WriteString(")")
	}
	b.WriteString(".")
	return b.String()
}

func firstSentence(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// unlock is a step a gate's approval leads to, with the side-effecting
// tools it may call, as explain reads them.
type unlock struct {
	Ref       string
	Kind      string
	Purpose   string
	RiskClass string
	// Effects are the step's side-effecting allowed tools (and those
	// whose side effects are not declared).
	Effects []explain.Tool
}

// unlocks are the steps an approval of the gate step id runs, in order,
// until the run ends or reaches another gate (which is decided on its
// own): the gate's next step, its next, and so on.
func unlocks(e *explain.Explanation, id string) (steps []unlock, ends bool) {
	byID := map[string]explain.Step{}
	for _, st := range e.Steps {
		if st.ID != "" {
			if _, dup := byID[st.ID]; !dup {
				byID[st.ID] = st
			}
		}
	}
	gate, ok := byID[id]
	if !ok {
		return nil, false
	}
	seen := map[string]bool{id: true}
	next := gate.Next
	for next != "" && !seen[next] {
		seen[next] = true
		st, ok := byID[next]
		if !ok {
			break
		}
		u := unlock{Ref: st.Ref, Kind: st.Kind, Purpose: st.Purpose, RiskClass: st.RiskClass}
		for _, t := range st.AllowedTools {
			if t.SideEffecting == nil || *t.SideEffecting {
				u.Effects = append(u.Effects, t)
			}
		}
		steps = append(steps, u)
		if st.Kind == "gate" {
			return steps, false
		}
		next = st.Next
	}
	return steps, next == ""
}

// priorText is an earlier attempt's output as text first: the string
// members of its output object (the proposal a gate's reviewer reads is
// usually one), and the whole JSON behind them.
type priorText struct {
	Name  string
	Value string
}

func (c *Console) outputText(v jsontext.Value) []priorText {
	var out, nested []priorText
	var s string
	if v.Kind() == '"' && json.Unmarshal(v, &s) == nil {
		return []priorText{{Value: c.text(s)}}
	}
	var walk func(prefix string, v jsontext.Value, depth int)
	walk = func(prefix string, v jsontext.Value, depth int) {
		if depth > 3 || len(out)+len(nested) >= 8 {
			return
		}
		dec := jsontext.NewDecoder(bytes.NewReader(v))
		if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
			return
		}
		for dec.PeekKind() == '"' {
			tok, err := dec.ReadToken()
			if err != nil {
				return
			}
			name := tok.String() // before the next read reuses tok
			val, err := dec.ReadValue()
			if err != nil {
				return
			}
			if prefix != "" {
				name = prefix + "." + name
			}
			switch val.Kind() {
			case '"':
				if json.Unmarshal(val, &s) == nil && strings.TrimSpace(s) != "" && len(out)+len(nested) < 8 {
					if depth == 0 {
						out = append(out, priorText{Name: c.line(name), Value: c.text(s)})
					} else {
						nested = append(nested, priorText{Name: c.line(name), Value: c.text(s)})
					}
				}
			case '{':
				walk(name, val, depth+1)
			}
		}
	}
	walk("", v, 0)
	return append(out, nested...)
}
