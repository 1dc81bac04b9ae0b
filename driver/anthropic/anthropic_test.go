package anthropic_test

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
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/anthropic"
	"github.com/openplaybook/openplaybook/driver/drivertest"
	"github.com/openplaybook/openplaybook/driver/internal/llmtest"
)

const apiKey = "sk-ant-api03-0123456789abcdefSECRET"

// The request body of POST /v1/messages, as far as the driver sends it.
type messagesRequest struct {
	Model     string    `json:"model"`
	MaxTokens int       `json:"max_tokens"`
	System    []block   `json:"system"`
	Messages  []message `json:"messages"`
	Tools     []struct {
		Name         string         `json:"name"`
		Description  string         `json:"description"`
		InputSchema  jsontext.Value `json:"input_schema"`
		CacheControl *cacheControl  `json:"cache_control"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

type cacheControl struct {
	Type string `json:"type"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

type block struct {
	Type      string         `json:"type"`
	Text      string         `json:"text"`
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	Input     jsontext.Value `json:"input"`
	ToolUseID string         `json:"tool_use_id"`
	IsError   *bool          `json:"is_error"`
	Content   []block        `json:"content"`
	// CacheControl is a prompt-caching breakpoint; Source an image's.
	CacheControl *cacheControl `json:"cache_control"`
	Source       *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
}

// newAPI returns a Messages API server on loopback that answers each
// request with the next scripted turn.
func newAPI(t *testing.T) *llmtest.API[messagesRequest] {
	return &llmtest.API[messagesRequest]{T: t, Path: "/v1/messages"}
}

// response returns a Messages API response with content blocks, as the
// API streams it (see sse).
func response(stop string, content ...string) string {
	return sse(messageJSON(stop, content...), true)
}

// messageJSON returns a Messages API response with content blocks, as JSON.
func messageJSON(stop string, content ...string) string {
	return fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[%s],`+
		`"stop_reason":%q,"stop_sequence":null,"usage":{"input_tokens":10,"cache_read_input_tokens":100,"cache_creation_input_tokens":20,"output_tokens":5}}`, strings.Join(content, ","), stop)
}

// sse streams msg, a Messages API response (JSON), as the API does
// (https://docs.claude.com/en/docs/build-with-claude/streaming):
// message_start with the message without content, its stop reason and
// output usage; for each content block content_block_start (a text block
// with empty text, a tool_use block with input {}), two deltas
// (text_delta, input_json_delta with the input's JSON in two pieces) and
// content_block_stop; a ping; message_delta with stop_reason and the
// output tokens; and, when stop, message_stop.
func sse(msg string, stop bool) string {
	var m struct {
		StopReason string           `json:"stop_reason"`
		Content    []jsontext.Value `json:"content"`
		Usage      struct {
			Output int `json:"output_tokens"`
		} `json:"usage"`
	}
	var start map[string]jsontext.Value
	if err := json.Unmarshal([]byte(msg), &m); err != nil {
		panic(err)
	}
	if err := json.Unmarshal([]byte(msg), &start); err != nil {
		panic(err)
	}
	start["content"] = jsontext.Value(`[]`)
	start["stop_reason"] = jsontext.Value(`null`)
	var b strings.Builder
	event := func(typ string, data any) {
		d, err := json.Marshal(data)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, d)
	}
	event("message_start", map[string]any{"type": "message_start", "message": start})
	for i, raw := range m.Content {
		var blk map[string]jsontext.Value
		if err := json.Unmarshal(raw, &blk); err != nil {
			panic(err)
		}
		var typ string
		json.Unmarshal(blk["type"], &typ)
		var deltas []map[string]any
		switch typ {
		case "text":
			var text string
			json.Unmarshal(blk["text"], &text)
			blk["text"] = jsontext.Value(`""`)
			for _, piece := range halves(text) {
				deltas = append(deltas, map[string]any{"type": "text_delta", "text": piece})
			}
		case "tool_use":
			input := string(blk["input"])
			blk["input"] = jsontext.Value(`{}`)
			for _, piece := range halves(input) {
				deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": piece})
			}
		}
		event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": blk})
		for _, d := range deltas {
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	event("ping", map[string]any{"type": "ping"})
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": m.StopReason, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": m.Usage.Output}})
	if stop {
		event("message_stop", map[string]any{"type": "message_stop"})
	}
	return b.String()
}

// halves cuts s in two at a character boundary; "" has no pieces.
func halves(s string) []string {
	if s == "" {
		return nil
	}
	n := len(s) / 2
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	if n == 0 {
		return []string{s}
	}
	return []string{s[:n], s[n:]}
}

func text(s string) string {
	b, _ := json.Marshal(s)
	return `{"type":"text","text":` + string(b) + `}`
}

func toolUse(id, name, input string) string {
	return fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":%s}`, id, name, input)
}

