package openairesponses_test

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

// rawCall is a function_call item whose "arguments" member is args as
// raw JSON ("" leaves the member out).
func rawCall(id, args string) string {
	member := ""
	if args != "" {
		member = `,"arguments":` + args
	}
	return fmt.Sprintf(`{"type":"function_call","id":"fc_%s","call_id":%q,"name":"customer__get"%s,"status":"completed"}`, id, id, member)
}

// A function call's arguments are taken only as exactly one complete
// JSON value, sent as the JSON string the API sends: any other shape
// never runs the tool. "arguments" missing, null or not a string (which
// the SDK reads as "" or as the raw value), blank for a tool whose
// schema needs arguments, and two calls with one call_id refuse the
// response whole; arguments that are not one JSON value (cut, trailing
// data) reach the Caller as sent, which refuses them as the runtime
// does.
func TestArgumentShapes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls []string
		want  string // in the error of a refused reply; "" when the Caller refuses
	}{
		{"arguments missing", []string{rawCall("a", "")}, "the arguments of function call 1 are not a JSON string (the API sends them as one): the member is missing"},
		{"arguments null", []string{rawCall("a", "null")}, "it is null"},
		{"arguments an object", []string{rawCall("a", `{"id":"cus_1"}`)}, "it is an object"},
		{"arguments an array", []string{rawCall("a", `[]`)}, "it is an array"},
		{"blank where the schema needs arguments", []string{rawCall("a", `""`)}, `tool call 1 ("customer.get") has no arguments, and the tool's inputSchema needs some`},
		{"second call blank", []string{rawCall("a", `"{\"id\":\"cus_1\"}"`), rawCall("b", `"  "`)}, `tool call 2 ("customer.get") has no arguments`},
		{"duplicate call_ids", []string{rawCall("a", `"{\"id\":\"cus_1\"}"`), rawCall("a", `"{\"id\":\"cus_2\"}"`)}, `the call_id "a" is given to two`},
		{"trailing object", []string{rawCall("a", `"{\"id\":\"cus_1\"}{\"id\":\"cus_2\"}"`)}, ""},
		{"cut", []string{rawCall("a", `"{\"id\":"`)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
				return 200, completed(tc.calls...)
			})
			if tc.want == "" {
				api.Turns = append(api.Turns, func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
					return 200, completed(text("done"))
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
