// Package openai is the driver that runs an agent step with a model
// through the OpenAI Chat Completions API and its tool calling, on
// OpenAI's own API or on any server that speaks it (Ollama, vLLM,
// llama.cpp, LM Studio, ...: set Config.BaseURL).
//
// The model sees a system prompt (the step's purpose, the run's input,
// earlier steps' outputs, the rule that only the offered tools may be
// used), the user message "Carry out this step." and the step's allowed
// tools as functions under their wire names ([driver.WireName]). Each tool
// call it makes goes, in order, to the [driver.Caller] under
// [driver.SpecName] of the name it sent, with its arguments as sent; the
// Caller's answer goes back as the call's tool message. The step ends when
// a response has no tool call: its text, as a JSON string, is the step's
// output.
//
// The driver reads nothing from the environment (no OPENAI_API_KEY,
// OPENAI_BASE_URL, ...): the runtime passes the key it resolved from the
// harness.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/internal/llm"
	"github.com/openplaybook/openplaybook/driver/internal/openaiapi"
)

// Name is the driver's name in a harness binding (driver: openai).
const Name = "openai"

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config configures a [Driver]. Printing a Config (fmt, log/slog) never
// shows the API key.
type Config struct {
	// Model is the model to run ("gpt-4.1", "llama3.1:8b"); required.
	Model string
	// BaseURL is the API's base URL, up to and including /v1
	// ("http://127.0.0.1:11434/v1" for Ollama). Empty: [DefaultBaseURL].
	BaseURL string
	// APIKey is sent as a bearer token. Empty: no Authorization header
	// (for local servers).
	APIKey string
	// Temperature is the sampling temperature. Nil: the server's default.
	Temperature *float64
	// HTTPClient sends the requests. Nil: http.DefaultClient.
	HTTPClient *http.Client
	// MaxTurns is the most requests sent for one step; a model still
	// calling tools after that ends the step with [driver.ErrTurnLimit].
	// Zero: one more than the step's MaxCalls (51 when that is 0).
	MaxTurns int
	// MaxRetries is how often a request that failed with a connection
	// error, 408, 409, 429 or 5xx is retried. Zero: 2; negative: never.
	MaxRetries int
	// Timeout is the most one HTTP request (each attempt) may take; a
	// request that runs out of it fails the step with an error naming
	// the URL. Zero: 60s; negative: none.
	Timeout time.Duration
	// StepTimeout is the most one run of a step may take, its requests,
	// retries and tool calls included: no request or tool call starts
	// after it, and a request still running then is cut; the step fails
	// with an error wrapping [driver.ErrStepTimeout]. Zero or negative:
	// none.
	StepTimeout time.Duration
	// MaxResultBytes is the most bytes of a tool result's text the model
	// is shown; a longer result is shown as a notice and a preview (the
	// result itself is kept whole in the run's store). Zero:
	// [llm.DefaultMaxResultBytes] (64 KiB).
	MaxResultBytes int
	// NoImages says the model is not shown the images tools return (a
	// model without vision): each is a notice in the result's text.
	// False: images go to the model in a user message after the turn's
	// tool messages (a tool message takes text only).
	NoImages bool
	// Binding is where the agent's binding is in the harness file
	// ("harness.yaml:12"), for errors; see [driver.Setup].Binding.
	Binding string
}

// String shows the Config without its API key.
func (c Config) String() string {
	return fmt.Sprintf("openai.Config{Model: %q, BaseURL: %q, APIKey: %s, MaxTurns: %d}", c.Model, c.BaseURL, llm.KeyShown(c.APIKey), c.MaxTurns)
}

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// Driver runs agent steps through the Chat Completions API. It is safe for
// concurrent use.
type Driver struct {
	now    func() time.Time // the step deadline's clock; nil: time.Now
	cfg    Config
	svc    sdk.ChatCompletionService
	models sdk.ModelService
	url    string // for errors: the request URL without query
	base   string // for errors: BaseURL without user info or query
}

