package explain

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"reflect"
	"strings"
)

//go:embed page.html.tmpl
var pageSource string

// page is the html format: one self-contained page. html/template escapes
// every piece of document text for where it lands (element text, attribute,
// the SVG's <title>); the page loads nothing (no script, no external CSS,
// font or image) and its Content-Security-Policy forbids loading anything
// but its own inline style.
var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"clean":        clean,
	"counts":       countsText,
	"position":     func(p Problem) string { return position(&p) },
	"riskStyle":    riskStyle,
	"stepRisk":     func(st Step) string { return stepRisk(&st) },
	"inc":          func(i int) int { return i + 1 },
	"isGate":       func(st Step) bool { return isGate(&st) },
	"kindText":     func(st Step) string { return clean(kindText(&st)) },
	"nextText":     func(st Step) string { return clean(nextText(&st)) },
	"onRejectText": func(st Step) string { return clean(onRejectText(&st)) },
	"gateNext":     func(g Gate) string { return clean(gateNext(&g)) },
	"gateReject":   func(g Gate) string { return clean(gateReject(&g)) },
	"via":          func(t Tool) string { return via(&t) },
	"riskText":     func(t Tool) string { return clean(riskText(&t)) },
	"tristate":     tristate,
	"declared":     func(list []string) string { return clean(declaredList(list)) },
	"claimsText":   func(t Tool) string { return clean(claimsText(&t)) },
	// claim marks a value the consulted registry does not confirm; its
	// markup is a constant, the field name never reaches the page.
	"claim": func(t Tool, field string) template.HTML {
		if claimed(&t, field) {
			return `<span class="claim" title="the document's claim: the registry does not confirm it">claim</span>`
		}
		return ""
	},
	"writesCell": func(t Tool) string {
		if n := writesNote(&t); n != "" {
			return n
		}
		return clean(listOr(t.DataScopeWrites, "none"))
	},
}).Parse(pageSource))

// pageData is what the page template renders.
type pageData struct {
	E            *Explanation
	Title        string
	NoneDeclared string
	Undefined    string
	NotValid     string
	NoRegistry   string
	// NoInputSchema is said when the document has no inputSchema;
	// Schema is the schema as text (indented) when it has one.
	NoInputSchema string
	Schema        string
	Graph         svgGraph
	Legend        []struct{ Risk, Text string }
	RiskCSS       template.CSS
}

// riskCSS is the style of each risk class. It is built from constants
// only, never from document text, so it is trusted as CSS.
func riskCSS() template.CSS {
	var b strings.Builder
	for _, r := range riskStyles {
		c := riskColors[r]
		fmt.Fprintf(&b, ".risk-%s { fill: %s; stroke: %s; }\n", r, c[0], c[1])
		fmt.Fprintf(&b, ".badge.risk-%s, .legend .risk-%s { background: %s; border-color: %s; color: %s; }\n", r, r, c[0], c[1], c[2])
		fmt.Fprintf(&b, ".step.risk-%s { border-left-color: %s; }\n", r, c[1])
	}
	return template.CSS(b.String())
}

// cleanCopy returns a deep copy of e in which every string is cleaned
// (see [clean]): html/template makes text inert, and this also keeps
// control and invisible formatting characters, such as bidirectional
// overrides that reorder what a reader sees, off the page.
func cleanCopy(e *Explanation) (*Explanation, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	c := new(Explanation)
	if err := json.Unmarshal(b, c); err != nil {
		return nil, err
	}
	cleanStrings(reflect.ValueOf(c).Elem())
	return c, nil
}

func cleanStrings(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(clean(v.String()))
	case reflect.Pointer:
		if !v.IsNil() {
			cleanStrings(v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			cleanStrings(v.Index(i))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			cleanStrings(v.Field(i))
		}
	}
}

func renderHTML(w io.Writer, e *Explanation) error {
	e, err := cleanCopy(e)
	if err != nil {
		return err
	}
	d := pageData{
		E:             e,
		Title:         clean(title(e)),
		NoneDeclared:  "none declared",
		Undefined:     UndefinedNote,
		NotValid:      notValid,
		NoRegistry:    noRegistry,
		NoInputSchema: noInputSchema,
		Graph:         layout(e),
		Legend:        svgLegend(),
		RiskCSS:       riskCSS(),
	}
	if e.InputSchema != nil {
		d.Schema = schemaText(e.InputSchema, true)
	}
	if n := len(e.Summary.UndefinedTools) + len(e.Summary.UnknownRisk); n > 0 {
		d.NoneDeclared = fmt.Sprintf("none declared, but %d tool(s) are undefined or of unknown risk", n)
	}
	return page.Execute(w, d)
}
