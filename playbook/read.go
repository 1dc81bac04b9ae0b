package playbook

import (
	"fmt"
	"strings"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/internal/credential"
	"github.com/openplaybook/openplaybook/internal/suggest"
	"github.com/openplaybook/openplaybook/syntax"
)

// Rule ids of the reader's model checks; docs/rules.md documents each.
const (
	RuleType          = "type"
	RuleUnknownMember = "unknown-member"
	RuleMemberCase    = "member-case"
)

// ReadOptions configures [Read]. A nil *ReadOptions means defaults.
type ReadOptions struct {
	// Limits bound size, depth, string and array length; zero fields take
	// the defaults of [syntax.Limits].
	Limits syntax.Limits
}

// Read parses src as an OpenPlaybook document named file and decodes it
// into the model. It reports, as diagnostics with rule ids, every reader
// hazard of package [syntax], every member of the wrong JSON type
// ([RuleType]), every unknown member ([RuleUnknownMember]) and every member
// whose name differs from a known one only by case or Unicode case folding
// ([RuleMemberCase], for example "AllowedTools" or "mcpServer\u017f").
//
// Read always returns a non-nil Document holding whatever could be read,
// so later checks still run after errors. It never panics.
//
// The document keeps src and shares its bytes (strings are not copied out
// of it, see [syntax.Parse]): src must never be modified afterwards.
func Read(file string, src []byte, opts *ReadOptions) (*Document, []diag.Diagnostic) {
	if opts == nil {
		opts = &ReadOptions{}
	}
	doc := &Document{File: file, Source: src, Lines: syntax.NewLines(src)}
	r := &reader{doc: doc}
	root, errs := syntax.Parse(src, opts.Limits)
	for _, e := range errs {
		r.at(e.Offset, e.Pointer, e.Rule, "%s", e.Message)
	}
	doc.Root = root
	doc.Truncated = syntax.Truncated(errs)
	if root != nil {
		r.document(root)
	}
	return doc, r.diags
}

type reader struct {
	doc   *Document
	diags []diag.Diagnostic
}

// At builds a diagnostic of severity sev at byte offset off of the
// document, with the given JSON Pointer.
//
// Every diagnostic of the reader and of the validator is built here, so
// this is where credentials are kept out of them: anything in the message
// or the pointer that looks like a credential (a member name written like
// a token, a URL with a password quoted as a name) is replaced by
// "[redacted <kind>]", and so is any piece of a credential held by one of
// the string args that the message repeats in another form (lower-cased
// in a "did you mean", cut short); see package internal/credential.
// Callers need not check what they quote; the credential rule still
// reports the credential itself.
func (d *Document) At(off int, pointer string, sev diag.Severity, rule, format string, args ...any) diag.Diagnostic {
	line, col := 1, off+1
	if d.Lines != nil {
		line, col = d.Lines.Position(off)
	}
	var quoted []string
	for _, a := range args {
		if s, ok := a.(string); ok && len(s) >= credential.MinLen {
			quoted = append(quoted, s)
		}
	}
	return diag.Diagnostic{File: d.File, Line: line, Column: col, Severity: sev, Rule: rule,
		Pointer: credential.RedactPointer(pointer), Message: credential.RedactFrom(fmt.Sprintf(format, args...), quoted...)}
}

// Diag builds a diagnostic located at node n (its first byte and its JSON
// Pointer). A nil n locates the diagnostic at the document root.
func (d *Document) Diag(n *syntax.Node, sev diag.Severity, rule, format string, args ...any) diag.Diagnostic {
	if n == nil {
		return d.At(0, "", sev, rule, format, args...)
	}
	return d.At(int(n.Offset), n.Pointer(), sev, rule, format, args...)
}

func (r *reader) at(off int, ptr, rule, format string, args ...any) {
	r.diags = append(r.diags, r.doc.At(off, ptr, diag.Error, rule, format, args...))
}

func (r *reader) errorf(n *syntax.Node, rule, format string, args ...any) {
	r.diags = append(r.diags, r.doc.Diag(n, diag.Error, rule, format, args...))
}

