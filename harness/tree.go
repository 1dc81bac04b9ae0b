package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/openplaybook/openplaybook/internal/credential"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/syntax"
)

// This file reads the bytes of a harness file, YAML or JSON, into one small
// positioned tree ([node]) that the section decoders walk. Both syntaxes
// end up in the same shape, so every check is written once and reports the
// same rule, line, column and pointer whichever syntax the file uses.

// kind is the JSON data model type of a [node].
type kind uint8

const (
	kNull kind = iota
	kBool
	kNumber
	kString
	kMap
	kList
)

// String names the kind in messages, in the words the harness
// documentation uses.
func (k kind) String() string {
	switch k {
	case kNull:
		return "null"
	case kBool:
		return "a boolean"
	case kNumber:
		return "a number"
	case kString:
		return "a string"
	case kMap:
		return "a map"
	case kList:
		return "a list"
	}
	return "invalid"
}

// node is one value of the harness file with its place in the source.
// text is the string value of a string, the decimal literal of a number
// and "true"/"false" for a boolean.
type node struct {
	kind      kind
	text      string
	line, col int
	ptr       string
	members   []member
	elems     []*node
}

// member is one key/value pair of a map; line and col are the key's.
type member struct {
	key       string
	line, col int
	val       *node
}

// value converts n to the plain Go values encoding/json produces with
// UseNumber: nil, bool, json.Number, string, map[string]any and []any.
func (n *node) value() any {
	if n == nil {
		return nil
	}
	switch n.kind {
	case kBool:
		return n.text == "true"
	case kNumber:
		return json.Number(n.text)
	case kString:
		return n.text
	case kMap:
		m := make(map[string]any, len(n.members))
		for _, mem := range n.members {
			m[mem.key] = mem.val.value()
		}
		return m
	case kList:
		a := make([]any, len(n.elems))
		for i, e := range n.elems {
			a[i] = e.value()
		}
		return a
	}
	return nil
}

// childPtr returns the JSON Pointer of the member key below ptr.
func childPtr(ptr, key string) string { return ptr + "/" + syntax.EscapePointerToken(key) }

// Limits of a harness file. A harness is a short hand-written file; the
// limits keep a hostile or broken one cheap to reject.
const (
	// MaxSize is the largest harness file, in bytes (1 MiB).
	MaxSize = 1 << 20
	// maxDepth is the deepest nesting of maps and lists.
	maxDepth = 64
)

// Rule ids of the reader. docs/harness.md lists every rule with an example.
const (
	RuleSyntax        = "harness-syntax"
	RuleLimit         = "harness-limit"
	RuleYAMLFeature   = "harness-yaml-feature"
	RuleDuplicateKey  = "harness-duplicate-key"
	RuleUnknownKey    = "harness-unknown-key"
	RuleType          = "harness-type"
	RuleRequired      = "harness-required"
	RuleName          = "harness-name"
	RuleValue         = "harness-value"
	RuleTransport     = "harness-transport"
	RuleCredential    = "harness-credential"
	RuleSecretRef     = "harness-secret-ref"
	RuleDuplicate     = "harness-duplicate-value"
	RuleDotenv        = "harness-dotenv"
	RuleSecretMissing = "harness-secret-missing"
	RuleSecretBinding = "harness-secret-binding"
)

// reader turns source bytes into a tree and collects diagnostics.
type reader struct {
	file  string
	src   []byte
	lines *syntax.Lines
	ds    []diag.Diagnostic
}

// add records a diagnostic. Every one passes through here, so this is
// where credentials are kept out of them: whatever in the message or the
// pointer looks like a credential (a key or a value written like a token),
// or is a piece of one held by the message's string arguments (quoted,
// cut short), is replaced by "[redacted <kind>]" (package
// internal/credential). Values flagged for their key's name alone (a
// GITHUB_TOKEN holding plain text) are never quoted by the messages.
func (r *reader) add(sev diag.Severity, line, col int, ptr, rule, format string, args ...any) {
	var quoted []string
	for _, a := range args {
		if s, ok := a.(string); ok && len(s) >= credential.MinLen {
			quoted = append(quoted, s)
		}
	}
	r.ds = append(r.ds, diag.Diagnostic{
		File: r.file, Line: line, Column: col, Pointer: credential.RedactPointer(ptr),
		Severity: sev, Rule: rule, Message: credential.RedactFrom(fmt.Sprintf(format, args...), quoted...),
	})
}

func (r *reader) errAt(line, col int, ptr, rule, format string, args ...any) {
	r.add(diag.Error, line, col, ptr, rule, format, args...)
}