// New returns a Driver for cfg. It sends nothing yet.
func New(cfg Config) (*Driver, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai: no model")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	base, err := llm.BaseURL(Name, cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = llm.DefaultTimeout
	}
	opts := openaiapi.Options(Name, cfg.HTTPClient, cfg.BaseURL, cfg.APIKey, cfg.Timeout, cfg.MaxRetries)
	return &Driver{cfg: cfg, svc: sdk.NewChatCompletionService(opts...), models: sdk.NewModelService(opts...), base: base, url: strings.TrimSuffix(base, "/") + "/chat/completions"}, nil
}

// String shows the Driver without its API key.
func (d *Driver) String() string { return "openai.Driver{" + d.cfg.String() + "}" }

// GoString is String, for %#v.
func (d *Driver) GoString() string { return d.String() }

// RunStep runs the step's conversation: it sends the prompt and the tools,
// passes each tool call of a response, in order, to caller, sends the
// results back, and repeats until a response has no tool call; that
// response's text, as a JSON string, is the output. The loop is the one
// every model driver shares ([llm.Loop]); this driver's [turn] only
// builds the requests and reads the replies.
//
// It returns caller's error unchanged ([driver.ErrSuspended],
// [driver.ErrCallLimit], ...), ctx's error, [driver.ErrTurnLimit] after
// MaxTurns requests, an error wrapping [driver.ErrStepTimeout] when the
// step runs out of Config.StepTimeout, a *[driver.ProviderError] when the
// API answers with an error status (after the SDK's retries), an error
// naming the URL when a request runs out of Config.Timeout or is answered
// with a redirect ([llm.RedirectError]), and a *[driver.ReplyError] when
// a reply is refused whole (cut off, filtered, refused, more than one
// choice, tool calls without finish_reason "tool_calls", or with an id
// given twice in the step, arguments that are not a JSON string, blank
// arguments to a tool that needs some): none of its calls reaches caller.
// No error holds the API key.
//
// When caller is a [driver.UsageRecorder], each response's usage (when
// the server reports it) goes to it before the response is acted on.
func (d *Driver) RunStep(ctx context.Context, in driver.StepInput, caller driver.Caller) (jsontext.Value, error) {
	tools, err := llm.Tools(Name, in)
	if err != nil {
		return nil, err
	}
	params := sdk.ChatCompletionNewParams{
		Model: shared.ChatModel(d.cfg.Model),
		Messages: []sdk.ChatCompletionMessageParamUnion{
			sdk.SystemMessage(llm.SystemPrompt(in)),
			sdk.UserMessage(llm.UserPrompt),
		},
	}
	if d.cfg.Temperature != nil {
		params.Temperature = param.NewOpt(*d.cfg.Temperature)
	}
	for _, t := range tools {
		def, err := functionDefinition(t)
		if err != nil {
			return nil, fmt.Errorf("openai: tool %q: %w", driver.SpecName(t.Wire), err)
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionToolUnionParam{
			OfFunction: &sdk.ChatCompletionFunctionToolParam{
				Function: param.Override[shared.FunctionDefinitionParam](json.RawMessage(def)),
			},
		})
	}

	t := &turn{d: d, params: params, shown: llm.Shown{Limit: d.cfg.MaxResultBytes, Images: !d.cfg.NoImages, ImagesLater: true}}
	loop := llm.Loop{Provider: Name, Model: d.cfg.Model, MaxTurns: d.cfg.MaxTurns, StepTimeout: d.cfg.StepTimeout, Now: d.now, Binding: d.cfg.Binding}
	return loop.Run(ctx, in, caller, t)
}

// turn is the Chat Completions API's half of a step's conversation
// ([llm.Turn]).
type turn struct {
	d      *Driver
	params sdk.ChatCompletionNewParams
	shown  llm.Shown
	images imageMessage // of the accepted reply's answers
}

// Send sends one request and reads the response's first choice: its tool
// calls, its text, its stop signals ([Driver.readStop]).
func (t *turn) Send(ctx context.Context) (llm.Reply, error) {
	rctx, att := llm.CountAttempts(ctx)
	resp, err := t.d.svc.New(rctx, t.params)
	if err != nil {
		return llm.Reply{}, t.d.clean(rctx, err, att.N())
	}
	var r llm.Reply
	if resp.JSON.Usage.Valid() {
		u := resp.Usage
		r.Usage = &driver.Usage{
			InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
			CachedInputTokens: u.PromptTokensDetails.CachedTokens, CacheWriteTokens: u.PromptTokensDetails.CacheWriteTokens,
		}
	}
	if len(resp.Choices) == 0 {
		return r, llm.Noted(fmt.Errorf("openai: the response from %s has no choices", t.d.url), 0, t.d.cfg.Binding)
	}
	choice := resp.Choices[0]
	var shape string
	r.Calls, r.Wires, shape = toolCalls(choice.Message.ToolCalls)
	r.Stop, r.Text = choice.FinishReason, choice.Message.Content
	if shape != "" {
		r.Refuse(driver.ReplyMalformed, shape)
	}
	t.d.readStop(&r, choice, resp.Choices[1:])
	return r, nil
}