var customerSchema = `{"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}`

func stepInput() driver.StepInput {
	return driver.StepInput{
		RunID:   "run-1",
		StepID:  "triage",
		Agent:   "triage",
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

func newDriver(t *testing.T, srv *httptest.Server, mod func(*anthropic.Config)) *anthropic.Driver {
	t.Helper()
	cfg := anthropic.Config{Model: "claude-test", BaseURL: srv.URL, APIKey: apiKey, HTTPClient: srv.Client(), MaxRetries: -1}
	if mod != nil {
		mod(&cfg)
	}
	d, err := anthropic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func compact(s string) jsontext.Value {
	v := jsontext.Value(s)
	if err := v.Compact(); err != nil {
		panic(err)
	}
	return v
}

func sentKey(h http.Header) string {
	if k := h.Get("X-Api-Key"); k != "" {
		return k
	}
	return strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
}

// The model uses an allowed tool, a tool the step does not allow and a
// look-alike of the allowed one; the Caller refuses the two, the
// refusals reach the model as is_error tool results, and the model ends
// its turn with text.
func TestConversation(t *testing.T) {
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(t *testing.T, req messagesRequest, raw map[string]jsontext.Value) (int, string) {
			for k := range raw {
				if !slices.Contains([]string{"model", "max_tokens", "system", "messages", "tools", "stream"}, k) {
					t.Errorf("request member %q", k)
				}
			}
			if req.Model != "claude-test" || req.MaxTokens != 4096 {
				t.Errorf("model %q, max_tokens %d", req.Model, req.MaxTokens)
			}
			if len(req.System) != 1 || req.System[0].Type != "text" {
				t.Fatalf("system %+v", req.System)
			}
			for _, want := range []string{`"triage"`, "Look the customer up and summarise the account.", `{"customerId":"cus_1"}`, `step intake: "ticket #42"`, "only the 2 tool(s) offered", "refused", "at most 10 tool call(s)"} {
				if !strings.Contains(req.System[0].Text, want) {
					t.Errorf("system prompt lacks %q:\n%s", want, req.System[0].Text)
				}
			}
			if len(req.Messages) != 1 || req.Messages[0].Role != "user" || len(req.Messages[0].Content) != 1 || req.Messages[0].Content[0].Text != "Carry out this step." {
				t.Fatalf("messages %+v", req.Messages)
			}
			if len(req.Tools) != 2 || req.Tools[0].Name != "customer__get" || req.Tools[1].Name != "mcp__memory__search_nodes" {
				t.Fatalf("tools %+v", req.Tools)
			}
			if tl := req.Tools[0]; tl.Description != "Get a customer by id." || !slices.Equal(tl.InputSchema, compact(customerSchema)) {
				t.Errorf("tool 0: %q %s", tl.Description, tl.InputSchema)
			}
			return 200, response("tool_use",
				text("Let me look."),
				toolUse("toolu_1", "customer__get", `{"id": "cus_1"}`),
				toolUse("toolu_2", "charge__refund", `{"charge":"ch_1"}`),
				toolUse("toolu_3", "customer__GET", `{"id":"cus_1"}`),
			)
		},
		func(t *testing.T, req messagesRequest, raw map[string]jsontext.Value) (int, string) {
			if len(req.Messages) != 3 {
				t.Fatalf("%d messages, want user, assistant, user", len(req.Messages))
			}
			asst := req.Messages[1]
			if asst.Role != "assistant" || len(asst.Content) != 4 || asst.Content[0].Text != "Let me look." || asst.Content[2].Name != "charge__refund" || asst.Content[2].ID != "toolu_2" {
				t.Errorf("assistant message %+v", asst)
			}
			results := req.Messages[2]
			want := []struct {
				id, text string
				isError  bool
			}{
				{"toolu_1", `{"customer":{"id":"cus_1","name":"Ada"}}`, false},
				{"toolu_2", `tool "charge.refund" is not allowed in this step`, true},
				{"toolu_3", `tool "customer.GET" is not allowed in this step`, true},
			}
			if results.Role != "user" || len(results.Content) != len(want) {
				t.Fatalf("tool results %+v", results)
			}
			for i, w := range want {
				b := results.Content[i]
				isErr := b.IsError != nil && *b.IsError
				if b.Type != "tool_result" || b.ToolUseID != w.id || isErr != w.isError || len(b.Content) != 1 || b.Content[0].Text != w.text {
					t.Errorf("tool result %d: %+v, want %s %q is_error %v", i, b, w.id, w.text, w.isError)
				}
			}
			return 200, response("end_turn", text("Ada's account "), text("is in good standing."))
		},
	)
	srv := api.Start()
	caller := &drivertest.Caller{
		Allowed: []string{"customer.get", "mcp.memory.search_nodes"},
		Results: map[string]driver.Result{"customer.get": {Content: jsontext.Value(`{"customer":{"id":"cus_1","name":"Ada"}}`)}},
	}
	out, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `"Ada's account is in good standing."` {
		t.Errorf("output %s", out)
	}
	want := []driver.Call{
		{ID: "toolu_1", Name: "customer.get", Arguments: jsontext.Value(`{"id": "cus_1"}`)},
		{ID: "toolu_2", Name: "charge.refund", Arguments: jsontext.Value(`{"charge":"ch_1"}`)},
		{ID: "toolu_3", Name: "customer.GET", Arguments: jsontext.Value(`{"id":"cus_1"}`)},
	}
	calls := caller.Calls()
	if len(calls) != len(want) {
		t.Fatalf("calls %+v", calls)
	}
	for i := range want {
		if calls[i].ID != want[i].ID || calls[i].Name != want[i].Name || string(calls[i].Arguments) != string(want[i].Arguments) {
			t.Errorf("call %d: %+v, want %+v", i, calls[i], want[i])
		}
		// Each call carries the text block of its reply.
		if calls[i].Reasoning != "Let me look." {
			t.Errorf("call %d: Reasoning %q, want the reply's text", i, calls[i].Reasoning)
		}
	}
	for _, h := range api.Headers() {
		if sentKey(h) != apiKey || h.Get("Anthropic-Version") == "" {
			t.Errorf("headers %v", h)
		}
	}
}

// Names a model invents reach the Caller mapped with SpecName only.
func TestHostileNames(t *testing.T) {
	names := []string{"customer__get ", "customer\u2024get", "Customer__get", "customer.get"}
	var uses []string
	for i, n := range names {
		b, _ := json.Marshal(n)
		uses = append(uses, fmt.Sprintf(`{"type":"tool_use","id":"t%d","name":%s,"input":{}}`, i, b))
	}
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
			return 200, response("tool_use", uses...)
		},
		func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
			return 200, response("end_turn")
		},
	)
	srv := api.Start()
	caller := &drivertest.Caller{Allowed: []string{"customer.get"}}
	out, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller)
	if err != nil || string(out) != `""` {
		t.Fatalf("RunStep = %s, %v", out, err)
	}
	wantNames := []string{"customer.get ", "customer\u2024get", "Customer.get", "customer.get"}
	for i, c := range caller.Calls() {
		if c.Name != wantNames[i] {
			t.Errorf("call %d: %q, want %q", i, c.Name, wantNames[i])
		}
	}
}

