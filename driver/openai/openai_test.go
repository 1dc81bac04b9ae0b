package openai_test

import (
	"context"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/drivertest"
	"github.com/openplaybook/openplaybook/driver/internal/llmtest"
	"github.com/openplaybook/openplaybook/driver/openai"
)

const apiKey = "sk-test-0123456789abcdefSECRET"

// The request body of POST /v1/chat/completions, as far as the driver
// sends it.
type chatRequest struct {
	Model       string     `json:"model"`
	Messages    []message  `json:"messages"`
	Tools       []toolSpec `json:"tools"`
	Temperature *float64   `json:"temperature"`
}

type message struct {
	Role       string     `json:"role"`
	Content    any        `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls"`
	ToolCallID string     `json:"tool_call_id"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type toolSpec struct {
	Type     string `json:"type"`
	Function struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  jsontext.Value `json:"parameters"`
		Strict      *bool          `json:"strict"`
	} `json:"function"`
}

// newAPI returns an OpenAI-compatible server on loopback that answers each
// request with the next scripted turn.
func newAPI(t *testing.T) *llmtest.API[chatRequest] {
	return &llmtest.API[chatRequest]{T: t, Path: "/v1/chat/completions"}
}

// auth returns the Authorization header of each request api received.
func auth(api *llmtest.API[chatRequest]) []string {
	var a []string
	for _, h := range api.Headers() {
		a = append(a, h.Get("Authorization"))
	}
	return a
}

func completion(finish string, msg string) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-test",`+
		`"choices":[{"index":0,"finish_reason":%q,"logprobs":null,"message":%s}],`+
		`"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, finish, msg)
}

func toolCallsMessage(calls ...[3]string) string {
	var parts []string
	for _, c := range calls {
		args, _ := json.Marshal(c[2])
		parts = append(parts, fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}`, c[0], c[1], args))
	}
	return `{"role":"assistant","content":null,"tool_calls":[` + strings.Join(parts, ",") + `]}`
}

func textMessage(text string) string {
	b, _ := json.Marshal(text)
	return `{"role":"assistant","content":` + string(b) + `,"refusal":null}`
}

func compact(s string) jsontext.Value {
	v := jsontext.Value(s)
	if err := v.Compact(); err != nil {
		panic(err)
	}
	return v
}

var customerSchema = `{"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}`

func stepInput() driver.StepInput {
	return driver.StepInput{
		RunID:   "run-1",
		StepID:  "triage",
		Agent:   "rita",
		Purpose: "Look the customer up and summarise the account.",
		Input:   jsontext.Value(`{"customerId":"cus_1"}`),
		Prior:   []driver.Prior{{StepID: "intake", Output: jsontext.Value(`"ticket #42"`)}},
		Tools: []driver.Tool{
			{Name: "customer.get", Description: "Get a customer by id.", InputSchema: jsontext.Value(customerSchema)},
			{Name: "mcp.memory.search_nodes", Description: "Search the memory graph.", InputSchema: jsontext.Value(`{"type":"object","properties":{"query":{"type":"string"}}}`)},
		},
		MaxCalls: 10,
	}
}

