package openai_test

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

// The driver asks for one choice: a response with more is refused whole,
// and counts as cut off (or filtered) when another choice says so; the
// tool never runs.
func TestContradictoryStops(t *testing.T) {
	calls := toolCallsMessage([3]string{"a", "customer__get", `{"id":"cus_1"}`})
	for _, tc := range []struct {
		name, second string
		code         driver.ReplyCode
		want         string
	}{
		{"second choice cut off", "length", driver.ReplyTruncated, `the response has 2 choices, and choice 2 was cut off (finish_reason "length")`},
		{"second choice filtered", "content_filter", driver.ReplyFiltered, `choice 2 was filtered`},
		{"second choice tool_calls", "tool_calls", driver.ReplyMalformed, `the response has 2 choices; the driver asks for one`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := completion("tool_calls", calls)
			body = strings.Replace(body, `}],"usage"`, fmt.Sprintf(`},{"index":1,"finish_reason":%q,"logprobs":null,"message":%s}],"usage"`, tc.second, calls), 1)
			api := newAPI(t)
			api.Turns = append(api.Turns, func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) { return 200, body })
			srv := api.Start()
			tool := &drivertest.Caller{Allowed: []string{"customer.get"}}
			_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), tool)
			var re *driver.ReplyError
			if !errors.As(err, &re) || re.Code != tc.code || !strings.Contains(err.Error(), tc.want) || len(re.Calls) != 1 {
				t.Fatalf("err = %v, want a %s ReplyError naming %q, with the call", err, tc.code, tc.want)
			}
			if n := len(tool.Calls()); n != 0 {
				t.Errorf("%d calls reached the Caller", n)
			}
		})
	}
}
