package explain

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
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
	Graph        svgGraph
	Legend       []struct{ Risk, Text string }
	RiskCSS      template.CSS
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

func renderHTML(w io.Writer, e *Explanation) error {
	d := pageData{
		E:            e,
		Title:        clean(title(e)),
		NoneDeclared: "none declared",
		Undefined:    UndefinedNote,
		Graph:        layout(e),
		Legend:       svgLegend(),
		RiskCSS:      riskCSS(),
	}
	if n := len(e.Summary.UndefinedTools) + len(e.Summary.UnknownRisk); n > 0 {
		d.NoneDeclared = fmt.Sprintf("none declared, but %d tool(s) are undefined or of unknown risk", n)
	}
	return page.Execute(w, d)
}
