// Package transcript is the driver that replays a recorded transcript: for
// each agent step, the tool calls its agent makes, in order. It runs no
// model, so a run is reproducible, and it is how tests attack the
// capability boundary: a transcript may ask for any tool name at all, and
// the runtime's [driver.Caller] must refuse every one the step does not
// allow.
//
// The file is a JSON object (docs/drivers.md, "The transcript format"):
//
//	{"steps": {"<step id>": [{"tool": "<name>", "arguments": <JSON>}, ...]}}
//
// "tool" is passed to the Caller byte for byte, whatever it holds (control
// characters, look-alikes, trailing blanks); "arguments" is passed as it
// is written (any JSON value: the Caller validates it). A step with no
// entry makes no calls. The file is read strictly: an unknown member, a
// member given twice, a missing "tool" or "arguments" and a value of the
// wrong type are errors naming the file, the line and column and the JSON
// Pointer.
package transcript

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/syntax"
)

// MaxSize is the largest transcript file read, in bytes.
const MaxSize = 16 << 20

// Entry is one recorded call.
type Entry struct {
	// Tool is the tool name exactly as the transcript spells it.
	Tool string
	// Arguments is the arguments as written (any JSON value).
	Arguments jsontext.Value
	// Pointer is the entry's RFC 6901 JSON Pointer in the file
	// ("/steps/triage/0"); Line and Column (1-based, in bytes) are where
	// the entry starts.
	Pointer      string
	Line, Column int
}

// Transcript is a read transcript file.
type Transcript struct {
	// File is the name the transcript was read from.
	File  string
	steps map[string][]Entry
	order []string
	keys  map[string]Step
}

// Step is one step id of a transcript's "steps" object: where its name
// stands in the file, and how many calls it records.
type Step struct {
	// ID is the step id as the transcript spells it.
	ID string
	// Pointer is the RFC 6901 JSON Pointer of the step's list of calls
	// ("/steps/triage"); Line and Column (1-based, in bytes) are where
	// the step id's name starts, its opening quote.
	Pointer      string
	Line, Column int
	// Calls is how many calls the step records (0 for []).
	Calls int
}

// Steps returns the step ids the transcript has an entry for, in file
// order, with their positions. A check uses them to report entries no
// run would ever replay: a step id the playbook does not have, or a gate.
func (t *Transcript) Steps() []Step {
	out := make([]Step, 0, len(t.order))
	for _, id := range t.order {
		st := t.keys[id]
		st.Calls = len(t.steps[id])
		out = append(out, st)
	}
	return out
}

// Calls returns the calls recorded for the step with id step, in order
// (none when the transcript has no entry for it). The slice is the
// caller's own; the Arguments bytes are shared and must not be changed.
func (t *Transcript) Calls(step string) []Entry {
	return append([]Entry(nil), t.steps[step]...)
}

// StepIDs returns the step ids the transcript has an entry for, in file
// order. A replay check uses it to report entries for steps a playbook
// does not have: such calls are never made.
func (t *Transcript) StepIDs() []string {
	return append([]string(nil), t.order...)
}

// Load reads the transcript file at path (see [Parse]).
func Load(path string) (*Transcript, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("transcript: %s: %w", path, err)
	}
	return Parse(path, src)
}

// The file's shape, for the strict unmarshal.
type fileJSON struct {
	Steps *map[string][]entryJSON `json:"steps"`
}

type entryJSON struct {
	Tool      *string        `json:"tool"`
	Arguments jsontext.Value `json:"arguments"`
}