func TestCallerErrorStopsTheStep(t *testing.T) {
	for _, stop := range []error{driver.ErrSuspended, driver.ErrCallLimit} {
		api := newAPI(t)
		api.Turns = append(api.Turns, func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
			return 200, response("tool_use", toolUse("toolu_1", "customer__get", `{"id":"cus_1"}`), toolUse("toolu_2", "customer__get", `{"id":"cus_2"}`))
		})
		srv := api.Start()
		caller := &drivertest.Caller{Allowed: []string{"customer.get"}, Err: stop, ErrAt: 1}
		out, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller)
		if err != stop || !errors.Is(err, stop) || out != nil {
			t.Errorf("RunStep = %s, %v; want %v unchanged", out, err, stop)
		}
		if n := len(caller.Calls()); n != 1 {
			t.Errorf("%d calls, want 1", n)
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
		{"401", 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key ` + apiKey + `"},"request_id":"req_1"}`,
			[]string{`anthropic: model "claude-test" at http://127.0.0.1:`, ": the API answered 401 Unauthorized (authentication_error): invalid x-api-key [redacted]"}},
		{"404 model", 404, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}`, []string{"404 Not Found (not_found_error): model: claude-nope"}},
		{"proxy text", 502, `upstream connect error`, []string{"502 Bad Gateway: upstream connect error"}},
		{"other shape", 400, `{"message":"bad tools"}`, []string{"400 Bad Request: bad tools"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) { return tc.status, tc.body })
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
	use := func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
		n++
		return 200, response("tool_use", toolUse(fmt.Sprintf("t%d", n), "customer__get", `{"id":"x"}`))
	}
	t.Run("turn limit", func(t *testing.T) {
		api := newAPI(t)
		api.Turns = append(api.Turns, use, use)
		srv := api.Start()
		_, err := newDriver(t, srv, func(c *anthropic.Config) { c.MaxTurns = 2 }).RunStep(context.Background(), stepInput(), &drivertest.Caller{Allowed: []string{"customer.get"}})
		if !errors.Is(err, driver.ErrTurnLimit) {
			t.Errorf("err = %v", err)
		}
	})
	for _, stop := range []string{"max_tokens", "refusal", "pause_turn"} {
		t.Run(stop, func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
				return 200, response(stop, text("partial"))
			})
			srv := api.Start()
			_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), &drivertest.Caller{})
			if err == nil || !strings.Contains(err.Error(), stop) {
				t.Errorf("err = %v", err)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		api := newAPI(t)
		api.Turns = append(api.Turns, func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
			cancel()
			return 200, response("tool_use", toolUse("t", "customer__get", `{"id":"x"}`))
		})
		srv := api.Start()
		_, err := newDriver(t, srv, nil).RunStep(ctx, stepInput(), &drivertest.Caller{Allowed: []string{"customer.get"}})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("no tools, max tokens", func(t *testing.T) {
		api := newAPI(t)
		api.Turns = append(api.Turns, func(t *testing.T, req messagesRequest, raw map[string]jsontext.Value) (int, string) {
			if _, ok := raw["tools"]; ok {
				t.Errorf("tools sent for a step with none")
			}
			if req.MaxTokens != 100 {
				t.Errorf("max_tokens %d", req.MaxTokens)
			}
			return 200, response("end_turn", text("ok"))
		})
		srv := api.Start()
		in := stepInput()
		in.Tools = nil
		out, err := newDriver(t, srv, func(c *anthropic.Config) { c.MaxTokens = 100 }).RunStep(context.Background(), in, &drivertest.Caller{})
		if err != nil || string(out) != `"ok"` {
			t.Errorf("RunStep = %s, %v", out, err)
		}
	})
}

func TestNeverPrintsTheKey(t *testing.T) {
	cfg := anthropic.Config{Model: "m", APIKey: apiKey}
	d, err := anthropic.New(cfg)
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
	api.Turns = append(api.Turns, func(t *testing.T, req messagesRequest, _ map[string]jsontext.Value) (int, string) {
		if req.MaxTokens != 1000 {
			t.Errorf("max_tokens %d", req.MaxTokens)
		}
		return 200, response("end_turn", text("ok"))
	})
	srv := api.Start()
	setup := &driver.Setup{
		Secret: func(name string) (string, error) {
			if name == "ANTHROPIC_API_KEY" {
				return apiKey, nil
			}
			return "", fmt.Errorf("secret %q is not set", name)
		},
		HTTPClient: srv.Client(),
	}
	d, err := anthropic.FromSettings(map[string]any{
		"model": "claude-test", "baseURL": srv.URL, "apiKeySecret": "ANTHROPIC_API_KEY",
		"maxTokens": stdjson.Number("1000"), "maxRetries": stdjson.Number("0"),
	}, setup)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := d.RunStep(context.Background(), stepInput(), &drivertest.Caller{}); err != nil || string(out) != `"ok"` {
		t.Fatalf("RunStep = %s, %v", out, err)
	}
	if sentKey(api.Headers()[0]) != apiKey {
		t.Errorf("key not sent")
	}
	for _, tc := range []struct {
		settings map[string]any
		want     string
	}{
		{map[string]any{"apiKeySecret": "ANTHROPIC_API_KEY"}, `anthropic driver: setting "model" is required`},
		{map[string]any{"model": "m"}, `setting "apiKeySecret" is required`},
		{map[string]any{"model": "m", "apiKeySecret": "ANTHROPIC_API_KEY", "temperature": stdjson.Number("1")}, `unknown setting "temperature"; the settings of driver "anthropic" are "model", "baseURL", "apiKeySecret", "maxTokens", "maxTurns", "maxRetries"`},
		{map[string]any{"model": "m", "api_key": apiKey}, `unknown setting "api_key"; an API key is never written in the harness`},
		{map[string]any{"model": "m", "apiKeySecret": "ANTHROPIC_API_KEY", "maxTokens": stdjson.Number("1.5")}, `setting "maxTokens" must be a whole number of at least 1`},
		{map[string]any{"model": "m", "apiKeySecret": "NOPE"}, `setting "apiKeySecret": secret "NOPE" is not set`},
	} {
		_, err := anthropic.FromSettings(tc.settings, setup)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromSettings(%v):\n got %v\nwant %s", tc.settings, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), apiKey) {
			t.Errorf("the error holds the key: %v", err)
		}
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

// Only stop_reason "tool_use" runs tool_use blocks; any other reply with
// them, and a reply with duplicate ids, is refused whole.
func TestReplyValidation(t *testing.T) {
	two := []string{toolUse("a", "customer__get", `{"id":"1"}`), toolUse("b", "customer__get", `{"id":"2"}`)}
	for _, tc := range []struct {
		name, stop string
		content    []string
		code       driver.ReplyCode
		names      string // what the error names; stop when empty
	}{
		{"max_tokens", "max_tokens", two, driver.ReplyTruncated, ""},
		{"context window", "model_context_window_exceeded", two, driver.ReplyTruncated, ""},
		{"refusal", "refusal", two, driver.ReplyRefused, ""},
		{"end_turn with tool_use", "end_turn", two, driver.ReplyMalformed, ""},
		{"stop_sequence with tool_use", "stop_sequence", two, driver.ReplyMalformed, ""},
		{"pause_turn with tool_use", "pause_turn", two, driver.ReplyMalformed, ""},
		{"duplicate ids", "tool_use", []string{toolUse("a", "customer__get", `{}`), toolUse("a", "customer__get", `{}`)}, driver.ReplyMalformed, `the id "a" is given to two`},
		{"no id", "tool_use", []string{toolUse("", "customer__get", `{}`)}, driver.ReplyMalformed, "has no id"},
		{"tool_use without blocks", "tool_use", []string{text("hm")}, driver.ReplyMalformed, ""},
		{"max_tokens without calls", "max_tokens", []string{text("partial")}, driver.ReplyTruncated, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPI(t)
			api.Turns = append(api.Turns, func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
				return 200, response(tc.stop, tc.content...)
			})
			srv := api.Start()
			caller := &counting{}
			_, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller)
			if tc.names == "" {
				tc.names = tc.stop
			}
			var re *driver.ReplyError
			if !errors.As(err, &re) || !errors.Is(err, driver.ErrReplyRefused) || re.Code != tc.code || re.StopReason != tc.stop || !strings.Contains(err.Error(), tc.names) {
				t.Fatalf("err = %v, want a ReplyError %s naming %q", err, tc.code, tc.names)
			}
			if caller.n != 0 {
				t.Errorf("%d calls ran, want none", caller.n)
			}
			if strings.Contains(strings.Join(tc.content, ""), "tool_use") && len(re.Calls) == 0 {
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
		func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
			return 200, response("tool_use", toolUse("a", "customer__get", `{"id":"1"}`))
		},
		func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
			return 200, response("tool_use", toolUse("b", "customer__get", `{"id":"2"}`), toolUse("a", "customer__get", `{"id":"3"}`))
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

// What goes back to the model is canonical: the input in canonical form,
// one tool_result per call id.
func TestCanonicalHistory(t *testing.T) {
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(*testing.T, messagesRequest, map[string]jsontext.Value) (int, string) {
			return 200, response("tool_use", text("look"), toolUse("a", "customer__get", `{ "z":1, "id":"x" }`), toolUse("b", "customer__get", `{}`))
		},
		func(t *testing.T, req messagesRequest, _ map[string]jsontext.Value) (int, string) {
			asst := req.Messages[1]
			if len(asst.Content) != 3 || asst.Content[0].Text != "look" || string(asst.Content[1].Input) != `{"id":"x","z":1}` || string(asst.Content[2].Input) != `{}` {
				t.Errorf("assistant message %+v", asst)
			}
			var ids []string
			for _, b := range req.Messages[2].Content {
				ids = append(ids, b.ToolUseID)
			}
			if !slices.Equal(ids, []string{"a", "b"}) {
				t.Errorf("tool results for %v, want one each for a, b", ids)
			}
			return 200, response("end_turn", text("done"))
		},
	)
	srv := api.Start()
	caller := &counting{}
	if _, err := newDriver(t, srv, nil).RunStep(context.Background(), stepInput(), caller); err != nil {
		t.Fatal(err)
	}
	if caller.n != 2 {
		t.Errorf("%d calls ran, want 2", caller.n)
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
	_, err := newDriver(t, srv, func(c *anthropic.Config) { c.Timeout = 50 * time.Millisecond }).RunStep(context.Background(), stepInput(), caller)
	if err == nil || !strings.Contains(err.Error(), "the request to "+srv.URL+"/v1/messages timed out after 50ms") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
	if caller.n != 0 {
		t.Errorf("%d calls ran", caller.n)
	}
	for _, bad := range []any{"soon", "-1s", stdjson.Number("60")} {
		_, err := anthropic.FromSettings(map[string]any{"model": "m", "baseURL": srv.URL, "timeout": bad}, nil)
		if err == nil || !strings.Contains(err.Error(), `setting "timeout" must be a duration`) {
			t.Errorf("timeout %v: err = %v", bad, err)
		}
	}
	if _, err := anthropic.FromSettings(map[string]any{"model": "m", "baseURL": srv.URL, "timeout": "2m"}, nil); err != nil {
		t.Errorf("timeout 2m: %v", err)
	}
}

// A resumed step: the calls already made and their answers come first in
// the conversation, as tool_use and tool_result blocks.
func TestResumedStepHistory(t *testing.T) {
	api := newAPI(t)
	api.Turns = append(api.Turns,
		func(t *testing.T, req messagesRequest, raw map[string]jsontext.Value) (int, string) {
			if len(req.Messages) != 3 || req.Messages[1].Role != "assistant" || req.Messages[2].Role != "user" {
				t.Fatalf("messages %+v", req.Messages)
			}
			uses, results := req.Messages[1].Content, req.Messages[2].Content
			if len(uses) != 2 || uses[0].Type != "tool_use" || uses[0].ID != "made_0" || uses[0].Name != "customer__get" || string(uses[0].Input) != `{"customerId":"cus_1"}` {
				t.Errorf("tool_use blocks %+v", uses)
			}
			if len(results) != 2 || results[0].ToolUseID != "made_0" || results[1].ToolUseID != "made_1" || results[1].IsError == nil || !*results[1].IsError {
				t.Errorf("tool_result blocks %+v", results)
			}
			return 200, response("end_turn", text("done"))
		},
	)
	srv := api.Start()
	in := stepInput()
	in.Made = []driver.MadeCall{
		{ID: "made_0", Name: "customer.get", Arguments: jsontext.Value(`{"customerId":"cus_1"}`), Result: driver.Result{Content: jsontext.Value(`{"name":"Ada"}`)}},
		{ID: "made_1", Name: "note.add", Arguments: jsontext.Value(`{}`), Result: driver.Result{Error: "refused"}},
	}
	out, err := newDriver(t, srv, nil).RunStep(context.Background(), in, &drivertest.Caller{Allowed: []string{"customer.get"}})
	if err != nil || string(out) != `"done"` {
		t.Fatalf("%s %v", out, err)
	}
}
