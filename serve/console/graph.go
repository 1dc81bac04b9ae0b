package console

import (
	"bytes"
	"html/template"
	"net/http"
	"strings"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/explain"
	"github.com/openplaybook/openplaybook/playbook"
	"github.com/openplaybook/openplaybook/validate"
)

// checked is a document read, validated and explained.
type checked struct {
	Doc         *playbook.Document
	Diagnostics []diag.Diagnostic
	Explanation *explain.Explanation
}

// check reads and validates src as `openplaybook validate` does and
// explains it as `openplaybook explain` does.
func check(name string, src []byte) checked {
	doc, ds := playbook.Read(name, src, nil)
	ds = append(ds, validate.Document(doc, nil)...)
	diag.Sort(ds)
	return checked{Doc: doc, Diagnostics: ds, Explanation: explain.Build(doc, ds)}
}

// graph is explain's step graph of a document: the inline SVG and its
// legend, cut from explain's html rendering (the format `openplaybook
// explain --format html` writes), whose styles the console serves as
// /static/graph.css. The cut is safe to embed as it is: explain renders
// the page with html/template, so no text of the document can close the
// <svg> element or the legend's <div> early (every "<" of document text
// is written as "&lt;"), and explain has already escaped control, bidi
// and invisible characters and redacted credentials.
func graph(e *explain.Explanation) template.HTML {
	var buf bytes.Buffer
	if err := explain.Render(&buf, e, "html"); err != nil {
		return ""
	}
	page := buf.String()
	i := strings.Index(page, "<svg ")
	if i < 0 {
		return ""
	}
	j := strings.Index(page[i:], "</svg>")
	if j < 0 {
		return ""
	}
	out := page[i : i+j+len("</svg>")]
	// explain's page marks the graph role="img", which hides its links
	// (to the steps' cards) from screen readers while keyboards still
	// reach them; here it is a group of links, each named by its title.
	out = strings.Replace(out, `role="img" aria-label="step graph"`, `role="group" aria-label="step graph: each step links to its card"`, 1)
	const legend = `<div class="legend">`
	if k := strings.Index(page[i+j:], legend); k >= 0 {
		rest := page[i+j+k:]
		if end := strings.Index(rest, "</div>"); end >= 0 {
			out += "\n" + rest[:end+len("</div>")]
		}
	}
	return template.HTML(out)
}

// graphCSS returns the rules of explain's html page that style its graph
// and legend (those for svg, .risk-*, .badge and .legend), taken from the
// page explain renders for an empty document. They are explain's
// constants, not document text.
func graphCSS() []byte {
	var buf bytes.Buffer
	if err := explain.Render(&buf, explain.Build(nil, nil), "html"); err != nil {
		return nil
	}
	page := buf.String()
	i := strings.Index(page, "<style>")
	j := strings.Index(page, "</style>")
	if i < 0 || j < i {
		return nil
	}
	var out strings.Builder
	out.WriteString("/* explain's step graph (openplaybook explain --format html) */\n")
	for _, l := range strings.Split(page[i+len("<style>"):j], "\n") {
		l = strings.TrimSpace(l)
		for _, p := range []string{"svg ", ".risk-", ".badge", ".legend"} {
			if strings.HasPrefix(l, p) {
				out.WriteString(l + "\n")
				break
			}
		}
	}
	return []byte(out.String())
}

func (c *Console) graphCSS(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	_, _ = w.Write(c.graph)
}