// syntaxOf picks the syntax of a harness file: by extension (.json; .yaml
// or .yml), else by sniffing (a first non-blank byte '{' is JSON).
func syntaxOf(name string, src []byte) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return "json"
	case ".yaml", ".yml":
		return "yaml"
	}
	if t := bytes.TrimLeft(src, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		return "json"
	}
	return "yaml"
}

// read parses src into a tree. It returns nil when nothing usable could be
// read; the reasons are in r.ds.
func (r *reader) read(syn string) *node {
	if len(r.src) > MaxSize {
		r.errAt(0, 0, "", RuleLimit, "the harness file is larger than the limit of %d bytes (1 MiB)", MaxSize)
		return nil
	}
	r.lines = syntax.NewLines(r.src)
	if syn == "json" {
		return r.readJSON()
	}
	return r.readYAML()
}

// readJSON reads a JSON harness with the project's strict JSON reader, so
// a JSON harness is read exactly as strictly as a playbook document.
func (r *reader) readJSON() *node {
	root, errs := syntax.Parse(r.src, syntax.Limits{MaxSize: MaxSize, MaxDepth: maxDepth})
	for _, e := range errs {
		line, col := r.lines.Position(e.Offset)
		rule, msg := RuleSyntax, e.Message
		switch e.Rule {
		case syntax.RuleDuplicateMember:
			rule = RuleDuplicateKey
		case syntax.RuleLimit:
			rule = RuleLimit
		case syntax.RuleComment:
			msg = "comments are not allowed in JSON; write the harness as YAML (.yaml) to keep comments"
		}
		if e.Rule == syntax.RuleLimit && e.Offset == 0 && e.Pointer == "" {
			line, col = 0, 0
		}
		r.errAt(line, col, e.Pointer, rule, "%s", msg)
	}
	if root == nil {
		return nil
	}
	return r.fromJSON(root, "")
}

func (r *reader) fromJSON(n *syntax.Node, ptr string) *node {
	line, col := r.lines.Position(int(n.Offset))
	out := &node{line: line, col: col, ptr: ptr, text: n.Text()}
	switch n.Kind {
	case syntax.Null:
		out.kind = kNull
	case syntax.Bool:
		out.kind = kBool
	case syntax.Number:
		out.kind = kNumber
	case syntax.String:
		out.kind = kString
	case syntax.Object:
		out.kind = kMap
		seen := make(map[string]bool, n.Len())
		for name, v := range n.Members() {
			if seen[name] {
				continue // reported by the reader as duplicate-member; the first wins
			}
			seen[name] = true
			kl, kc := r.lines.Position(v.NameOffset())
			cp := childPtr(ptr, name)
			out.members = append(out.members, member{key: name, line: kl, col: kc, val: r.fromJSON(v, cp)})
		}
	case syntax.Array:
		out.kind = kList
		for i, e := range n.Elems() {
			out.elems = append(out.elems, r.fromJSON(e, ptr+"/"+strconv.Itoa(i)))
		}
	}
	return out
}

// readYAML reads a YAML harness. The file is parsed into goccy/go-yaml's
// syntax tree (never decoded into Go values by the library), and the tree
// is walked here, so that every YAML feature that could make the file mean
// something other than what it looks like is seen and refused.
func (r *reader) readYAML() *node {
	if len(r.src) >= 3 && r.src[0] == 0xEF && r.src[1] == 0xBB && r.src[2] == 0xBF {
		r.errAt(1, 1, "", RuleSyntax, "the file starts with a UTF-8 byte order mark; save it without one")
		return nil
	}
	if !utf8.Valid(r.src) {
		off := 0
		for off < len(r.src) {
			c, size := utf8.DecodeRune(r.src[off:])
			if c == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		line, col := r.lines.Position(off)
		r.errAt(line, col, "", RuleSyntax, "invalid UTF-8; a harness file is UTF-8 text")
		return nil
	}
	if off, ok := flowTooDeep(r.src); !ok {
		line, col := r.lines.Position(off)
		r.errAt(line, col, "", RuleLimit, "nesting is deeper than %d levels", maxDepth)
		return nil
	}
	f, err := parser.ParseBytes(r.src, 0, parser.AllowDuplicateMapKey()) // duplicates are reported below, all of them
	if err != nil {
		line, col, msg := 0, 0, err.Error()
		if ye, ok := err.(yaml.Error); ok {
			msg = ye.GetMessage()
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				line, col = r.yamlPos(tk.Position)
			}
		}
		r.errAt(line, col, "", RuleSyntax, "%s", msg)
		return nil
	}
	var body ast.Node
	bodies := 0
	for _, d := range f.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		if _, ok := d.Body.(*ast.CommentGroupNode); ok {
			continue
		}
		if dn, ok := d.Body.(*ast.DirectiveNode); ok {
			line, col := r.tokPos(dn.GetToken())
			r.errAt(line, col, "", RuleYAMLFeature, "YAML directives (%%YAML, %%TAG) are not accepted in a harness file; remove it")
			continue
		}
		bodies++
		if bodies == 1 {
			body = d.Body
		} else {
			line, col := r.tokPos(d.Body.GetToken())
			if d.Start != nil {
				line, col = r.tokPos(d.Start)
			}
			r.errAt(line, col, "", RuleYAMLFeature, "a harness file holds one YAML document; remove the second document (after \"---\")")
		}
	}
	if body == nil {
		if len(r.ds) == 0 {
			r.errAt(1, 1, "", RuleType, "the harness file is empty; write {} for a harness that binds nothing")
		}
		return nil
	}
	return r.fromYAML(body, "", 0)
}