// Accept appends the assistant message: its text, when it has any, and
// its tool calls with their arguments in canonical form (what was
// decided).
func (t *turn) Accept(r llm.Reply) {
	asst := sdk.ChatCompletionAssistantMessageParam{}
	if r.Text != "" {
		asst.Content.OfString = param.NewOpt(r.Text)
	}
	for i, c := range r.Calls {
		asst.ToolCalls = append(asst.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
				ID:       c.ID,
				Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: r.Wires[i], Arguments: string(llm.CanonicalArgs(c.Arguments))},
			},
		})
	}
	t.params.Messages = append(t.params.Messages, sdk.ChatCompletionMessageParamUnion{OfAssistant: &asst})
}

// Answer appends the call's tool message; its images wait for EndTurn.
func (t *turn) Answer(c driver.Call, res driver.Result) {
	t.params.Messages = append(t.params.Messages, sdk.ToolMessage(t.shown.Text(res), c.ID))
	t.images.add(c.ID, c.Name, res, t.shown)
}

// EndTurn appends the user message with the answers' images, if any.
func (t *turn) EndTurn() {
	t.params.Messages = t.images.append(t.params.Messages)
	t.images = imageMessage{}
}

// imageMessage collects the images a turn's tool results hold, for the
// user message that follows the tool messages: a tool message takes text
// only (Chat Completions API reference: the tool message's content is a
// string or text parts), a user message takes image_url parts.
type imageMessage struct {
	parts []sdk.ChatCompletionContentPartUnionParam
}

func (m *imageMessage) add(id, name string, r driver.Result, shown llm.Shown) {
	if r.Error != "" {
		return
	}
	n := 0
	for _, p := range shown.Parts(r.Content) {
		if p.Image == nil {
			continue
		}
		n++
		m.parts = append(m.parts,
			sdk.TextContentPart(fmt.Sprintf("Image %d of the result of tool call %s (%s):", n, id, name)),
			sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: "data:" + p.Image.MediaType + ";base64," + p.Image.Data}))
	}
}

// append appends the user message with the images to msgs, when there
// are any.
func (m *imageMessage) append(msgs []sdk.ChatCompletionMessageParamUnion) []sdk.ChatCompletionMessageParamUnion {
	if len(m.parts) == 0 {
		return msgs
	}
	return append(msgs, sdk.UserMessage(m.parts))
}

// toolCalls returns a message's tool calls as the Caller gets them (names
// mapped back with SpecName, arguments as sent), the names as sent, and
// the reason the reply is malformed by the calls' shape ("" when it is
// not): a function call whose "arguments" is not a JSON string (missing,
// null, an object: the SDK would read it as "" or as the raw value, and
// the runtime takes "" as {}).
func toolCalls(tcs []sdk.ChatCompletionMessageToolCallUnion) ([]driver.Call, []string, string) {
	var calls []driver.Call
	var wires []string
	shape := ""
	for i, tc := range tcs {
		name, args := tc.Function.Name, tc.Function.Arguments
		raw := tc.Function.JSON.Arguments.Raw()
		if tc.Type == "custom" {
			name, args = tc.Custom.Name, tc.Custom.Input
			raw = tc.Custom.JSON.Input.Raw()
		}
		if shape == "" && !strings.HasPrefix(raw, `"`) {
			shape = fmt.Sprintf("the arguments of tool call %d are not a JSON string (the API sends them as one): %s", i+1, openaiapi.ArgShape(raw))
			args = raw
		}
		calls = append(calls, driver.Call{ID: tc.ID, Name: driver.SpecName(name), Arguments: jsontext.Value(args)})
		wires = append(wires, name)
	}
	return calls, wires, shape
}

