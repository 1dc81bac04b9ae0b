package openairesponses_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/drivertest"
)

// A response that says "completed" and also that it was cut off (an
// incomplete_details reason, a message item that is incomplete, its
// output tokens at the max_output_tokens it names), filtered, or failed
// (an error) runs nothing: contradictory stop signals count as cut off.
func TestContradictoryStops(t *testing.T) {
	call := fnCall("a", "customer__get", `{"id":"cus_1"}`)
	cutText := strings.Replace(text("Ada's acc"), `"status":"completed"`, `"status":"incomplete"`, 1)
	for _, tc := range []struct {
		name, extra string
		items       []string
		code        driver.ReplyCode
		want        string
	}{
		{"incomplete_details max_output_tokens", `"incomplete_details":{"reason":"max_output_tokens"},`, []string{call},
			driver.ReplyTruncated, `says status "completed", and it was cut off (incomplete_details.reason "max_output_tokens")`},
		{"incomplete_details another reason", `"incomplete_details":{"reason":"something_new"},`, []string{call},
			driver.ReplyTruncated, `incomplete_details.reason "something_new"`},
		{"incomplete_details content_filter", `"incomplete_details":{"reason":"content_filter"},`, []string{call},
			driver.ReplyFiltered, `it was filtered (incomplete_details.reason "content_filter")`},
		{"incomplete message item", ``, []string{cutText, call},
			driver.ReplyTruncated, `a message item has status "incomplete"`},
		{"output tokens at max_output_tokens", `"max_output_tokens":5,`, []string{call},
			driver.ReplyTruncated, "usage.output_tokens 5 of max_output_tokens 5"},
		{"an error", `"error":{"code":"server_error","message":"boom"},`, []string{call},
			driver.ReplyMalformed, `it holds an error (code "server_error")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
				return 200, response("completed", tc.extra, tc.items...)
			})
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
	// Null details, a null error and a limit not reached are no signal.
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
			return 200, response("completed", `"incomplete_details":null,"error":null,"max_output_tokens":100,`, call)
		},
		func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
			return 200, completed(text("done"))
		})
	srv := api.Start()
	tool := &drivertest.Caller{Allowed: []string{"customer.get"}}
	if _, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), tool); err != nil || len(tool.Ran()) != 1 {
		t.Fatalf("err = %v, ran %d", err, len(tool.Ran()))
	}
}