// yamlPos converts a goccy position (1-based line, 1-based column counted
// in runes) into the 1-based line and byte column diagnostics use.
func (r *reader) yamlPos(p *token.Position) (line, col int) {
	if p == nil || p.Line <= 0 {
		return 0, 0
	}
	line, col = p.Line, p.Column
	start := lineStart(r.src, line)
	if start < 0 {
		return line, col
	}
	off := start
	for i := 1; i < col && off < len(r.src) && r.src[off] != '\n'; i++ {
		_, size := utf8.DecodeRune(r.src[off:])
		off += size
	}
	return line, off - start + 1
}

func (r *reader) tokPos(tk *token.Token) (line, col int) {
	if tk == nil {
		return 0, 0
	}
	return r.yamlPos(tk.Position)
}

// lineStart returns the byte offset at which 1-based line starts, or -1.
func lineStart(src []byte, line int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(src[off:], '\n')
		if i < 0 {
			return -1
		}
		off += i + 1
	}
	return off
}

// decimal is the only number syntax accepted in YAML: YAML also reads 0x10,
// 0o17, 010 (octal 8 in YAML 1.1), 1_000 and +1 as numbers, which is too
// easy to misread in a configuration file.
var decimal = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

func (r *reader) fromYAML(n ast.Node, ptr string, depth int) *node {
	line, col := r.tokPos(n.GetToken())
	out := &node{line: line, col: col, ptr: ptr}
	if depth > maxDepth {
		r.errAt(line, col, ptr, RuleLimit, "nesting is deeper than %d levels", maxDepth)
		return out
	}
	switch n := n.(type) {
	case *ast.NullNode:
		out.kind = kNull
	case *ast.BoolNode:
		out.kind, out.text = kBool, strconv.FormatBool(n.Value)
	case *ast.IntegerNode:
		out.kind, out.text = kNumber, n.Token.Value
		if !decimal.MatchString(n.Token.Value) {
			r.errAt(line, col, ptr, RuleValue, "write numbers in plain decimal (%q is read by YAML as %v); quote it if you meant a string", n.Token.Value, n.Value)
			out.text = fmt.Sprint(n.Value)
		}
	case *ast.FloatNode:
		out.kind, out.text = kNumber, n.Token.Value
		if !decimal.MatchString(n.Token.Value) {
			r.errAt(line, col, ptr, RuleValue, "write numbers in plain decimal; quote %q if you meant a string", n.Token.Value)
			out.text = strconv.FormatFloat(n.Value, 'g', -1, 64)
		}
	case *ast.InfinityNode, *ast.NanNode:
		out.kind, out.text = kNumber, "0"
		r.errAt(line, col, ptr, RuleValue, "infinity and NaN are not accepted; quote the value if you meant a string")
	case *ast.StringNode:
		out.kind, out.text = kString, n.Value
	case *ast.LiteralNode:
		out.kind = kString
		if n.Value != nil {
			out.text = n.Value.Value
		}
	case *ast.MappingNode:
		out.kind = kMap
		if !n.IsFlowStyle && len(n.Values) > 0 {
			out.line, out.col = r.tokPos(n.Values[0].Key.GetToken())
		} else if n.Start != nil {
			out.line, out.col = r.tokPos(n.Start)
		}
		first := map[string]member{}
		for _, mv := range n.Values {
			r.yamlMember(out, mv, first, depth)
		}
	case *ast.MappingValueNode:
		// A single "key: value" document is parsed as a bare
		// MappingValueNode by some versions of the parser.
		out.kind = kMap
		out.line, out.col = r.tokPos(n.Key.GetToken())
		r.yamlMember(out, n, map[string]member{}, depth)
	case *ast.SequenceNode:
		out.kind = kList
		if n.Start != nil {
			out.line, out.col = r.tokPos(n.Start)
		}
		for i, v := range n.Values {
			out.elems = append(out.elems, r.fromYAML(v, ptr+"/"+strconv.Itoa(i), depth+1))
		}
	case *ast.AnchorNode:
		r.errAt(line, col, ptr, RuleYAMLFeature, "YAML anchors (&name) are not accepted in a harness file; write each value out in full")
		if n.Value != nil {
			return r.fromYAML(n.Value, ptr, depth)
		}
	case *ast.AliasNode:
		r.errAt(line, col, ptr, RuleYAMLFeature, "YAML aliases (*name) are not accepted in a harness file; write the value out in full")
	case *ast.TagNode:
		r.errAt(line, col, ptr, RuleYAMLFeature, "YAML tags (%s) are not accepted in a harness file; quote the value to make it a string", n.Start.Value)
		if n.Value != nil {
			return r.fromYAML(n.Value, ptr, depth)
		}
	default:
		r.errAt(line, col, ptr, RuleYAMLFeature, "unexpected YAML node (%s) in a harness file", n.Type())
	}
	return out
}