// object checks that n is an object, reports unknown members, and calls
// set for each known member (first occurrence only; duplicates are already
// reported by the syntax reader). what names the object in messages.
// Unknown members are not reported when open is true.
func (r *reader) object(n *syntax.Node, what string, fields []string, open bool, set func(name string, v *syntax.Node)) bool {
	if n.Kind != syntax.Object {
		r.errorf(n, RuleType, "%s must be an object, got %s", what, n.Kind)
		return false
	}
	var seen map[string]bool // for large objects; small ones look back
	for i := range n.Len() {
		v := n.Child(i)
		name, _ := v.Key()
		if i >= 16 && seen == nil {
			seen = make(map[string]bool, n.Len())
			for j := range i {
				k, _ := n.Child(j).Key()
				seen[k] = true
			}
		}
		if seen != nil {
			if seen[name] {
				continue
			}
			seen[name] = true
		} else if earlier(n, i, name) {
			continue
		}
		if contains(fields, name) {
			set(name, v)
			continue
		}
		if open {
			continue
		}
		ptr := v.Pointer()
		if known, ok := foldMatch(fields, name); ok {
			r.at(v.NameOffset(), ptr, RuleMemberCase,
				"member %q of %s differs from %q only by case or Unicode case folding; member names are case-sensitive, write %q", name, what, known, known)
			continue
		}
		r.at(v.NameOffset(), ptr, RuleUnknownMember, "unknown member %q in %s%s; valid members are %s",
			name, what, suggest.Phrase(name, fields), quoteList(fields))
	}
	return true
}

// earlier reports whether one of the first i members of n is called name.
func earlier(n *syntax.Node, i int, name string) bool {
	for j := range i {
		if k, _ := n.Child(j).Key(); k == name {
			return true
		}
	}
	return false
}

func foldMatch(fields []string, name string) (string, bool) {
	for _, f := range fields {
		if strings.EqualFold(f, name) {
			return f, true
		}
	}
	return "", false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

func (r *reader) str(v *syntax.Node, name string) *String {
	if v.Kind != syntax.String {
		r.errorf(v, RuleType, "%q must be a string, got %s", name, v.Kind)
		return nil
	}
	return &String{Value: v.Text(), Node: v}
}

func (r *reader) boolean(v *syntax.Node, name string) *Bool {
	if v.Kind != syntax.Bool {
		r.errorf(v, RuleType, "%q must be true or false, got %s", name, v.Kind)
		return nil
	}
	return &Bool{Value: v.Bool(), Node: v}
}

// strs reads an array of strings. Non-string elements are reported unless
// quiet is set (allowedTools leaves them to the allowed-tools-form rule).
func (r *reader) strs(v *syntax.Node, name string, quiet bool) *StringList {
	if v.Kind != syntax.Array {
		r.errorf(v, RuleType, "%q must be an array of strings, got %s", name, v.Kind)
		return nil
	}
	l := &StringList{Node: v, Items: make([]*String, 0, v.Len())}
	for _, e := range v.Elems() {
		if e.Kind != syntax.String {
			if !quiet {
				r.errorf(e, RuleType, "elements of %q must be strings, got %s", name, e.Kind)
			}
			continue
		}
		l.Items = append(l.Items, &String{Value: e.Text(), Node: e})
	}
	return l
}

// objects calls each for every object element of the array v.
func (r *reader) objects(v *syntax.Node, name string, each func(*syntax.Node)) {
	if v.Kind != syntax.Array {
		r.errorf(v, RuleType, "%q must be an array of objects, got %s", name, v.Kind)
		return
	}
	for _, e := range v.Elems() {
		if e.Kind != syntax.Object {
			r.errorf(e, RuleType, "elements of %q must be objects, got %s", name, e.Kind)
			continue
		}
		each(e)
	}
}

func (r *reader) schemaObject(v *syntax.Node, name string) *syntax.Node {
	if v.Kind != syntax.Object {
		r.errorf(v, RuleType, "%q must be a JSON Schema (an object), got %s", name, v.Kind)
		return nil
	}
	return v
}
