package anthropic

import (
	"bytes"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
)

// inputs assembles the input of each tool_use block of a streamed
// response itself, from the events as they came, instead of taking the
// SDK's accumulation (which makes a start input followed by deltas, or
// deltas that are not JSON, into {}: a call with all its defaults).
//
// The input of a block is exactly one complete JSON value: the input of
// its content_block_start when no input_json_delta follows, else the
// deltas' partial_json pieces joined, when the start input is empty ({}).
// Any other shape refuses the reply whole ([inputs.refusal]), as does a
// stream with a second message_start or one whose message_start carries
// content.
type inputs struct {
	blocks []*blockInput
	// refused is the first shape that refuses the reply ("" when none).
	refused string
	// started is set by the message_start event.
	started bool
}

type blockInput struct {
	tool    bool           // a tool_use block
	start   jsontext.Value // the input of its content_block_start; nil when absent
	deltas  bytes.Buffer   // the partial_json pieces, joined
	stopped bool           // its content_block_stop came
}

func (s *inputs) refuse(format string, args ...any) {
	if s.refused == "" {
		s.refused = fmt.Sprintf(format, args...)
	}
}

// event reads ev before the SDK accumulates it. An event the SDK refuses
// itself (a block started out of order) is read past: its error names
// the event.
func (s *inputs) event(ev sdk.MessageStreamEventUnion) {
	switch ev.Type {
	case "message_start":
		// One message_start, with no content of its own: the SDK starts
		// its accumulation over at each, so that a call's id and name
		// would come from one and its input from the blocks of another.
		if s.started {
			s.refuse("the response stream has a second message_start event")
		}
		s.started = true
		if len(ev.Message.Content) > 0 {
			s.refuse("the response stream's message_start event carries %d content block(s); blocks come only as content_block events", len(ev.Message.Content))
		}
	case "content_block_start":
		if ev.Index != int64(len(s.blocks)) {
			return
		}
		var blk struct {
			Type  string         `json:"type"`
			Input jsontext.Value `json:"input"`
		}
		if err := jsonv2.Unmarshal([]byte(ev.ContentBlock.RawJSON()), &blk); err != nil {
			s.refuse("content block %d starts with a block that is not a JSON object", ev.Index+1)
		}
		s.blocks = append(s.blocks, &blockInput{tool: blk.Type == "tool_use", start: bytes.Clone(blk.Input)})
	case "content_block_delta":
		if ev.Delta.Type != "input_json_delta" {
			return
		}
		if ev.Index < 0 || ev.Index >= int64(len(s.blocks)) {
			return // the SDK refuses a delta for a block that never started
		}
		b := s.blocks[ev.Index]
		switch {
		case !b.tool:
			s.refuse("an input_json_delta event names content block %d, which is not a tool_use block", ev.Index+1)
		case b.stopped:
			s.refuse("an input_json_delta event for tool_use block %d comes after its content_block_stop", ev.Index+1)
		}
		b.deltas.WriteString(ev.Delta.PartialJSON)
	case "content_block_stop":
		if ev.Index >= 0 && ev.Index < int64(len(s.blocks)) {
			s.blocks[ev.Index].stopped = true
		}
	}
}

// input returns the input of block i, a tool_use block of the complete
// stream, or why the reply is refused. A block with no deltas and a
// start input that is absent or {} has no input (nil: blank arguments,
// which [llm.Unfilled] refuses for a tool that needs some).
func (s *inputs) input(i int) (jsontext.Value, string) {
	if i >= len(s.blocks) || !s.blocks[i].tool {
		return nil, fmt.Sprintf("tool_use block %d has no content_block_start event of type tool_use", i+1)
	}
	b := s.blocks[i]
	if !b.stopped {
		return nil, fmt.Sprintf("tool_use block %d has no content_block_stop event", i+1)
	}
	if len(bytes.TrimSpace(b.deltas.Bytes())) == 0 {
		if emptyObject(b.start) {
			// The API starts every tool_use block with input {}: without
			// deltas, the model sent no input.
			return nil, ""
		}
		if b.start.Kind() != '{' {
			return nil, fmt.Sprintf("the input of tool_use block %d in its content_block_start is not a JSON object", i+1)
		}
		return b.start, ""
	}
	in := jsontext.Value(bytes.Clone(b.deltas.Bytes()))
	if !emptyObject(b.start) {
		return in, fmt.Sprintf("the input of tool_use block %d comes both in its content_block_start (%d bytes) and as input_json_delta events: it is not one JSON value", i+1, len(b.start))
	}
	if !in.IsValid() {
		return in, fmt.Sprintf("the input of tool_use block %d, as its input_json_delta events spell it, is not JSON (exactly one complete JSON value)", i+1)
	}
	if in.Kind() != '{' {
		return in, fmt.Sprintf("the input of tool_use block %d, as its input_json_delta events spell it, is not a JSON object", i+1)
	}
	return in, ""
}

// emptyObject reports whether v is absent or the empty object.
func emptyObject(v jsontext.Value) bool {
	if v == nil {
		return true
	}
	c := jsontext.Value(bytes.Clone(v))
	return c.Compact() == nil && string(c) == "{}"
}

// assemble puts the input of each tool_use block of msg, the stream's
// message, in place of the SDK's; it returns the refusal of a reply
// whose inputs or events do not have the one shape allowed ("" when
// none: the first that does not).
func (s *inputs) assemble(msg *sdk.Message) string {
	why := s.refused
	for i := range msg.Content {
		if msg.Content[i].Type != "tool_use" {
			continue
		}
		in, w := s.input(i)
		msg.Content[i].Input = []byte(in)
		if why == "" {
			why = w
		}
	}
	return why
}
