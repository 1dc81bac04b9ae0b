package openairesponses_test

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
	"github.com/openplaybook/openplaybook/driver/openairesponses"
)

const apiKey = "sk-test-0123456789abcdefSECRET"

// The request body of POST /v1/responses, as far as the driver sends it.
type responsesRequest struct {
	Model        string      `json:"model"`
	Instructions string      `json:"instructions"`
	Input        []inputItem `json:"input"`
	Tools        []toolSpec  `json:"tools"`
	Temperature  *float64    `json:"temperature"`
	Store        *bool       `json:"store"`
}

// inputItem is a message, function_call or function_call_output item.
type inputItem struct {
	Type      string `json:"type"`
	Role      string `json:"role"`
	Content   any    `json:"content"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Output    any    `json:"output"`
}

type toolSpec struct {
	Type        string         `json:"type"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  jsontext.Value `json:"parameters"`
	Strict      *bool          `json:"strict"`
}

func newAPI(t *testing.T) *llmtest.API[responsesRequest] {
	return &llmtest.API[responsesRequest]{T: t, Path: "/v1/responses"}
}

func auth(api *llmtest.API[responsesRequest]) []string {
	var a []string
	for _, h := range api.Headers() {
		a = append(a, h.Get("Authorization"))
	}
	return a
}

// response is a Responses API response object with the given status
// ("" for none), extra top-level members (`"incomplete_details":{...},`)
// and output items.
func response(status, extra string, items ...string) string {
	st := ""
	if status != "" {
		st = fmt.Sprintf(`"status":%q,`, status)
	}
	return `{"id":"resp_1","object":"response","created_at":1700000000,"model":"gpt-test",` + st + extra +
		`"output":[` + strings.Join(items, ",") + `],"parallel_tool_calls":true,"tool_choice":"auto","tools":[],` +
		`"usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}`
}

func completed(items ...string) string { return response("completed", "", items...) }

func fnCall(callID, name, args string) string {
	b, _ := json.Marshal(args)
	return fmt.Sprintf(`{"type":"function_call","id":"fc_%s","call_id":%q,"name":%q,"arguments":%s,"status":"completed"}`, callID, callID, name, b)
}

func text(s string) string {
	b, _ := json.Marshal(s)
	return `{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":` + string(b) + `,"annotations":[]}]}`
}

func refusal(s string) string {
	b, _ := json.Marshal(s)
	return `{"type":"message","id":"msg_2","role":"assistant","status":"completed","content":[{"type":"refusal","refusal":` + string(b) + `}]}`
}

const reasoning = `{"type":"reasoning","id":"rs_1","summary":[]}`

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

