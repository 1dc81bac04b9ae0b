package serve

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/diag"
	"github.com/openplaybook/openplaybook/report"
	"github.com/openplaybook/openplaybook/syntax"
)

// bodyShape describes a request body for the errors that explain it.
type bodyShape struct {
	example string   // the body, as a person would write it
	members []member // every member it may have
}

// member is one member of a request body and what it must be.
type member struct{ name, want string }

// readBody reads the JSON request body into v, a pointer to a struct
// with a field per member of shape. An empty body leaves v as it is,
// unless required. It answers (as an [*apiError]) 415 for a
// Content-Type other than application/json, 413 for a body over
// [MaxAPIBodyBytes], and 400 for a body that is not JSON (nested deeper
// than [MaxAPIBodyDepth] is said so) or not the
// shape, saying where (line, byte column and JSON Pointer) and what
// would be valid. Unknown and repeated members are refused.
func readBody(w http.ResponseWriter, r *http.Request, v any, shape bodyShape, required bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return apiErrorf(http.StatusUnsupportedMediaType, "Content-Type %q is not application/json; send the body as JSON with Content-Type: application/json", ct)
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxAPIBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return apiErrorf(http.StatusRequestEntityTooLarge, "the request body is over %d bytes (8 MiB), the most the API reads", MaxAPIBodyBytes)
		}
		return apiErrorf(http.StatusBadRequest, "reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if required {
			return apiErrorf(http.StatusBadRequest, "the request body is empty; send %s", shape.example)
		}
		return nil
	}
	if err := json.Unmarshal(body, v, json.RejectUnknownMembers(true)); err != nil {
		return bodyError(body, err, shape)
	}
	return nil
}

// MaxAPIBodyDepth is the deepest nesting of objects and arrays an API
// request body may have: the limit of the JSON decoder (jsontext), which
// refuses a body nested deeper with a 400 that names it.
const MaxAPIBodyDepth = 10000

// nestedPast reports where in b (the offset of the '{' or '[') the
// nesting of objects and arrays first goes past max, reading strings as
// strings; b need not be valid JSON.
func nestedPast(b []byte, max int) (int, bool) {
	depth, inString, escaped := 0, false, false
	for i, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > max {
				return i, true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return 0, false
}

// bodyError turns an error decoding body into a 400 that says where
// ("line 3, column 14 (at /approve)") and what belongs there.
func bodyError(body []byte, err error, shape bodyShape) error {
	var off int64
	var ptr jsontext.Pointer
	var what string
	var se *json.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &se):
		off, ptr = se.ByteOffset, se.JSONPointer
		name := firstToken(ptr)
		switch {
		case errors.Is(se.Err, json.ErrUnknownName):
			what = fmt.Sprintf("unknown member %q; %s", ptr.LastToken(), shape.names())
		case ptr == "":
			what = fmt.Sprintf("the body must be a JSON object, not %s: send %s", kindName(se.JSONKind), shape.example)
		default:
			what = fmt.Sprintf("%q %s", name, shape.want(name))
			if se.JSONKind != 0 {
				what += ", not " + kindName(se.JSONKind)
			}
		}
	case errors.As(err, &syn):
		off, ptr = syn.ByteOffset, syn.JSONPointer
		if at, deep := nestedPast(body, MaxAPIBodyDepth); deep && int64(at) <= off {
			// The decoder's limit, named: it reports it as any syntax
			// error, at the bracket past the limit.
			off, ptr = int64(at), ""
			what = fmt.Sprintf("the JSON is nested deeper than %d levels, the most the API reads", MaxAPIBodyDepth)
		} else if errors.Is(syn.Err, jsontext.ErrDuplicateName) {
			what = fmt.Sprintf("member %q is given twice; give it once", ptr.LastToken())
		} else {
			what = "not valid JSON: " + strings.TrimPrefix(syn.Err.Error(), "jsontext: ")
		}
	default:
		what = err.Error()
	}
	line, col := syntax.NewLines(body).Position(int(off))
	where := fmt.Sprintf("line %d, column %d", line, col)
	if ptr != "" {
		where += fmt.Sprintf(" (at %s)", ptr)
	}
	return apiErrorf(http.StatusBadRequest, "the request body, %s: %s", where, what)
}

// names says which members the body may have, for an unknown member's
// error: "the body has only ..." or, for a body without members, that
// it has none.
func (b bodyShape) names() string {
	if len(b.members) == 0 {
		return "the body has no members: send {} or nothing"
	}
	n := make([]string, len(b.members))
	for i, m := range b.members {
		n[i] = m.name
	}
	return "the body has only " + quoteJoin(n)
}

func (b bodyShape) want(name string) string {
	for _, m := range b.members {
		if m.name == name {
			return m.want
		}
	}
	return "is not a member the body has"
}

// firstToken returns the first reference token of p ("/a/b" → "a").
func firstToken(p jsontext.Pointer) string {
	for tok := range p.Tokens() {
		return tok
	}
	return ""
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "that"
}

// diagnosticsJSON encodes diagnostics exactly as `openplaybook validate
// --format json` does (package report), [] for none.
func (s *Server) diagnosticsJSON(ds []diag.Diagnostic) jsontext.Value {
	var b bytes.Buffer
	if err := report.Write(&b, "json", nil, ds, nil); err != nil {
		fmt.Fprintf(s.opt.Log, "openplaybook serve: API: encoding diagnostics: %v\n", err)
		return jsontext.Value("[]")
	}
	v := jsontext.Value(bytes.TrimSpace(b.Bytes()))
	if err := v.Compact(); err != nil {
		return jsontext.Value("[]")
	}
	return v
}