// readStop adds to r the signals of its stop (see docs/drivers.md, "Stop
// reasons"). Only finish_reason "tool_calls" lets tool calls run; a reply
// without tool calls that stopped otherwise than cut off or filtered is
// the final answer. others are the response's choices after the first:
// the driver asks for one, so any is a contradiction (cut off when one of
// them says so).
func (d *Driver) readStop(r *llm.Reply, choice sdk.ChatCompletionChoice, others []sdk.ChatCompletionChoice) {
	stop, n := choice.FinishReason, len(r.Calls)
	for _, o := range others {
		switch o.FinishReason {
		case "length":
			r.Refuse(driver.ReplyTruncated, fmt.Sprintf("the response has %d choices, and choice %d was cut off (finish_reason %q)", len(others)+1, o.Index+1, o.FinishReason))
		case "content_filter":
			r.Refuse(driver.ReplyFiltered, fmt.Sprintf("the response has %d choices, and choice %d was filtered (finish_reason %q)", len(others)+1, o.Index+1, o.FinishReason))
		}
	}
	if len(others) > 0 {
		r.Refuse(driver.ReplyMalformed, fmt.Sprintf("the response has %d choices; the driver asks for one", len(others)+1))
	}
	switch stop {
	case "length":
		r.Refuse(driver.ReplyTruncated, fmt.Sprintf("the model's answer was cut off (finish_reason %q)", stop))
	case "content_filter":
		r.Refuse(driver.ReplyFiltered, fmt.Sprintf("the model's answer was filtered (finish_reason %q)", stop))
	}
	if refusal := llm.Redact(choice.Message.Refusal, d.cfg.APIKey); refusal != "" && (n > 0 || choice.Message.Content == "") {
		r.Refuse(driver.ReplyRefused, fmt.Sprintf("the model refused (finish_reason %q): %s", stop, refusal))
	}
	switch {
	case stop == "tool_calls" && n == 0:
		r.Refuse(driver.ReplyMalformed, fmt.Sprintf("finish_reason %q, and the reply has no tool call", stop))
	case stop == "function_call":
		r.Refuse(driver.ReplyMalformed, fmt.Sprintf("finish_reason %q (a legacy function call, which this driver never offers)", stop))
	case stop != "tool_calls" && n > 0:
		r.Refuse(driver.ReplyMalformed, fmt.Sprintf("the reply holds %d tool call(s), and its finish_reason %q does not ask for tool calls (only \"tool_calls\" does)", n, stop))
	}
}

// functionDefinition returns the function's definition as JSON, with the
// schema as the document has it (the SDK compacts it).
func functionDefinition(t llm.Tool) ([]byte, error) {
	type def struct {
		Name        string         `json:"name"`
		Description string         `json:"description,omitempty"`
		Parameters  jsontext.Value `json:"parameters"`
		Strict      bool           `json:"strict"`
	}
	return jsonv2.Marshal(def{Name: t.Wire, Description: t.Description, Parameters: t.Schema})
}

// clean turns an SDK error into one that names the request URL, the
// status, how often the request was sent and the agent's binding, and
// never holds the API key.
func (d *Driver) clean(ctx context.Context, err error, attempts int) error {
	return d.endpoint().CleanN(ctx, err, attempts)
}

func (d *Driver) endpoint() openaiapi.Endpoint {
	return openaiapi.Endpoint{Provider: Name, Model: d.cfg.Model, Base: d.base, URL: d.url, Key: d.cfg.APIKey, Timeout: d.cfg.Timeout, Binding: d.cfg.Binding}
}

// Probe checks that the API is reachable, accepts the key and lists the
// model: one GET {BaseURL}/models (OpenAI's "List models"), not retried.
// It returns nil, a *[driver.UnknownModelError] when the model is not
// listed, a *[driver.ProviderError] for an error status (401: the key is
// refused; 404: the server lists no models), or the request's error
// (unreachable, out of Config.Timeout). No error holds the API key.
func (d *Driver) Probe(ctx context.Context) error {
	return d.endpoint().Probe(ctx, d.models)
}

var (
	_ driver.Driver = (*Driver)(nil)
	_ driver.Prober = (*Driver)(nil)
)