func newDriver(t *testing.T, srv *httptest.Server, mod func(*openairesponses.Config)) *openairesponses.Driver {
	t.Helper()
	cfg := openairesponses.Config{Model: "gpt-test", BaseURL: srv.URL + "/v1", APIKey: apiKey, HTTPClient: srv.Client(), MaxRetries: -1}
	if mod != nil {
		mod(&cfg)
	}
	d, err := openairesponses.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The model calls an allowed tool, a tool the step does not allow and a
// look-alike of the allowed one; the Caller refuses the two, the
// refusals reach the model as the function outputs, and the model ends
// with text. Every request holds the whole conversation and store: false.
func TestConversation(t *testing.T) {
	temp := 0.2
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(t *testing.T, req responsesRequest, raw map[string]jsontext.Value) (int, string) {
			for k := range raw {
				if !slices.Contains([]string{"model", "instructions", "input", "tools", "temperature", "store"}, k) {
					t.Errorf("request member %q", k)
				}
			}
			if req.Model != "gpt-test" || req.Temperature == nil || *req.Temperature != 0.2 || req.Store == nil || *req.Store {
				t.Errorf("model %q, temperature %v, store %v", req.Model, req.Temperature, req.Store)
			}
			for _, want := range []string{`"rita"`, "Look the customer up and summarise the account.", `{"customerId":"cus_1"}`, `step intake: "ticket #42"`, "only the 2 tool(s) offered", "refused", "at most 10 tool call(s)"} {
				if !strings.Contains(req.Instructions, want) {
					t.Errorf("instructions lack %q:\n%s", want, req.Instructions)
				}
			}
			if len(req.Input) != 1 || req.Input[0].Type != "message" || req.Input[0].Role != "user" || req.Input[0].Content != "Carry out this step." {
				t.Fatalf("input %+v", req.Input)
			}
			if len(req.Tools) != 2 {
				t.Fatalf("tools %+v", req.Tools)
			}
			for i, want := range []string{"customer__get", "mcp__memory__search_nodes"} {
				f := req.Tools[i]
				if f.Type != "function" || f.Name != want || f.Strict == nil || *f.Strict {
					t.Errorf("tool %d: %+v", i, f)
				}
			}
			if f := req.Tools[0]; f.Description != "Get a customer by id." || !slices.Equal(f.Parameters, compact(customerSchema)) {
				t.Errorf("tool 0: description %q, parameters %s (want the schema)", f.Description, f.Parameters)
			}
			return 200, completed(reasoning,
				fnCall("call_1", "customer__get", `{"id": "cus_1" }`),
				fnCall("call_2", "charge__refund", `{"charge":"ch_1"}`),
				fnCall("call_3", "customer__GET", `{"id":"cus_1"}`),
			)
		},
		func(t *testing.T, req responsesRequest, raw map[string]jsontext.Value) (int, string) {
			if req.Store == nil || *req.Store {
				t.Errorf("store %v on turn 2", req.Store)
			}
			if len(req.Input) != 7 {
				t.Fatalf("%d input items, want the user message, 3 function calls and 3 outputs: %+v", len(req.Input), req.Input)
			}
			calls := req.Input[1:4]
			for i, w := range [][3]string{{"call_1", "customer__get", `{"id":"cus_1"}`}, {"call_2", "charge__refund", `{"charge":"ch_1"}`}, {"call_3", "customer__GET", `{"id":"cus_1"}`}} {
				c := calls[i]
				if c.Type != "function_call" || c.CallID != w[0] || c.Name != w[1] || c.Arguments != w[2] || c.ID != "" {
					t.Errorf("function_call %d: %+v, want %v (and no item id: nothing is stored)", i, c, w)
				}
			}
			want := []struct{ id, output string }{
				{"call_1", `{"customer":{"id":"cus_1","name":"Ada"}}`},
				{"call_2", `{"error":"tool \"charge.refund\" is not allowed in this step"}`},
				{"call_3", `{"error":"tool \"customer.GET\" is not allowed in this step"}`},
			}
			for i, w := range want {
				o := req.Input[4+i]
				if o.Type != "function_call_output" || o.CallID != w.id || o.Output != w.output {
					t.Errorf("function_call_output %d: %+v, want %s %s", i, o, w.id, w.output)
				}
			}
			return 200, completed(reasoning, text("Ada's account is in good standing."))
		},
	)
	srv := api.Start()
	d := newDriver(t, srv, func(c *openairesponses.Config) { c.Temperature = &temp })
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
// refuse. Text beside the calls goes back as an assistant message.
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
		func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
			items := []string{text("Let me look.")}
			for _, c := range sent {
				items = append(items, fnCall(c[0], c[1], c[2]))
			}
			return 200, completed(items...)
		},
		func(t *testing.T, req responsesRequest, _ map[string]jsontext.Value) (int, string) {
			if len(req.Input) != 2+2*len(sent) {
				t.Errorf("%d input items", len(req.Input))
			}
			if m := req.Input[1]; m.Type != "message" || m.Role != "assistant" || m.Content != "Let me look." {
				t.Errorf("assistant message %+v", m)
			}
			return 200, completed(text(""))
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
	if len(calls) != len(sent) {
		t.Fatalf("calls %+v", calls)
	}
	for i, c := range calls {
		if c.Name != wantNames[i] || string(c.Arguments) != sent[i][2] {
			t.Errorf("call %d: %q %q, want %q %q", i, c.Name, c.Arguments, wantNames[i], sent[i][2])
		}
		// The reply's output_text is each call's Reasoning.
		if c.Reasoning != "Let me look." {
			t.Errorf("call %d: Reasoning %q, want the reply's text", i, c.Reasoning)
		}
	}
}