func newDriver(t *testing.T, srv *httptest.Server, mod func(*openai.Config)) *openai.Driver {
	t.Helper()
	cfg := openai.Config{Model: "gpt-test", BaseURL: srv.URL + "/v1", APIKey: apiKey, HTTPClient: srv.Client(), MaxRetries: -1}
	if mod != nil {
		mod(&cfg)
	}
	d, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The model calls an allowed tool, a tool the step does not allow and a
// look-alike of the allowed one; the Caller refuses the two, the
// refusals reach the model as the tool results, and the model ends with
// text.
func TestConversation(t *testing.T) {
	temp := 0.2
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(t *testing.T, req chatRequest, raw map[string]jsontext.Value) (int, string) {
			for k := range raw {
				if !slices.Contains([]string{"model", "messages", "tools", "temperature"}, k) {
					t.Errorf("request member %q", k)
				}
			}
			if req.Model != "gpt-test" || req.Temperature == nil || *req.Temperature != 0.2 {
				t.Errorf("model %q, temperature %v", req.Model, req.Temperature)
			}
			if len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.Messages[1].Role != "user" || req.Messages[1].Content != "Carry out this step." {
				t.Fatalf("messages %+v", req.Messages)
			}
			sys, _ := req.Messages[0].Content.(string)
			for _, want := range []string{`"rita"`, "Look the customer up and summarise the account.", `{"customerId":"cus_1"}`, `step intake: "ticket #42"`, "only the 2 tool(s) offered", "refused", "at most 10 tool call(s)"} {
				if !strings.Contains(sys, want) {
					t.Errorf("system prompt lacks %q:\n%s", want, sys)
				}
			}
			if len(req.Tools) != 2 {
				t.Fatalf("tools %+v", req.Tools)
			}
			for i, want := range []string{"customer__get", "mcp__memory__search_nodes"} {
				f := req.Tools[i].Function
				if req.Tools[i].Type != "function" || f.Name != want || f.Strict == nil || *f.Strict {
					t.Errorf("tool %d: %+v", i, req.Tools[i])
				}
			}
			if f := req.Tools[0].Function; f.Description != "Get a customer by id." || !slices.Equal(f.Parameters, compact(customerSchema)) {
				t.Errorf("tool 0: description %q, parameters %s (want the schema)", f.Description, f.Parameters)
			}
			return 200, completion("tool_calls", toolCallsMessage(
				[3]string{"call_1", "customer__get", `{"id": "cus_1" }`},
				[3]string{"call_2", "charge__refund", `{"charge":"ch_1"}`},
				[3]string{"call_3", "customer__GET", `{"id":"cus_1"}`},
			))
		},
		func(t *testing.T, req chatRequest, raw map[string]jsontext.Value) (int, string) {
			if len(req.Messages) != 6 {
				t.Fatalf("%d messages, want system, user, assistant and 3 tool messages", len(req.Messages))
			}
			asst := req.Messages[2]
			if asst.Role != "assistant" || len(asst.ToolCalls) != 3 || asst.ToolCalls[1].Function.Name != "charge__refund" || asst.ToolCalls[0].Function.Arguments != `{"id":"cus_1"}` {
				t.Errorf("assistant message %+v", asst)
			}
			want := []struct{ id, content string }{
				{"call_1", `{"customer":{"id":"cus_1","name":"Ada"}}`},
				{"call_2", `{"error":"tool \"charge.refund\" is not allowed in this step"}`},
				{"call_3", `{"error":"tool \"customer.GET\" is not allowed in this step"}`},
			}
			for i, w := range want {
				m := req.Messages[3+i]
				if m.Role != "tool" || m.ToolCallID != w.id || m.Content != w.content {
					t.Errorf("tool message %d: %+v, want %s %s", i, m, w.id, w.content)
				}
			}
			return 200, completion("stop", textMessage("Ada's account is in good standing."))
		},
	)
	srv := api.Start()
	d := newDriver(t, srv, func(c *openai.Config) { c.Temperature = &temp })
	caller := &drivertest.Caller{
		Allowed: []string{"customer.get", "mcp.memory.search_nodes"},
		Results: map[string]driver.Result{"customer.get": {Content: jsontext.Value(`{"customer":{"id":"cus_1","name":"Ada"}}`)}},
	}
	out, err := d.RunStep(context.Background(), stepInput(), caller)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `"Ada's account is in good standing."` {
		t.Errorf("output %s", out)
	}
	calls := caller.Calls()
	want := []driver.Call{
		{ID: "call_1", Name: "customer.get", Arguments: jsontext.Value(`{"id": "cus_1" }`)},
		{ID: "call_2", Name: "charge.refund", Arguments: jsontext.Value(`{"charge":"ch_1"}`)},
		{ID: "call_3", Name: "customer.GET", Arguments: jsontext.Value(`{"id":"cus_1"}`)},
	}
	if len(calls) != len(want) {
		t.Fatalf("calls %+v", calls)
	}
	for i := range want {
		if calls[i].ID != want[i].ID || calls[i].Name != want[i].Name || string(calls[i].Arguments) != string(want[i].Arguments) {
			t.Errorf("call %d: %+v, want %+v", i, calls[i], want[i])
		}
	}
	for _, a := range auth(api) {
		if a != "Bearer "+apiKey {
			t.Errorf("Authorization %q", a)
		}
	}
}

