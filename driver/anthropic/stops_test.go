package anthropic_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/anthropic"
	"github.com/openplaybook/openplaybook/driver/drivertest"
)

func messageDelta(stop string, outputTokens int) string {
	return ev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stop, outputTokens))
}

// Stop signals that contradict each other count as cut off when one of
// them says so, and the reply is refused whole otherwise: a stream that
// gives stop_reason max_tokens and also tool_use (in message_start and
// message_delta, or in two message_deltas), one whose output tokens
// reached max_tokens under tool_use, two different stop reasons, a
// refusal and tool_use. The tool never runs.
func TestContradictoryStops(t *testing.T) {
	call := toolStart(0, "a", `{}`) + inputDelta(0, `{"id":"cus_1"}`) + blockStop(0)
	stop := ev("message_stop", `{"type":"message_stop"}`)
	startWith := func(reason string) string {
		return ev("message_start", strings.Replace(streamStart, `"stop_reason":null`, fmt.Sprintf(`"stop_reason":%q`, reason), 1))
	}
	for _, tc := range []struct {
		name, body string
		code       driver.ReplyCode
		want       string
	}{
		{"max_tokens in message_start", startWith("max_tokens") + call + messageDelta("tool_use", 5) + stop,
			driver.ReplyTruncated, `stop_reason "max_tokens" and also "tool_use": contradictory stop signals count as cut off`},
		{"max_tokens then tool_use", stream(call, messageDelta("max_tokens", 5), messageDelta("tool_use", 5), stop),
			driver.ReplyTruncated, "contradictory stop signals count as cut off"},
		{"context window then tool_use", stream(call, messageDelta("model_context_window_exceeded", 5), messageDelta("tool_use", 5), stop),
			driver.ReplyTruncated, "count as cut off"},
		{"tool_use then max_tokens", stream(call, messageDelta("tool_use", 5), messageDelta("max_tokens", 5), stop),
			driver.ReplyTruncated, "count as cut off"},
		{"output tokens at max_tokens", stream(call, messageDelta("tool_use", 64), stop),
			driver.ReplyTruncated, "its 64 output tokens reached max_tokens (64)"},
		{"output tokens over max_tokens", stream(call, messageDelta("tool_use", 65), stop),
			driver.ReplyTruncated, "reached max_tokens"},
		{"refusal then tool_use", stream(call, messageDelta("refusal", 5), messageDelta("tool_use", 5), stop),
			driver.ReplyRefused, `stop_reason "refusal" and also "tool_use"`},
		{"end_turn then tool_use", stream(call, messageDelta("end_turn", 5), messageDelta("tool_use", 5), stop),
			driver.ReplyMalformed, `stop_reason "end_turn" and also "tool_use"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) { return 200, tc.body })
			srv := api.Start()
			tool := &drivertest.Caller{Allowed: []string{"customer.get"}}
			_, err := newDriver(t, srv, func(c *anthropic.Config) { c.MaxTokens = 64 }).RunStep(context.Background(), stepInput(), tool)
			var re *driver.ReplyError
			if !errors.As(err, &re) || re.Code != tc.code || !strings.Contains(err.Error(), tc.want) || len(re.Calls) != 1 || string(re.Calls[0].Arguments) != `{"id":"cus_1"}` {
				t.Fatalf("err = %v, want a %s ReplyError naming %q, with the call", err, tc.code, tc.want)
			}
			if n := len(tool.Calls()); n != 0 {
				t.Errorf("%d calls reached the Caller", n)
			}
		})
	}
}