// yamlMember adds one key/value pair to the map out, reporting keys that
// are not plain strings and keys seen before in the same map.
func (r *reader) yamlMember(out *node, mv *ast.MappingValueNode, first map[string]member, depth int) {
	kl, kc := r.tokPos(mv.Key.GetToken())
	var key string
	switch k := mv.Key.(type) {
	case *ast.StringNode:
		key = k.Value
	case *ast.MergeKeyNode:
		r.errAt(kl, kc, out.ptr, RuleYAMLFeature, "YAML merge keys (<<) are not accepted in a harness file; write each key out in full")
		return
	case *ast.MappingKeyNode:
		r.errAt(kl, kc, out.ptr, RuleYAMLFeature, "YAML complex keys (?) are not accepted in a harness file; keys are plain strings")
		return
	case *ast.AnchorNode, *ast.AliasNode, *ast.TagNode:
		r.errAt(kl, kc, out.ptr, RuleYAMLFeature, "anchors, aliases and tags are not accepted on keys in a harness file")
		return
	default:
		tk := mv.Key.GetToken()
		text := ""
		if tk != nil {
			text = tk.Value
		}
		r.errAt(kl, kc, out.ptr, RuleType, "a key must be a string; YAML reads %q as %s: quote it", text, yamlKindName(mv.Key))
		return
	}
	cp := childPtr(out.ptr, key)
	if prev, dup := first[key]; dup {
		r.errAt(kl, kc, cp, RuleDuplicateKey, "duplicate key %q (first at line %d, column %d); each key may appear once in a map", key, prev.line, prev.col)
		return
	}
	var val *node
	if mv.Value == nil {
		val = &node{kind: kNull, line: kl, col: kc, ptr: cp}
	} else {
		val = r.fromYAML(mv.Value, cp, depth+1)
		if val.kind == kNull && val.line == 0 {
			val.line, val.col = kl, kc
		}
	}
	m := member{key: key, line: kl, col: kc, val: val}
	first[key] = m
	out.members = append(out.members, m)
}

func yamlKindName(n ast.Node) string {
	switch n.(type) {
	case *ast.NullNode:
		return "null"
	case *ast.BoolNode:
		return "a boolean"
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	}
	return strings.ToLower(n.Type().String())
}

// flowTooDeep scans YAML source for flow collections ("[", "{") nested more
// than maxDepth deep, before the parser sees them: the parser recurses per
// level, and a megabyte of "[" must cost nothing. Quoted scalars and
// comments are skipped, and so are plain scalars up to a blank or a flow
// indicator; a bracket counts only where a flow collection can start
// (after a blank, a line start, or another flow indicator). It
// returns the offset of the bracket past the limit and false.
func flowTooDeep(src []byte) (int, bool) {
	depth := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		prev := byte('\n')
		if i > 0 {
			prev = src[i-1]
		}
		atStart := prev == ' ' || prev == '\t' || prev == '\n' || prev == '\r' || prev == '[' || prev == '{' || prev == ','
		switch {
		case c == '#' && atStart:
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '\'' && atStart:
			for i++; i < len(src); i++ {
				if src[i] == '\'' {
					if i+1 < len(src) && src[i+1] == '\'' {
						i++
						continue
					}
					break
				}
			}
		case c == '"' && atStart:
			for i++; i < len(src) && src[i] != '"'; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		case (c == '[' || c == '{') && atStart:
			depth++
			if depth > maxDepth {
				return i, false
			}
		case (c == ']' || c == '}') && depth > 0:
			depth--
		case c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != ',' && c != ':' && c != '-' && c != '?':
			// A plain scalar: brackets inside it ("x[[[") are text.
			for i+1 < len(src) && !strings.ContainsRune(" \t\r\n,]}", rune(src[i+1])) {
				i++
			}
		}
	}
	return 0, true
}