// Names and arguments a model invents reach the Caller as sent (mapped
// back with SpecName only); invalid JSON arguments are the Caller's to
// refuse.
func TestHostileCalls(t *testing.T) {
	sent := [][3]string{
		{"c1", "customer__get ", `{"id":"x"}`},
		{"c2", "customer\u2024get", `{}`},
		{"c3", "customer__get", `{"id":`},
		{"c4", "customer.get", `{"id":"x"}`},
		{"c5", "", ``},
	}
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
			return 200, completion("tool_calls", toolCallsMessage(sent...))
		},
		func(t *testing.T, req chatRequest, _ map[string]jsontext.Value) (int, string) {
			if len(req.Messages) != 3+len(sent) {
				t.Errorf("%d messages", len(req.Messages))
			}
			return 200, completion("stop", textMessage(""))
		},
	)
	srv := api.Start()
	caller := &drivertest.Caller{Allowed: []string{"customer.get"}}
	out, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller)
	if err != nil || string(out) != `""` {
		t.Fatalf("RunStep = %s, %v", out, err)
	}
	wantNames := []string{"customer.get ", "customer\u2024get", "customer.get", "customer.get", ""}
	calls := caller.Calls()
	for i, c := range calls {
		if c.Name != wantNames[i] || string(c.Arguments) != sent[i][2] {
			t.Errorf("call %d: %q %q, want %q %q", i, c.Name, c.Arguments, wantNames[i], sent[i][2])
		}
	}
}

func TestCallerErrorStopsTheStep(t *testing.T) {
	for _, stop := range []error{driver.ErrSuspended, driver.ErrCallLimit} {
		api := newAPI(t)
		api.Turns = append(api.Turns, func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
			return 200, completion("tool_calls", toolCallsMessage(
				[3]string{"call_1", "customer__get", `{"id":"cus_1"}`},
				[3]string{"call_2", "customer__get", `{"id":"cus_2"}`},
			))
		})
		srv := api.Start()
		caller := &drivertest.Caller{Allowed: []string{"customer.get"}, Err: stop, ErrAt: 1}
		out, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller)
		if err != stop || !errors.Is(err, stop) || out != nil {
			t.Errorf("RunStep = %s, %v; want %v unchanged", out, err, stop)
		}
		if n := len(caller.Calls()); n != 1 {
			t.Errorf("%d calls, want 1 (none after the error)", n)
		}
		if n := len(api.Requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	}
}

func TestAPIErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   []string
	}{
		{"openai 401", 401, `{"error":{"message":"Incorrect API key provided: ` + apiKey + `. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			[]string{`openai: model "gpt-test" at http://127.0.0.1:`, "/v1/chat/completions: the API answered 401 Unauthorized (invalid_api_key): Incorrect API key provided: [redacted]."}},
		{"masked key", 401, `{"error":{"message":"Incorrect API key provided: sk-test-*****************CRET.","type":"invalid_request_error","code":"invalid_api_key"}}`,
			[]string{"401 Unauthorized", "Incorrect API key provided: [redacted]"}},
		{"ollama 404", 404, `{"error":{"message":"model \"llama9\" not found, try pulling it first","type":"api_error","param":null,"code":null}}`,
			[]string{`404 Not Found (api_error): model "llama9" not found, try pulling it first`}},
		{"string error", 400, `{"error":"bad request: tools unsupported"}`, []string{"400 Bad Request", "bad request: tools unsupported"}},
		{"not json", 502, `<html>bad gateway</html>`, []string{"502 Bad Gateway: <html>bad gateway</html>"}},
		{"vllm", 404, `{"object":"error","message":"The model ` + "`llama9`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`, []string{"404 Not Found: The model `llama9` does not exist."}},
		{"empty", 500, ``, []string{"/v1/chat/completions: the API answered 500 Internal Server Error"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) { return tc.status, tc.body })
			srv := api.Start()
			_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, apiKey) || strings.Contains(msg, "SECRET") {
				t.Errorf("the error holds the key: %s", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			var pe *driver.ProviderError
			if !errors.As(err, &pe) || pe.StatusCode != tc.status {
				t.Errorf("error %v is not a *driver.ProviderError with status %d", err, tc.status)
			}
		})
	}
}

