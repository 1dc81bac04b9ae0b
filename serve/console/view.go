package console

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/internal/textsafe"
)

// view is what the layout renders around a page.
type view struct {
	Title string
	// Nav names the navigation entry of the page ("runs", "approvals",
	// "playbooks"; "" for none).
	Nav string
	// CSRF is the session's CSRF token, for every form and the page's
	// <meta name="csrf-token">.
	CSRF string
	// Events is the event stream the page's script follows ("" for
	// none): the page reloads when a run's status changes.
	Events string
	// LoggedIn shows the logout form.
	LoggedIn bool
	// Data is the page's own.
	Data any
}

// pageNames are the templates under templates/, each defining "content".
var pageNames = []string{"signedin", "login", "error", "runs", "run", "approvals", "audit", "playbooks", "view"}

func parsePages(funcs template.FuncMap) map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		out[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS,
			"templates/layout.html", "templates/parts.html", "templates/"+name+".html"))
	}
	return out
}

// render writes page name with status.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	c.renderView(w, r, status, name, view{Title: title, Data: data})
}

func (c *Console) renderView(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	// The CSRF token is never in a page: a page can be read by whoever
	// holds the session cookie, and browsers send that cookie to every
	// port of the host. The console's script fills the forms' csrf
	// fields from the origin's own storage, where the login page put it.
	v.CSRF = ""
	if name != "login" && name != "error" && name != "signedin" {
		v.LoggedIn = true
	}
	if e, ok := v.Data.(errorData); ok && name == "error" {
		// An error page of a logged-in operator keeps the navigation and
		// Log out.
		v.LoggedIn = e.LoggedIn
	}
	var buf bytes.Buffer
	if err := c.pages[name].Execute(&buf, v); err != nil {
		// A template bug: say so without the half-written page.
		http.Error(w, "console: rendering "+name+": "+c.b.Redact(err.Error()), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// funcs are the template functions. text and line are for every string
// that did not come from the console itself: the harness's secret values
// are redacted and unsafe characters escaped (textsafe).
func (c *Console) funcs() template.FuncMap {
	return template.FuncMap{
		"text":   c.text,
		"line":   c.line,
		"json":   c.prettyJSON,
		"args":   c.arguments,
		"pos":    position,
		"sev":    func(s diag.Severity) string { return s.String() },
		"status": statusClass,
		"query":  url.QueryEscape,
		"path":   url.PathEscape,
		"yes":    func(b *bool) bool { return b != nil && *b },
		"inc":    func(i int) int { return i + 1 },
	}
}

// text is s for a page: secret values redacted, every character that
// could hide or reorder text written as \uXXXX; line breaks kept.
func (c *Console) text(s string) string { return textsafe.Escape(c.b.Redact(s)) }

// line is text for one line: line breaks and tabs escaped too.
func (c *Console) line(s string) string { return textsafe.Line(c.b.Redact(s)) }

// prettyJSON is a JSON value indented, as text; a value that is not
// JSON is shown as it is.
func (c *Console) prettyJSON(v jsontext.Value) string {
	if len(v) == 0 {
		return ""
	}
	p := bytes.Clone(v)
	if err := (*jsontext.Value)(&p).Indent(jsontext.WithIndent("  ")); err != nil {
		return c.text(string(v))
	}
	return c.text(string(p))
}

// argument is one member of a call's arguments, shown whole.
type argument struct {
	Name string
	// Kind is "string" (Value is the string itself), or "number",
	// "boolean", "null", "object", "array" or "JSON" (the whole
	// arguments when they are not an object): Value is then the JSON,
	// indented.
	Kind  string
	Value string
	Bytes int
	Lines int
}

// arguments splits a call's arguments object into its members, in
// order; arguments that are not an object are one member named "".
func (c *Console) arguments(v jsontext.Value) []argument {
	if len(v) == 0 {
		return nil
	}
	whole := []argument{{Kind: "JSON", Value: c.prettyJSON(v), Bytes: len(v), Lines: 1 + bytes.Count(v, []byte("\n"))}}
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return whole
	}
	var out []argument
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return whole
		}
		name := c.line(tok.String())
		val, err := dec.ReadValue()
		if err != nil {
			return whole
		}
		var s string
		if val.Kind() == '"' && json.Unmarshal(val, &s) == nil {
			out = append(out, argument{Name: name, Kind: "string", Value: c.text(s), Bytes: len(s), Lines: 1 + strings.Count(s, "\n")})
			continue
		}
		out = append(out, argument{Name: name, Kind: jsonKind(val.Kind()), Value: c.prettyJSON(val), Bytes: len(val), Lines: 1})
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return whole
	}
	if out == nil {
		return []argument{{Kind: "JSON", Value: "{}", Bytes: 2, Lines: 1}}
	}
	return out
}

// jsonKind names a JSON value's kind.
func jsonKind(k jsontext.Kind) string {
	switch k {
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "JSON"
}

func position(d diag.Diagnostic) string {
	if d.Line == 0 {
		return ""
	}
	return fmt.Sprintf("%d:%d", d.Line, d.Column)
}

// statusClass is the CSS class of a run or step status.
func statusClass(s string) string {
	switch s {
	case "completed", "succeeded", "finished", "approved":
		return "st-ok"
	case "waiting", "running", "pending":
		return "st-wait"
	case "failed", "rejected", "cancelled", "denied":
		return "st-bad"
	}
	return "st-other"
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// localPath returns p when it is a path on this server ("/..." but not
// "//...", and with no backslash anywhere: http.Redirect cleans
// "/a/../\x" to "/\x", which a browser reads as "//x"), else def: a
// redirect never leaves the console.
func localPath(p, def string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, `/\`) || strings.ContainsAny(p, "\r\n\\") {
		return def
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return def
	}
	return p
}
