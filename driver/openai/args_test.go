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

// rawCall is a tool call whose "arguments" member is args as raw JSON
// ("" leaves the member out).
func rawCall(id, args string) string {
	member := ""
	if args != "" {
		member = `,"arguments":` + args
	}
	return fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":"customer__get"%s}}`, id, member)
}

// A tool call's arguments are taken only as exactly one complete JSON
// value, sent as the JSON string the API sends: any other shape never
// runs the tool. "arguments" missing, null or not a string (which the
// SDK reads as "" or as the raw value), blank for a tool whose schema
// needs arguments, and two calls with one id refuse the reply whole;
// arguments that are not one JSON value (cut, trailing data) reach the
// Caller as sent, which refuses them as the runtime does.
func TestArgumentShapes(t *testing.T) {
	for _, tc := range []struct {
		name, calls string
		want        string // in the error of a refused reply; "" when the Caller refuses
	}{
		{"arguments missing", rawCall("a", ""), "the arguments of tool call 1 are not a JSON string (the API sends them as one): the member is missing"},
		{"arguments null", rawCall("a", "null"), "it is null"},
		{"arguments an object", rawCall("a", `{"id":"cus_1"}`), "it is an object"},
		{"arguments a number", rawCall("a", `5`), "it is 5"},
		{"blank where the schema needs arguments", rawCall("a", `""`), `tool call 1 ("customer.get") has no arguments, and the tool's inputSchema needs some`},
		{"white space where the schema needs arguments", rawCall("a", `" \n"`), "has no arguments"},
		{"second call blank", rawCall("a", `"{\"id\":\"cus_1\"}"`) + "," + rawCall("b", `""`), `tool call 2 ("customer.get") has no arguments`},
		{"duplicate ids", rawCall("a", `"{\"id\":\"cus_1\"}"`) + "," + rawCall("a", `"{\"id\":\"cus_2\"}"`), `the id "a" is given to two tool calls`},
		{"trailing object", rawCall("a", `"{\"id\":\"cus_1\"}{\"id\":\"cus_2\"}"`), ""},
		{"trailing after space", rawCall("a", `"{\"id\":\"cus_1\"} true"`), ""},
		{"cut", rawCall("a", `"{\"id\":"`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
				return 200, completion("tool_calls", `{"role":"assistant","content":null,"tool_calls":[`+tc.calls+`]}`)
			})
			if tc.want == "" {
				api.Turns = append(api.Turns, func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
					return 200, completion("stop", textMessage("done"))
				})
			}
			srv := api.Start()
			tool := &drivertest.Caller{Allowed: []string{"customer.get"}}
			_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), tool)
			var re *driver.ReplyError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("err = %v, want the Caller's refusal", err)
			case tc.want != "" && (!errors.As(err, &re) || re.Code != driver.ReplyMalformed || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want a reply-malformed ReplyError naming %q", err, tc.want)
			}
			if ran := tool.Ran(); len(ran) != 0 {
				t.Errorf("the tool ran %d times: %+v", len(ran), ran)
			}
		})
	}
}