func TestStops(t *testing.T) {
	n := 0
	call := func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
		n++
		return 200, completion("tool_calls", toolCallsMessage([3]string{fmt.Sprintf("c%d", n), "customer__get", `{"id":"x"}`}))
	}
	t.Run("turn limit", func(t *testing.T) {
		api := newAPI(t)
		api.Turns = append(api.Turns, call, call, call)
		srv := api.Start()
		_, err := newDriver(t, srv, func(c *openai.Config) { c.MaxTurns = 3 }).RunStep(context.Background(), stepInput(), &drivertest.Caller{Allowed: []string{"customer.get"}})
		if !errors.Is(err, driver.ErrTurnLimit) {
			t.Errorf("err = %v, want ErrTurnLimit", err)
		}
	})
	t.Run("cut off", func(t *testing.T) {
		api := newAPI(t)
		api.Turns = append(api.Turns, func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
			return 200, completion("length", textMessage("Ada's acc"))
		})
		srv := api.Start()
		_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		if err == nil || !strings.Contains(err.Error(), "cut off") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		api := newAPI(t)
		api.Turns = append(api.Turns, func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
			cancel()
			return 200, completion("tool_calls", toolCallsMessage([3]string{"c", "customer__get", `{"id":"x"}`}))
		})
		srv := api.Start()
		_, err := newDriver(t, srv, nil).RunStep(ctx, stepInput(), &drivertest.Caller{Allowed: []string{"customer.get"}})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		if err == nil || strings.Contains(err.Error(), apiKey) || !strings.Contains(err.Error(), srv.URL+"/v1") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("no tools", func(t *testing.T) {
		api := newAPI(t)
		api.Turns = append(api.Turns, func(t *testing.T, req chatRequest, raw map[string]jsontext.Value) (int, string) {
			if _, ok := raw["tools"]; ok {
				t.Errorf("tools sent for a step with none: %s", raw["tools"])
			}
			if sys, _ := req.Messages[0].Content.(string); !strings.Contains(sys, "No tool is offered") {
				t.Errorf("system prompt: %s", sys)
			}
			return 200, completion("stop", textMessage("ok"))
		})
		srv := api.Start()
		in := stepInput()
		in.Tools = nil
		out, err := newDriver(t, srv, func(c *openai.Config) { c.APIKey = "" }).RunStep(context.Background(), in, &drivertest.Caller{})
		if err != nil || string(out) != `"ok"` {
			t.Errorf("RunStep = %s, %v", out, err)
		}
		if auth(api)[0] != "" {
			t.Errorf("Authorization %q without a key", auth(api)[0])
		}
	})
	t.Run("wire name collision", func(t *testing.T) {
		api := newAPI(t)
		srv := api.Start()
		in := stepInput()
		in.Tools = append(in.Tools, driver.Tool{Name: "customer__get"})
		_, err := newDriver(t, srv, nil).RunStep(context.Background(), in, &drivertest.Caller{})
		var we *driver.WireNameError
		if !errors.As(err, &we) || len(api.Requests()) != 0 {
			t.Errorf("err = %v, %d requests", err, len(api.Requests()))
		}
	})
}

func TestNeverPrintsTheKey(t *testing.T) {
	cfg := openai.Config{Model: "m", APIKey: apiKey}
	d, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprint(d), fmt.Sprintf("%+v", d), fmt.Sprintf("%#v", d)} {
		if strings.Contains(s, apiKey) {
			t.Errorf("printed the key: %s", s)
		}
	}
}

