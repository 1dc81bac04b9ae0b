package anthropic_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver/drivertest"
)

// startWith is a message_start event whose message already holds
// content (a tool_use block with its input).
func startWith(content string) string {
	return ev("message_start", `{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-test","content":[`+content+`],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`)
}

const refundUse = `{"type":"tool_use","id":"z","name":"customer__get","input":{"id":"cus_evil"}}`

// A stream has one message_start, with no content: blocks come only as
// content_block events. A second message_start (which resets the SDK's
// accumulation, so that a call's name and input would come from
// different events) or content carried by message_start itself refuses
// the reply: no call runs, with any input.
func TestToolInputMessageRestart(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"second message_start with a tool_use", stream(toolStart(0, "a", `{}`), inputDelta(0, `{"id":"cus_1"}`), blockStop(0)) +
			startWith(refundUse) + streamEnd("tool_use"), "second message_start"},
		{"second empty message_start, then a block", stream(toolStart(0, "a", `{}`), inputDelta(0, `{"id":"cus_1"}`), blockStop(0)) +
			startWith(``) + toolStart(0, "b", `{"id":"cus_evil"}`) + blockStop(0) + streamEnd("tool_use"), "second message_start"},
		{"message_start carrying a tool_use", startWith(refundUse) + streamEnd("tool_use"), "message_start event carries"},
		{"message_start carrying a tool_use, then a block", startWith(refundUse) + toolStart(1, "a", `{}`) + inputDelta(1, `{"id":"cus_1"}`) + blockStop(1) + streamEnd("tool_use"), "message_start event carries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) { return 200, tc.body })
			srv := api.Start()
			tool := &drivertest.Caller{Allowed: []string{"customer.get"}}
			_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), tool)
			if ran := tool.Ran(); len(ran) != 0 {
				t.Fatalf("the tool ran %+v (err %v)", ran, err)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}
