package serve

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/mcphost"
)

// Why the gateway reads every message itself before go-sdk does: go-sdk
// reads an agent's message leniently. It decodes a numeric id as a
// float64 and answers under int64 of it (2.5 is answered as 2, 1e30 as
// -2^63), so the answer to a call goes out under another id than the
// call's; it reads a message with an id and no method as a response to
// a request the gateway never sent, and answers nothing. A message the
// gateway refuses here never reaches go-sdk, so nothing runs under it.
// JSON-RPC 2.0 specification, sections 4 and 5.

// maxExactID bounds a numeric id: every integer within ±2^53 is one a
// float64 (go-sdk's reading of an id) holds exactly, so it is answered
// under the id it was sent with.
const maxExactID = 1 << 53

// checkAgentMessage says why the gateway refuses msg, one JSON-RPC
// message of an agent, with the JSON-RPC error code to answer: -32601
// for a method the gateway does not serve, -32600 (Invalid Request) for
// everything else; "" when it is served. Refused:
//
//   - what [mcphost.CheckMessage] refuses (a batch, duplicate or
//     case-variant member names, invalid UTF-8, a lone surrogate escape,
//     more than one value, nesting deeper than [mcphost.MaxDepth]);
//   - a "jsonrpc" member other than "2.0";
//   - an id other than a string or an integer within ±2^53 written
//     without fraction, exponent or minus zero (2.5, 1e3, 2.0, 2^60 and
//     -0 are refused, not answered under another id), and an id of null
//     beside a method (go-sdk would read the request as a notification);
//   - no "method" member, or one that is not a string: the gateway sends
//     agents no requests, so an agent has nothing to respond to;
//   - a notification method (notifications/...) with an id, and a
//     request method without one.
func checkAgentMessage(msg []byte) (code int, why string) {
	if m := mcphost.CheckMessage(msg); m != "" {
		return -32600, "the client sent" + strings.TrimPrefix(m, "it sent")
	}
	var head struct {
		JSONRPC jsontext.Value `json:"jsonrpc"`
		ID      jsontext.Value `json:"id"`
		Method  jsontext.Value `json:"method"`
	}
	if err := json.Unmarshal(msg, &head); err != nil {
		return -32600, "the message is not a JSON-RPC request or notification (a JSON object)"
	}
	if string(head.JSONRPC) != `"2.0"` {
		return -32600, fmt.Sprintf(`the message's "jsonrpc" member is %s; it must be "2.0"`, shownValue(head.JSONRPC))
	}
	if why := checkID(head.ID); why != "" {
		return -32600, why
	}
	if head.Method == nil || head.Method.Kind() == 'n' {
		what := "a response"
		if head.ID == nil {
			what = "neither a request nor a notification"
		}
		return -32600, fmt.Sprintf(`the message has no "method", so it is %s; the gateway sends agents no requests, so it takes no responses: send a request (with "method" and "id") or a notification (with "method" only)`, what)
	}
	var method string
	if head.Method.Kind() != '"' || json.Unmarshal(head.Method, &method) != nil {
		return -32600, fmt.Sprintf(`the message's "method" is %s, not a string`, shownValue(head.Method))
	}
	if !slices.Contains(agentMethods, method) {
		return -32601, fmt.Sprintf("method %s is not served here", clipQuote(method, maxShownName))
	}
	notification := strings.HasPrefix(method, "notifications/")
	switch {
	case notification && head.ID != nil:
		return -32600, fmt.Sprintf(`method %q is a notification: send it without an "id"`, method)
	case !notification && head.ID == nil:
		return -32600, fmt.Sprintf(`method %q is a request: send it with an "id" (a string or an integer)`, method)
	case !notification && head.ID.Kind() == 'n':
		return -32600, fmt.Sprintf(`method %q is a request and its "id" is null; send a string or an integer`, method)
	}
	return 0, ""
}

// checkID says why id, a message's "id" member as sent (nil when absent),
// is refused, or "". null is checked by the caller, which knows whether
// the message has a method.
func checkID(id jsontext.Value) string {
	switch id.Kind() {
	case 0, 'n', '"':
		return ""
	case '0':
		if exactID(id) {
			return ""
		}
		return fmt.Sprintf(`the message's "id" %s is not a string or an integer within ±2^53 written without fraction or exponent; it would be answered under another id`, shownValue(id))
	}
	return fmt.Sprintf(`the message's "id" is %s; an id is a string or an integer`, shownValue(id))
}

// exactID reports whether the JSON number v is an integer literal (no
// fraction, no exponent, not -0) within ±2^53.
func exactID(v jsontext.Value) bool {
	if bytes.ContainsAny(v, ".eE") || string(v) == "-0" {
		return false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return err == nil && n >= -maxExactID && n <= maxExactID
}

// idOf returns the id of msg to answer a refusal under: the "id" member
// as sent when it is a string or a number (a number is echoed as it was
// written, whatever go-sdk would have made of it), else nil (null).
func idOf(msg []byte) jsontext.Value {
	var head struct {
		ID jsontext.Value `json:"id"`
	}
	if err := json.Unmarshal(msg, &head); err != nil {
		return nil
	}
	if k := head.ID.Kind(); k == '"' || k == '0' {
		if len(head.ID) > maxShownValue {
			return nil // not echoed: a refusal stays small
		}
		return head.ID
	}
	return nil
}

// maxShownValue bounds a member's value a refusal shows or echoes.
const maxShownValue = 64

// shownValue is v as a refusal shows it: its text when it is at most
// [maxShownValue] bytes, else its kind and size; "absent" when missing.
// A value is shown whole or not at all (a secret in it is redacted
// whole).
func shownValue(v jsontext.Value) string {
	switch {
	case v == nil:
		return "absent"
	case len(v) <= maxShownValue:
		return string(v)
	}
	kind := map[jsontext.Kind]string{'"': "a string", '{': "an object", '[': "an array", '0': "a number"}[v.Kind()]
	if kind == "" {
		kind = "a value"
	}
	return fmt.Sprintf("%s of %d bytes", kind, len(v))
}