func TestFromSettings(t *testing.T) {
	api := newAPI(t)
	api.Turns = append(api.Turns, func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
		return 200, completion("stop", textMessage("ok"))
	})
	srv := api.Start()
	secrets := map[string]string{"OPENAI_API_KEY": apiKey, "HOST": strings.TrimPrefix(srv.URL, "http://")}
	setup := &driver.Setup{
		Secret: func(name string) (string, error) {
			if v, ok := secrets[name]; ok {
				return v, nil
			}
			return "", fmt.Errorf("secret %q is not set", name)
		},
		Expand: func(s string) (string, error) {
			return strings.ReplaceAll(s, "${secret:HOST}", secrets["HOST"]), nil
		},
		HTTPClient: srv.Client(),
	}
	d, err := openai.FromSettings(map[string]any{
		"model": "gpt-test", "baseURL": "http://${secret:HOST}/v1", "apiKeySecret": "OPENAI_API_KEY",
		"temperature": stdjson.Number("0"), "maxTurns": stdjson.Number("4"), "maxRetries": stdjson.Number("0"),
	}, setup)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := d.RunStep(context.Background(), stepInput(), &drivertest.Caller{}); err != nil || string(out) != `"ok"` {
		t.Fatalf("RunStep = %s, %v", out, err)
	}
	if auth(api)[0] != "Bearer "+apiKey || api.Requests()[0].Temperature == nil || *api.Requests()[0].Temperature != 0 {
		t.Errorf("auth %q, temperature %v", auth(api)[0], api.Requests()[0].Temperature)
	}

	for _, tc := range []struct {
		settings map[string]any
		setup    *driver.Setup
		want     string
	}{
		{map[string]any{}, setup, `openai driver: setting "model" is required`},
		{map[string]any{"model": "m"}, setup, `setting "apiKeySecret" is required (the name of the secret that holds the OpenAI API key`},
		{map[string]any{"model": "m", "apiKey": apiKey}, setup, `unknown setting "apiKey"; an API key is never written in the harness: name the secret that holds it in "apiKeySecret"`},
		{map[string]any{"model": "m", "apiKeySecret": apiKey}, setup, `setting "apiKeySecret" must be a secret's name`},
		{map[string]any{"model": "m", "modle": "x", "baseURL": "http://h/v1"}, setup, `unknown setting "modle" (did you mean "model"?)`},
		{map[string]any{"model": "m", "baseURL": "http://h/v1", "temperature": stdjson.Number("3")}, setup, `setting "temperature" must be a number from 0 to 2`},
		{map[string]any{"model": "m", "baseURL": "http://h/v1", "maxTurns": stdjson.Number("0")}, setup, `setting "maxTurns" must be a whole number of at least 1`},
		{map[string]any{"model": "m", "baseURL": "http://h/v1", "maxTurns": "5"}, setup, `setting "maxTurns" must be a number, not a string`},
		{map[string]any{"model": 4}, setup, `setting "model" must be a string`},
		{map[string]any{"model": "m", "apiKeySecret": "MISSING"}, setup, `setting "apiKeySecret": secret "MISSING" is not set`},
		{map[string]any{"model": "m", "apiKeySecret": "OPENAI_API_KEY"}, nil, `names the secret "OPENAI_API_KEY", and no secrets were given`},
		{map[string]any{"model": "m", "baseURL": "ftp://h"}, setup, `openai: the base URL "ftp://h" is not an http(s) URL`},
		{map[string]any{"model": "m", "baseURL": "${secret:X}"}, nil, `setting "baseURL" holds a ${secret:NAME} reference, and no secrets were given`},
	} {
		_, err := openai.FromSettings(tc.settings, tc.setup)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromSettings(%v):\n got %v\nwant %s", tc.settings, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), apiKey) {
			t.Errorf("the error holds the key: %v", err)
		}
	}
	if err := openai.CheckSettings(map[string]any{"model": "m", "apiKeySecret": "OPENAI_API_KEY"}); err != nil {
		t.Errorf("CheckSettings: %v", err)
	}
}

// counting is a driver.Caller that counts the calls that reached it.
type counting struct {
	n   int
	ids []string
}

func (c *counting) Call(_ context.Context, call driver.Call) (driver.Result, error) {
	c.n++
	c.ids = append(c.ids, call.ID)
	return driver.Result{Content: jsontext.Value(`{"ok":true}`)}, nil
}