// Parse reads a transcript from src; file names it in errors. The file is
// one JSON object with the single member "steps", an object from step id
// to a list of calls; a call is an object with exactly the members "tool"
// (a string) and "arguments" (any JSON value). Anything else is an error
// of the form "file:line:col: /pointer: message". Duplicate member names
// (in any object, "arguments" included), invalid UTF-8 and trailing data
// are errors too.
func Parse(file string, src []byte) (*Transcript, error) {
	if len(src) > MaxSize {
		return nil, fmt.Errorf("transcript: %s: the file is larger than %d MiB", file, MaxSize>>20)
	}
	lines := syntax.NewLines(src)
	at := func(off int64, ptr jsontext.Pointer, format string, args ...any) error {
		line, col := lines.Position(int(off))
		where := string(ptr)
		if where == "" {
			where = "(the document)"
		}
		if len(where) > 200 {
			// A hostile, deeply nested file must not make a huge message.
			where = where[:200] + "..."
		}
		msg := fmt.Sprintf(format, args...)
		if len(msg) > 500 {
			msg = msg[:500] + "..."
		}
		return fmt.Errorf("transcript: %s:%d:%d: %s: %s", file, line, col, where, msg)
	}

	var fj fileJSON
	if err := json.Unmarshal(src, &fj, json.RejectUnknownMembers(true)); err != nil {
		return nil, describe(err, at)
	}
	if fj.Steps == nil {
		return nil, at(0, "", "missing member \"steps\": a transcript is {\"steps\": {\"<step id>\": [{\"tool\": ..., \"arguments\": ...}]}}")
	}

	t := &Transcript{File: file, steps: map[string][]Entry{}, keys: map[string]Step{}}
	// The unmarshal succeeded, so the document is well formed: walk its
	// tokens once more for the step order, each step id's position and
	// each entry's.
	dec := jsontext.NewDecoder(bytes.NewReader(src))
	keyAt := -1 // where the last step id's name starts
	for {
		before := dec.InputOffset()
		tok, err := dec.ReadToken()
		if err != nil {
			break
		}
		ptr := dec.StackPointer()
		switch {
		case dec.StackDepth() == 2 && tok.Kind() == '"' && ptr.Parent() == "/steps":
			// A string directly in "steps" is a step id: its values
			// are lists (or the unmarshal would have failed). Only
			// blanks, ',' and ':' stand between two tokens.
			keyAt = int(before)
			for keyAt < len(src) && src[keyAt] != '"' {
				keyAt++
			}
		case dec.StackDepth() == 3 && tok.Kind() == '[':
			id := ptr.LastToken()
			t.order = append(t.order, id)
			line, col := lines.Position(max(keyAt, 0))
			t.keys[id] = Step{ID: id, Pointer: string(ptr), Line: line, Column: col}
		case dec.StackDepth() == 4 && tok.Kind() == '{' && ptr.Parent().Parent() == "/steps":
			id := ptr.Parent().LastToken()
			off := dec.InputOffset() - 1
			line, col := lines.Position(int(off))
			t.steps[id] = append(t.steps[id], Entry{Pointer: string(ptr), Line: line, Column: col})
		}
	}
	for _, id := range t.order {
		recorded := (*fj.Steps)[id]
		entries := t.steps[id]
		if len(entries) != len(recorded) {
			// An entry that is not an object was an unmarshal error.
			return nil, fmt.Errorf("transcript: %s: internal error: step %q has %d entries, read %d", file, id, len(recorded), len(entries))
		}
		for i, e := range recorded {
			pos := &entries[i]
			switch {
			case e.Tool == nil:
				return nil, fmt.Errorf("transcript: %s:%d:%d: %s: missing member \"tool\" (the tool name, as the agent sends it)", file, pos.Line, pos.Column, pos.Pointer)
			case e.Arguments == nil:
				return nil, fmt.Errorf("transcript: %s:%d:%d: %s: missing member \"arguments\" (the call's arguments; {} for none)", file, pos.Line, pos.Column, pos.Pointer)
			}
			pos.Tool = *e.Tool
			pos.Arguments = e.Arguments
		}
	}
	return t, nil
}