func TestCallerErrorStopsTheStep(t *testing.T) {
	for _, stop := range []error{driver.ErrSuspended, driver.ErrCallLimit} {
		api := newAPI(t)
		api.Turns = append(api.Turns, func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
			return 200, completed(fnCall("call_1", "customer__get", `{"id":"cus_1"}`), fnCall("call_2", "customer__get", `{"id":"cus_2"}`))
		})
		srv := api.Start()
		caller := &drivertest.Caller{Allowed: []string{"customer.get"}, Err: stop, ErrAt: 1}
		out, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller)
		if err != stop || out != nil {
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
		name      string
		status    int
		body      string
		want      []string
		transient bool
	}{
		{"openai 401", 401, `{"error":{"message":"Incorrect API key provided: ` + apiKey + `. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			[]string{`openai-responses: model "gpt-test" at http://127.0.0.1:`, "/v1/responses: the API answered 401 Unauthorized (invalid_api_key): Incorrect API key provided: [redacted]."}, false},
		{"masked key", 401, `{"error":{"message":"Incorrect API key provided: sk-test-*****************CRET.","type":"invalid_request_error","code":"invalid_api_key"}}`,
			[]string{"401 Unauthorized", "Incorrect API key provided: [redacted]"}, false},
		{"unsupported parameter", 400, `{"error":{"message":"Unsupported parameter: 'temperature' is not supported with this model.","type":"invalid_request_error","param":"temperature","code":"unsupported_parameter"}}`,
			[]string{"400 Bad Request (unsupported_parameter): Unsupported parameter: 'temperature'"}, false},
		{"string error", 404, `{"error":"404 page not found: /v1/responses"}`, []string{"404 Not Found", "404 page not found"}, false},
		{"rate limited", 429, `{"error":{"message":"Rate limit reached for gpt-test.","type":"requests","code":"rate_limit_exceeded"}}`, []string{"429 Too Many Requests (rate_limit_exceeded)"}, true},
		{"not json", 502, `<html>bad gateway</html>`, []string{"502 Bad Gateway: <html>bad gateway</html>"}, true},
		{"vllm", 404, `{"object":"error","message":"The model ` + "`llama9`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`, []string{"404 Not Found: The model `llama9` does not exist."}, false},
		{"empty", 503, ``, []string{"/v1/responses: the API answered 503 Service Unavailable"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) { return tc.status, tc.body })
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
			if got := driver.Transient(err); got != tc.transient {
				t.Errorf("Transient = %v, want %v", got, tc.transient)
			}
		})
	}
}

// A response with status "failed" and no function call fails the step
// with the response's error; server_error and rate_limit_exceeded are
// transient.
func TestFailedResponse(t *testing.T) {
	for _, tc := range []struct {
		code      string
		transient bool
	}{{"server_error", true}, {"rate_limit_exceeded", true}, {"invalid_prompt", false}} {
		api := newAPI(t)
		api.Turns = append(api.Turns, func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
			return 200, response("failed", fmt.Sprintf(`"error":{"code":%q,"message":"The model failed; key %s"},`, tc.code, apiKey))
		})
		srv := api.Start()
		caller := &counting{}
		_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller)
		want := fmt.Sprintf(`openai-responses: model "gpt-test" at %s/v1: the response failed (%s): The model failed; key [redacted]`, srv.URL, tc.code)
		if err == nil || err.Error() != want {
			t.Errorf("err = %v\nwant %s", err, want)
		}
		if driver.Transient(err) != tc.transient || errors.Is(err, driver.ErrReplyRefused) {
			t.Errorf("%s: Transient = %v, want %v", tc.code, driver.Transient(err), tc.transient)
		}
		if caller.n != 0 {
			t.Errorf("%d calls ran", caller.n)
		}
	}
}