// Only finish_reason "tool_calls" runs tool calls; any other reply with
// tool calls, and a reply with duplicate ids, is refused whole.
func TestReplyValidation(t *testing.T) {
	two := toolCallsMessage([3]string{"a", "customer__get", `{"id":"1"}`}, [3]string{"b", "customer__get", `{"id":"2"}`})
	for _, tc := range []struct {
		name, finish, msg string
		code              driver.ReplyCode
		names             string // what the error names; finish when empty
	}{
		{"length", "length", two, driver.ReplyTruncated, ""},
		{"content_filter", "content_filter", two, driver.ReplyFiltered, ""},
		{"stop with calls", "stop", two, driver.ReplyMalformed, ""},
		{"unknown with calls", "eos_token", two, driver.ReplyMalformed, ""},
		{"function_call", "function_call", two, driver.ReplyMalformed, ""},
		{"refusal with calls", "tool_calls", `{"role":"assistant","content":null,"refusal":"no","tool_calls":[{"id":"a","type":"function","function":{"name":"customer__get","arguments":"{}"}}]}`, driver.ReplyRefused, ""},
		{"duplicate ids", "tool_calls", toolCallsMessage([3]string{"a", "customer__get", `{}`}, [3]string{"a", "customer__get", `{}`}), driver.ReplyMalformed, `the id "a" is given to two`},
		{"no id", "tool_calls", toolCallsMessage([3]string{"", "customer__get", `{}`}), driver.ReplyMalformed, "has no id"},
		{"tool_calls without calls", "tool_calls", textMessage("hm"), driver.ReplyMalformed, ""},
		{"length without calls", "length", textMessage("Ada's acc"), driver.ReplyTruncated, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
				return 200, completion(tc.finish, tc.msg)
			})
			srv := api.Start()
			caller := &counting{}
			_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller)
			if tc.names == "" {
				tc.names = tc.finish
			}
			var re *driver.ReplyError
			if !errors.As(err, &re) || !errors.Is(err, driver.ErrReplyRefused) || re.Code != tc.code || re.StopReason != tc.finish || !strings.Contains(err.Error(), tc.names) {
				t.Fatalf("err = %v, want a ReplyError %s naming %q", err, tc.code, tc.names)
			}
			if caller.n != 0 {
				t.Errorf("%d calls ran, want none", caller.n)
			}
			if strings.Contains(tc.msg, "tool_calls") && len(re.Calls) == 0 {
				t.Errorf("ReplyError lists no calls")
			}
		})
	}
}

// An id reused from an earlier turn of the step makes the reply
// malformed: the first turn's call ran, none of the second's.
func TestReusedID(t *testing.T) {
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
			return 200, completion("tool_calls", toolCallsMessage([3]string{"a", "customer__get", `{"id":"1"}`}))
		},
		func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
			return 200, completion("tool_calls", toolCallsMessage([3]string{"b", "customer__get", `{"id":"2"}`}, [3]string{"a", "customer__get", `{"id":"3"}`}))
		},
	)
	srv := api.Start()
	caller := &counting{}
	_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller)
	var re *driver.ReplyError
	if !errors.As(err, &re) || re.Code != driver.ReplyMalformed || len(re.Calls) != 2 || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("err = %v", err)
	}
	if caller.n != 1 || caller.ids[0] != "a" {
		t.Errorf("calls ran: %v, want only the first turn's a", caller.ids)
	}
}