// describe turns an unmarshal error into one naming the place and what
// belongs there.
func describe(err error, at func(int64, jsontext.Pointer, string, ...any) error) error {
	var se *json.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &se):
		ptr := se.JSONPointer
		if errors.Is(se.Err, json.ErrUnknownName) {
			name := ptr.LastToken()
			return at(se.ByteOffset, ptr, "unknown member %q; %s", name, membersAt(ptr.Parent()))
		}
		want := expected(ptr)
		if se.JSONKind != 0 {
			return at(se.ByteOffset, ptr, "%s, not %s", want, kindName(se.JSONKind))
		}
		return at(se.ByteOffset, ptr, "%s: %v", want, se.Err)
	case errors.As(err, &syn):
		if errors.Is(syn.Err, jsontext.ErrDuplicateName) {
			return at(syn.ByteOffset, syn.JSONPointer, "member %q given twice; a name appears at most once in an object", syn.JSONPointer.LastToken())
		}
		return at(syn.ByteOffset, syn.JSONPointer, "%s", strings.TrimPrefix(syn.Err.Error(), "jsontext: "))
	}
	return at(0, "", "%v", err)
}

// depth returns the number of tokens of p.
func depth(p jsontext.Pointer) int {
	return strings.Count(string(p), "/")
}

func membersAt(p jsontext.Pointer) string {
	switch depth(p) {
	case 0:
		return `a transcript has only "steps"`
	default:
		return `a call has only "tool" and "arguments"`
	}
}

func expected(p jsontext.Pointer) string {
	switch depth(p) {
	case 0:
		return `a transcript must be a JSON object {"steps": {...}}`
	case 1:
		return `"steps" must be an object from step id to a list of calls`
	case 2:
		return "a step's entry must be a list of calls"
	case 3:
		return `a call must be an object {"tool": ..., "arguments": ...}`
	default:
		return `"tool" must be a string`
	}
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "a list"
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

// PathFor returns the transcript path pattern with every "{playbook}"
// replaced by playbookID (a manifest id), so one agent binding can serve
// several playbooks: "transcripts/{playbook}/lou.json".
func PathFor(pattern, playbookID string) string {
	return strings.ReplaceAll(pattern, "{playbook}", playbookID)
}

// Driver replays a transcript. It is safe for concurrent use.
type Driver struct {
	t *Transcript
}

// New returns the driver that replays t.
func New(t *Transcript) *Driver {
	return &Driver{t: t}
}

// Transcript returns the transcript the driver replays.
func (d *Driver) Transcript() *Transcript { return d.t }

// Deterministic reports true: a transcript asks the same calls in the
// same order every time a step runs ([driver.Deterministic]).
func (d *Driver) Deterministic() bool { return true }

// RunStep makes the calls recorded for in.StepID through caller, in order,
// each with the name and arguments exactly as recorded. It stops at the
// first error from caller and returns it unchanged ([driver.ErrSuspended],
// [driver.ErrCallLimit], ...), and at ctx's end.
//
// The output is a JSON array with one object per call: {"tool": name,
// "result": content} when the call ran ("result" is null when the tool
// returned nothing), or {"tool": name, "error": message} when the Caller
// answered with an error (a refusal, an invalid argument, a failure).
func (d *Driver) RunStep(ctx context.Context, in driver.StepInput, caller driver.Caller) (jsontext.Value, error) {
	var out jsontext.Value = []byte{'['}
	for i, e := range d.t.steps[in.StepID] {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// A copy: the transcript serves every run of the driver.
		res, err := caller.Call(ctx, driver.Call{Name: e.Tool, Arguments: slices.Clone(e.Arguments)})
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, ',')
		}
		item, err := outcome(e.Tool, res)
		if err != nil {
			return nil, fmt.Errorf("transcript: step %q, call %d: %w", in.StepID, i, err)
		}
		out = append(out, item...)
	}
	return append(out, ']'), nil
}

func outcome(tool string, r driver.Result) ([]byte, error) {
	if r.Error != "" {
		return json.Marshal(struct {
			Tool  string `json:"tool"`
			Error string `json:"error"`
		}{tool, r.Error}, jsontext.AllowInvalidUTF8(true))
	}
	content := r.Content
	if len(content) == 0 {
		content = jsontext.Value("null")
	}
	return json.Marshal(struct {
		Tool   string         `json:"tool"`
		Result jsontext.Value `json:"result"`
	}{tool, content}, jsontext.AllowInvalidUTF8(true))
}

var _ driver.Driver = (*Driver)(nil)
