package anthropic_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/drivertest"
)

// ev is one server-sent event of a Messages stream.
func ev(typ, data string) string { return fmt.Sprintf("event: %s\ndata: %s\n\n", typ, data) }

const streamStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`

// toolStart starts tool_use block index with input (the API sends {}).
func toolStart(index int, id, input string) string {
	return ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":"customer__get","input":%s}}`, index, id, input))
}

func textStart(index int) string {
	return ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, index))
}

func inputDelta(index int, piece string) string {
	b, _ := jsontext.AppendQuote(nil, piece)
	return ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, index, b))
}

func blockStop(index int) string {
	return ev("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index))
}

// streamEnd ends a stream with stop_reason stop.
func streamEnd(stop string) string {
	return ev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":5}}`, stop)) +
		ev("message_stop", `{"type":"message_stop"}`)
}

func stream(events ...string) string {
	return ev("message_start", streamStart) + strings.Join(events, "")
}

// A tool_use block's input is taken only as exactly one complete JSON
// value, in one of the two shapes the API streams: its deltas joined
// after a start input of {}, or its start input alone. Any other shape
// refuses the reply whole, so the tool never runs: a start input and
// deltas both (the SDK would make that {}), deltas that are not one JSON
// object (cut, trailing data, another kind), deltas for a text block, a
// block that never started or one already stopped, a block that never
// stopped, two blocks with one id, events after message_stop, and no
// input for a tool whose schema needs some.
func TestToolInputShapes(t *testing.T) {
	one := func(events ...string) string {
		return stream(append(events, streamEnd("tool_use"))...)
	}
	for _, tc := range []struct {
		name, body string
		want       string // in the error
	}{
		{"start input and deltas", one(toolStart(0, "a", `{"id":"cus_1"}`), inputDelta(0, `{"id":"cus_2"}`), blockStop(0)),
			"comes both in its content_block_start"},
		{"start input continued by deltas", one(toolStart(0, "a", `{"id":"cus_1"}`), inputDelta(0, `,"all":true}`), blockStop(0)),
			"comes both in its content_block_start"},
		{"deltas cut", one(toolStart(0, "a", `{}`), inputDelta(0, `{"id":`), inputDelta(0, `"cus_1"`), blockStop(0)),
			"is not JSON"},
		{"trailing object", one(toolStart(0, "a", `{}`), inputDelta(0, `{"id":"cus_1"}`), inputDelta(0, `{"id":"cus_2"}`), blockStop(0)),
			"is not JSON"},
		{"trailing after space", one(toolStart(0, "a", `{}`), inputDelta(0, `{"id":"cus_1"} `), inputDelta(0, `true`), blockStop(0)),
			"is not JSON"},
		{"trailing garbage", one(toolStart(0, "a", `{}`), inputDelta(0, `{"id":"cus_1"}}`), blockStop(0)),
			"is not JSON"},
		{"deltas an array", one(toolStart(0, "a", `{}`), inputDelta(0, `[{"id":"cus_1"}]`), blockStop(0)),
			"is not a JSON object"},
		{"deltas a string", one(toolStart(0, "a", `{}`), inputDelta(0, `"cus_1"`), blockStop(0)),
			"is not a JSON object"},
		{"start input a string", one(toolStart(0, "a", `"cus_1"`), blockStop(0)),
			"in its content_block_start is not a JSON object"},
		{"deltas for a text block", one(textStart(0), inputDelta(0, `{"id":"cus_1"}`), blockStop(0), toolStart(1, "a", `{}`), inputDelta(1, `{"id":"cus_2"}`), blockStop(1)),
			"names content block 1, which is not a tool_use block"},
		{"deltas after the block stopped", one(toolStart(0, "a", `{}`), inputDelta(0, `{"id":"cus_1"}`), blockStop(0), inputDelta(0, `{"all":true}`)),
			"comes after its content_block_stop"},
		{"deltas for a block that never started", one(toolStart(0, "a", `{}`), inputDelta(0, `{"id":"cus_1"}`), blockStop(0), inputDelta(1, `{"id":"cus_2"}`)),
			"content block at index 1"},
		{"a block started twice", one(toolStart(0, "a", `{}`), inputDelta(0, `{"id":"cus_1"}`), toolStart(0, "b", `{}`), inputDelta(0, `{"id":"cus_2"}`), blockStop(0)),
			"content_block_start for content block at index 0, expected index 1"},
		{"block never stopped", one(toolStart(0, "a", `{}`), inputDelta(0, `{"id":"cus_1"}`)),
			"has no content_block_stop event"},
		{"duplicate ids", one(toolStart(0, "a", `{}`), inputDelta(0, `{"id":"cus_1"}`), blockStop(0), toolStart(1, "a", `{}`), inputDelta(1, `{"id":"cus_2"}`), blockStop(1)),
			`the id "a" is given to two tool calls`},
		{"a tool_use block after message_stop", stream(textStart(0), blockStop(0), streamEnd("tool_use"), toolStart(1, "a", `{}`), inputDelta(1, `{"id":"cus_1"}`), blockStop(1)),
			"the response stream goes on after its message_stop event"},
		{"no input where the schema needs one", one(toolStart(0, "a", `{}`), blockStop(0)),
			`tool call 1 ("customer.get") has no arguments, and the tool's inputSchema needs some`},
		{"only empty deltas where the schema needs input", one(toolStart(0, "a", `{}`), inputDelta(0, ``), inputDelta(0, ` `), blockStop(0)),
			`has no arguments`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) { return 200, tc.body })
			srv := api.Start()
			tool := &drivertest.Caller{Allowed: []string{"customer.get"}}
			_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), tool)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
			var re *driver.ReplyError
			if errors.As(err, &re) && re.Code != driver.ReplyMalformed {
				t.Errorf("code %s, want %s", re.Code, driver.ReplyMalformed)
			}
			if ran := tool.Ran(); len(ran) != 0 {
				t.Errorf("the tool ran %d times: %+v", len(ran), ran)
			}
			if n := len(tool.Calls()); n != 0 {
				t.Errorf("%d calls reached the Caller", n)
			}
		})
	}
}

// The two shapes the API streams both run, with the input as spelled:
// deltas after {} (empty pieces and white space around one value
// included), and a start input without deltas.
func TestToolInputAccepted(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"deltas", stream(toolStart(0, "a", `{}`), inputDelta(0, ``), inputDelta(0, ` {"id":`), inputDelta(0, `"cus_1"} `), blockStop(0), streamEnd("tool_use")), ` {"id":"cus_1"} `},
		{"start input", stream(toolStart(0, "a", `{"id":"cus_1"}`), blockStop(0), streamEnd("tool_use")), `{"id":"cus_1"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns,
				func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) { return 200, tc.body },
				func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
					return 200, response("end_turn", text("done"))
				})
			srv := api.Start()
			tool := &drivertest.Caller{Allowed: []string{"customer.get"}}
			if _, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), tool); err != nil {
				t.Fatal(err)
			}
			if ran := tool.Ran(); len(ran) != 1 || string(ran[0].Arguments) != tc.want {
				t.Errorf("ran %+v, want one call with %s", ran, tc.want)
			}
		})
	}
}