// What goes back to the model is canonical: {} for empty arguments (to a
// tool whose schema needs none: see TestArgumentShapes), the
// canonical JSON otherwise, one tool message per call id; the Caller gets
// the arguments as sent.
func TestCanonicalHistory(t *testing.T) {
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(*testing.T, chatRequest, map[string]jsontext.Value) (int, string) {
			return 200, completion("tool_calls", toolCallsMessage([3]string{"a", "mcp__memory__search_nodes", ``}, [3]string{"b", "customer__get", `{ "z":1, "id":"x" }`}))
		},
		func(t *testing.T, req chatRequest, raw map[string]jsontext.Value) (int, string) {
			asst := req.Messages[2]
			if len(asst.ToolCalls) != 2 || asst.ToolCalls[0].Function.Arguments != `{}` || asst.ToolCalls[1].Function.Arguments != `{"id":"x","z":1}` {
				t.Errorf("assistant message %+v", asst)
			}
			var ids []string
			for _, m := range req.Messages[3:] {
				ids = append(ids, m.ToolCallID)
			}
			if !slices.Equal(ids, []string{"a", "b"}) {
				t.Errorf("tool messages for %v, want one each for a, b", ids)
			}
			return 200, completion("stop", textMessage("done"))
		},
	)
	srv := api.Start()
	caller := &drivertest.Caller{Allowed: []string{"customer.get"}}
	if _, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller); err != nil {
		t.Fatal(err)
	}
	if calls := caller.Calls(); len(calls) != 2 || string(calls[0].Arguments) != `` {
		t.Errorf("calls %+v", calls)
	}
}

// A request that runs out of the per-request timeout fails the step with
// an error naming the URL; no call runs.
func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	caller := &counting{}
	_, err := newDriver(t, srv, func(c *openai.Config) { c.Timeout = 50 * time.Millisecond }).RunStep(context.Background(), stepInput(), caller)
	if err == nil || !strings.Contains(err.Error(), "the request to "+srv.URL+"/v1/chat/completions timed out after 50ms") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
	if caller.n != 0 {
		t.Errorf("%d calls ran", caller.n)
	}
	for _, bad := range []any{"soon", "-1s", stdjson.Number("60")} {
		_, err := openai.FromSettings(map[string]any{"model": "m", "baseURL": srv.URL, "timeout": bad}, nil)
		if err == nil || !strings.Contains(err.Error(), `setting "timeout" must be a duration`) {
			t.Errorf("timeout %v: err = %v", bad, err)
		}
	}
	if _, err := openai.FromSettings(map[string]any{"model": "m", "baseURL": srv.URL, "timeout": "2m"}, nil); err != nil {
		t.Errorf("timeout 2m: %v", err)
	}
}

// A resumed step: the calls already made and their answers come first in
// the conversation, and a reply reusing one of their ids is malformed.
func TestResumedStepHistory(t *testing.T) {
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(t *testing.T, req chatRequest, raw map[string]jsontext.Value) (int, string) {
			if len(req.Messages) != 5 {
				t.Fatalf("%d messages, want system, user, assistant and 2 tool results", len(req.Messages))
			}
			asst := req.Messages[2]
			if len(asst.ToolCalls) != 2 || asst.ToolCalls[0].ID != "made_0" || asst.ToolCalls[0].Function.Name != "customer__get" || asst.ToolCalls[1].ID != "made_1" {
				t.Errorf("assistant message %+v", asst)
			}
			if req.Messages[3].ToolCallID != "made_0" || !strings.Contains(fmt.Sprint(req.Messages[3].Content), "Ada") ||
				req.Messages[4].ToolCallID != "made_1" || !strings.Contains(fmt.Sprint(req.Messages[4].Content), "not on") {
				t.Errorf("tool results %+v", req.Messages[3:])
			}
			return 200, completion("tool_calls", toolCallsMessage([3]string{"made_0", "customer__get", `{"customerId":"cus_1"}`}))
		},
	)
	srv := api.Start()
	in := stepInput()
	in.Made = []driver.MadeCall{
		{ID: "made_0", Name: "customer.get", Arguments: jsontext.Value(`{"customerId":"cus_1"}`), Result: driver.Result{Content: jsontext.Value(`{"name":"Ada"}`)}},
		{ID: "made_1", Name: "note.add", Arguments: jsontext.Value(`{}`), Result: driver.Result{Error: "note.add is not on the step's allowedTools"}},
	}
	caller := &drivertest.Caller{Allowed: []string{"customer.get"}}
	_, err := newDriver(t, srv, nil).RunStep(context.Background(), in, caller)
	var re *driver.ReplyError
	if !errors.As(err, &re) || re.Code != driver.ReplyMalformed {
		t.Fatalf("a reply reusing a made call's id: %v", err)
	}
	if n := len(caller.Calls()); n != 0 {
		t.Fatalf("%d calls ran", n)
	}
}