func TestStops(t *testing.T) {
	n := 0
	call := func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
		n++
		return 200, completed(fnCall(fmt.Sprintf("c%d", n), "customer__get", `{"id":"x"}`))
	}
	t.Run("turn limit", func(t *testing.T) {
		api := newAPI(t)
		api.Turns = append(api.Turns, call, call, call)
		srv := api.Start()
		_, err := newDriver(t, srv, func(c *openairesponses.Config) { c.MaxTurns = 3 }).RunStep(context.Background(), stepInput(), &drivertest.Caller{Allowed: []string{"customer.get"}})
		if !errors.Is(err, driver.ErrTurnLimit) || driver.Transient(err) {
			t.Errorf("err = %v, want ErrTurnLimit, not transient", err)
		}
	})
	t.Run("cut off", func(t *testing.T) {
		api := newAPI(t)
		api.Turns = append(api.Turns, func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
			return 200, response("incomplete", `"incomplete_details":{"reason":"max_output_tokens"},`, text("Ada's acc"))
		})
		srv := api.Start()
		_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		if err == nil || !strings.Contains(err.Error(), "cut off") || driver.Transient(err) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		api := newAPI(t)
		api.Turns = append(api.Turns, func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
			cancel()
			return 200, completed(fnCall("c", "customer__get", `{"id":"x"}`))
		})
		srv := api.Start()
		_, err := newDriver(t, srv, nil).RunStep(ctx, stepInput(), &drivertest.Caller{Allowed: []string{"customer.get"}})
		if !errors.Is(err, context.Canceled) || driver.Transient(err) {
			t.Errorf("err = %v, want context.Canceled, not transient", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
		if err == nil || strings.Contains(err.Error(), apiKey) || !strings.Contains(err.Error(), srv.URL+"/v1") || !driver.Transient(err) {
			t.Errorf("err = %v (transient %v)", err, driver.Transient(err))
		}
	})
	t.Run("no tools", func(t *testing.T) {
		api := newAPI(t)
		api.Turns = append(api.Turns, func(t *testing.T, req responsesRequest, raw map[string]jsontext.Value) (int, string) {
			if _, ok := raw["tools"]; ok {
				t.Errorf("tools sent for a step with none: %s", raw["tools"])
			}
			if !strings.Contains(req.Instructions, "No tool is offered") {
				t.Errorf("instructions: %s", req.Instructions)
			}
			return 200, completed(text("ok"))
		})
		srv := api.Start()
		in := stepInput()
		in.Tools = nil
		out, err := newDriver(t, srv, func(c *openairesponses.Config) { c.APIKey = "" }).RunStep(context.Background(), in, &drivertest.Caller{})
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
	cfg := openairesponses.Config{Model: "m", APIKey: apiKey}
	d, err := openairesponses.New(cfg)
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
	api.Turns = append(api.Turns, func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
		return 200, completed(text("ok"))
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
	d, err := openairesponses.FromSettings(map[string]any{
		"model": "gpt-test", "baseURL": "http://${secret:HOST}/v1", "apiKeySecret": "OPENAI_API_KEY",
		"temperature": stdjson.Number("0"), "maxTurns": stdjson.Number("4"), "maxRetries": stdjson.Number("0"), "timeout": "30s",
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
		{map[string]any{}, setup, `openai-responses driver: setting "model" is required`},
		{map[string]any{"model": "m"}, setup, `setting "apiKeySecret" is required (the name of the secret that holds the OpenAI API key`},
		{map[string]any{"model": "m", "apiKey": apiKey}, setup, `unknown setting "apiKey"; an API key is never written in the harness: name the secret that holds it in "apiKeySecret"`},
		{map[string]any{"model": "m", "apiKeySecret": apiKey}, setup, `setting "apiKeySecret" must be a secret's name`},
		{map[string]any{"model": "m", "modle": "x", "baseURL": "http://h/v1"}, setup, `unknown setting "modle" (did you mean "model"?)`},
		{map[string]any{"model": "m", "baseURL": "http://h/v1", "maxTokens": stdjson.Number("10")}, setup, `unknown setting "maxTokens"`},
		{map[string]any{"model": "m", "baseURL": "http://h/v1", "temperature": stdjson.Number("3")}, setup, `setting "temperature" must be a number from 0 to 2`},
		{map[string]any{"model": "m", "baseURL": "http://h/v1", "maxTurns": stdjson.Number("0")}, setup, `setting "maxTurns" must be a whole number of at least 1`},
		{map[string]any{"model": 4}, setup, `setting "model" must be a string`},
		{map[string]any{"model": "m", "apiKeySecret": "MISSING"}, setup, `setting "apiKeySecret": secret "MISSING" is not set`},
		{map[string]any{"model": "m", "apiKeySecret": "OPENAI_API_KEY"}, nil, `names the secret "OPENAI_API_KEY", and no secrets were given`},
		{map[string]any{"model": "m", "baseURL": "ftp://h"}, setup, `openai-responses: the base URL "ftp://h" is not an http(s) URL`},
		{map[string]any{"model": "m", "baseURL": "${secret:X}"}, nil, `setting "baseURL" holds a ${secret:NAME} reference, and no secrets were given`},
		{map[string]any{"model": "m", "baseURL": "http://h/v1", "timeout": "soon"}, setup, `setting "timeout" must be a duration`},
	} {
		_, err := openairesponses.FromSettings(tc.settings, tc.setup)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromSettings(%v):\n got %v\nwant %s", tc.settings, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), apiKey) {
			t.Errorf("the error holds the key: %v", err)
		}
	}
	if err := openairesponses.CheckSettings(map[string]any{"model": "m", "apiKeySecret": "OPENAI_API_KEY"}); err != nil {
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

// Only a completed response runs function calls; any other status with
// calls, a refusal, an output item the driver never asks for, an
// unfinished call and duplicate call_ids refuse the response whole.
func TestReplyValidation(t *testing.T) {
	two := []string{fnCall("a", "customer__get", `{"id":"1"}`), fnCall("b", "customer__get", `{"id":"2"}`)}
	incomplete := func(reason string) string { return fmt.Sprintf(`"incomplete_details":{"reason":%q},`, reason) }
	for _, tc := range []struct {
		name, status, extra string
		items               []string
		code                driver.ReplyCode
		names               string
	}{
		{"max_output_tokens", "incomplete", incomplete("max_output_tokens"), two, driver.ReplyTruncated, "max_output_tokens"},
		{"content_filter", "incomplete", incomplete("content_filter"), two, driver.ReplyFiltered, "content_filter"},
		{"incomplete without calls", "incomplete", incomplete("max_output_tokens"), []string{text("Ada's acc")}, driver.ReplyTruncated, "cut off"},
		{"failed with calls", "failed", `"error":{"code":"server_error","message":"boom"},`, two, driver.ReplyMalformed, "the response failed"},
		{"in_progress", "in_progress", "", two, driver.ReplyMalformed, `"in_progress"`},
		{"cancelled", "cancelled", "", []string{text("x")}, driver.ReplyMalformed, `"cancelled"`},
		{"no status with calls", "", "", two, driver.ReplyMalformed, "has no status"},
		{"refusal with calls", "completed", "", append([]string{refusal("no")}, two...), driver.ReplyRefused, "the model refused"},
		{"refusal alone", "completed", "", []string{refusal("I can't help with that.")}, driver.ReplyRefused, "I can't help with that."},
		{"duplicate call_ids", "completed", "", []string{fnCall("a", "customer__get", `{}`), fnCall("a", "customer__get", `{}`)}, driver.ReplyMalformed, `the call_id "a" is given to two`},
		{"no call_id", "completed", "", []string{fnCall("", "customer__get", `{}`)}, driver.ReplyMalformed, "has no id"},
		{"web search", "completed", "", append([]string{`{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"x"}}`}, two...), driver.ReplyMalformed, `"web_search_call"`},
		{"unfinished call", "completed", "", []string{strings.Replace(two[0], `"status":"completed"`, `"status":"incomplete"`, 1)}, driver.ReplyMalformed, `status "incomplete"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
				return 200, response(tc.status, tc.extra, tc.items...)
			})
			srv := api.Start()
			caller := &counting{}
			_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller)
			var re *driver.ReplyError
			if !errors.As(err, &re) || !errors.Is(err, driver.ErrReplyRefused) || re.Code != tc.code || re.StopReason != tc.status || !strings.Contains(err.Error(), tc.names) {
				t.Fatalf("err = %v, want a ReplyError %s naming %q", err, tc.code, tc.names)
			}
			if driver.Transient(err) {
				t.Errorf("a refused reply is transient")
			}
			if caller.n != 0 {
				t.Errorf("%d calls ran, want none", caller.n)
			}
			if strings.Contains(strings.Join(tc.items, ""), "function_call") && len(re.Calls) == 0 {
				t.Errorf("ReplyError lists no calls")
			}
		})
	}
}

// A call_id reused from an earlier turn of the step makes the response
// malformed: the first turn's call ran, none of the second's.
func TestReusedID(t *testing.T) {
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
			return 200, completed(fnCall("a", "customer__get", `{"id":"1"}`))
		},
		func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
			return 200, completed(fnCall("b", "customer__get", `{"id":"2"}`), fnCall("a", "customer__get", `{"id":"3"}`))
		},
	)
	srv := api.Start()
	caller := &counting{}
	_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller)
	var re *driver.ReplyError
	if !errors.As(err, &re) || re.Code != driver.ReplyMalformed || len(re.Calls) != 2 || !strings.Contains(err.Error(), `the call_id "a" of tool call 2 was already used`) {
		t.Fatalf("err = %v", err)
	}
	if caller.n != 1 || caller.ids[0] != "a" {
		t.Errorf("calls ran: %v, want only the first turn's a", caller.ids)
	}
}

// What goes back to the model is canonical: {} for empty arguments (to a
// tool whose schema needs none: see TestArgumentShapes), the
// canonical JSON otherwise, one function_call_output per call_id; the
// Caller gets the arguments as sent.
func TestCanonicalHistory(t *testing.T) {
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(*testing.T, responsesRequest, map[string]jsontext.Value) (int, string) {
			return 200, completed(fnCall("a", "mcp__memory__search_nodes", ``), fnCall("b", "customer__get", `{ "z":1, "id":"x" }`))
		},
		func(t *testing.T, req responsesRequest, raw map[string]jsontext.Value) (int, string) {
			if len(req.Input) != 5 || req.Input[1].Arguments != `{}` || req.Input[2].Arguments != `{"id":"x","z":1}` {
				t.Errorf("input %+v", req.Input)
			}
			var ids []string
			for _, it := range req.Input {
				if it.Type == "function_call_output" {
					ids = append(ids, it.CallID)
				}
			}
			if !slices.Equal(ids, []string{"a", "b"}) {
				t.Errorf("outputs for %v, want one each for a, b", ids)
			}
			return 200, completed(text("done"))
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
// an error naming the URL; it is transient; no call runs.
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
	_, err := newDriver(t, srv, func(c *openairesponses.Config) { c.Timeout = 50 * time.Millisecond }).RunStep(context.Background(), stepInput(), caller)
	if err == nil || !strings.Contains(err.Error(), "the request to "+srv.URL+"/v1/responses timed out after 50ms") || !errors.Is(err, context.DeadlineExceeded) || !driver.Transient(err) {
		t.Errorf("err = %v", err)
	}
	if caller.n != 0 {
		t.Errorf("%d calls ran", caller.n)
	}
}

// A resumed step: the calls already made and their outputs come first in
// the input, and a response reusing one of their call_ids is malformed.
func TestResumedStepHistory(t *testing.T) {
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(t *testing.T, req responsesRequest, raw map[string]jsontext.Value) (int, string) {
			if len(req.Input) != 5 {
				t.Fatalf("%d input items, want the user message, 2 function calls and 2 outputs", len(req.Input))
			}
			c0, c1 := req.Input[1], req.Input[2]
			if c0.Type != "function_call" || c0.CallID != "made_0" || c0.Name != "customer__get" || c0.Arguments != `{"customerId":"cus_1"}` || c1.CallID != "made_1" || c1.Name != "note__add" {
				t.Errorf("function calls %+v %+v", c0, c1)
			}
			o0, o1 := req.Input[3], req.Input[4]
			if o0.Type != "function_call_output" || o0.CallID != "made_0" || !strings.Contains(fmt.Sprint(o0.Output), "Ada") ||
				o1.CallID != "made_1" || !strings.Contains(fmt.Sprint(o1.Output), "not on") {
				t.Errorf("outputs %+v %+v", o0, o1)
			}
			return 200, completed(fnCall("made_0", "customer__get", `{"customerId":"cus_1"}`))
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
		t.Fatalf("a response reusing a made call's call_id: %v", err)
	}
	if n := len(caller.Calls()); n != 0 {
		t.Fatalf("%d calls ran", n)
	}
}

// models is a fake of GET /v1/models: it answers status and body, and
// counts the requests and the Authorization headers it got.
func models(t *testing.T, status int, body string) (*httptest.Server, *[]string) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/models" {
			t.Errorf("request %s %s, want GET /v1/models", r.Method, r.URL.Path)
		}
		got = append(got, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

const modelList = `{"object":"list","data":[{"id":"gpt-5","object":"model","created":1,"owned_by":"openai"},{"id":"gpt-test","object":"model","created":1,"owned_by":"openai"}]}`

func TestProbe(t *testing.T) {
	t.Run("listed", func(t *testing.T) {
		srv, got := models(t, 200, modelList)
		if err := newDriver(t, srv, nil).Probe(context.Background()); err != nil {
			t.Errorf("Probe = %v", err)
		}
		if len(*got) != 1 || (*got)[0] != "Bearer "+apiKey {
			t.Errorf("requests %q, want one with the key", *got)
		}
	})
	t.Run("unknown model", func(t *testing.T) {
		srv, _ := models(t, 200, modelList)
		err := newDriver(t, srv, func(c *openairesponses.Config) { c.Model = "gpt-tset" }).Probe(context.Background())
		var ue *driver.UnknownModelError
		want := fmt.Sprintf(`openai-responses: the API at %s/v1 does not list the model "gpt-tset" (it lists 2); did you mean "gpt-test"?`, srv.URL)
		if !errors.As(err, &ue) || !errors.Is(err, driver.ErrUnknownModel) || err.Error() != want {
			t.Errorf("Probe = %v\nwant %s", err, want)
		}
	})
	t.Run("401", func(t *testing.T) {
		srv, got := models(t, 401, `{"error":{"message":"Incorrect API key provided: `+apiKey+`.","type":"invalid_request_error","code":"invalid_api_key"}}`)
		err := newDriver(t, srv, func(c *openairesponses.Config) { c.MaxRetries = 5 }).Probe(context.Background())
		var pe *driver.ProviderError
		if !errors.As(err, &pe) || pe.StatusCode != 401 || strings.Contains(err.Error(), apiKey) || !strings.Contains(err.Error(), "401 Unauthorized (invalid_api_key)") {
			t.Errorf("Probe = %v", err)
		}
		if len(*got) != 1 {
			t.Errorf("%d requests, want 1 (a probe is not retried)", len(*got))
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		err := newDriver(t, srv, func(c *openairesponses.Config) { c.MaxRetries = 5 }).Probe(context.Background())
		var pe *driver.ProviderError
		if err == nil || errors.As(err, &pe) || errors.Is(err, driver.ErrUnknownModel) || !strings.Contains(err.Error(), srv.URL+"/v1") {
			t.Errorf("Probe = %v", err)
		}
	})
}
