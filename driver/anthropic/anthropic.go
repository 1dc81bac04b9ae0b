// Package anthropic is the driver that runs an agent step with a Claude
// model through the Anthropic Messages API and its tool use.
//
// The model sees a system prompt (the step's purpose, the run's input,
// earlier steps' outputs, the rule that only the offered tools may be
// used), the user message "Carry out this step." and the step's allowed
// tools under their wire names ([driver.WireName]) with their input
// schemas. Each tool_use block of a response goes, in order, to the
// [driver.Caller] under [driver.SpecName] of the name the model sent, with
// its input as sent; the Caller's answers go back as tool_result blocks
// (is_error for an error: a refusal, an invalid argument, a failure) in
// the next user message. The step ends when a response has no tool_use
// block and stops at end_turn (or a stop sequence): its text blocks,
// concatenated, as a JSON string, are the step's output.
//
// Responses are streamed (server-sent events, accumulated with the SDK's
// Message.Accumulate), so any max_tokens the model allows works; the
// system block and the last tool carry prompt-caching breakpoints. Each
// response's usage goes to a Caller that is a [driver.UsageRecorder].
//
// The driver reads nothing from the environment (no ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL, profiles, ...): the runtime passes the key it
// resolved from the harness.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/openplaybook/openplaybook/driver"
	"github.com/openplaybook/openplaybook/driver/internal/llm"
)

// Name is the driver's name in a harness binding (driver: anthropic).
const Name = "anthropic"

// DefaultBaseURL is Anthropic's API.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens is the default of Config.MaxTokens.
const DefaultMaxTokens = 4096

// Config configures a [Driver]. Printing a Config (fmt, log/slog) never
// shows the API key.
type Config struct {
	// Model is the model to run ("claude-sonnet-4-5"); required.
	Model string
	// BaseURL is the API's base URL, without /v1 (requests go to
	// BaseURL/v1/messages). Empty: [DefaultBaseURL].
	BaseURL string
	// APIKey is the API key. Empty: none is sent (for a proxy that adds
	// its own).
	APIKey string
	// MaxTokens is the most tokens of one response. Zero:
	// [DefaultMaxTokens].
	MaxTokens int
	// HTTPClient sends the requests. Nil: http.DefaultClient.
	HTTPClient *http.Client
	// MaxTurns is the most requests sent for one step; a model still
	// using tools after that ends the step with [driver.ErrTurnLimit].
	// Zero: one more than the step's MaxCalls (51 when that is 0).
	MaxTurns int
	// MaxRetries is how often a request that failed with a connection
	// error, 408, 409, 429 or 5xx is retried. Zero: 2; negative: never.
	MaxRetries int
	// Timeout is the most one HTTP request (each attempt, its whole
	// streamed response included) may take; a request that runs out of
	// it fails the step with an error naming the URL. Zero:
	// [DefaultTimeout]; negative: none.
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
	// Binding is where the agent's binding is in the harness file
	// ("harness.yaml:12"), for errors; see [driver.Setup].Binding.
	Binding string
}

// DefaultTimeout is the default of Config.Timeout: ten minutes, the
// timeout Anthropic's SDK recommends for a Messages request, since a
// streamed response of many tokens takes minutes.
const DefaultTimeout = 10 * time.Minute

// String shows the Config without its API key.
func (c Config) String() string {
	return fmt.Sprintf("anthropic.Config{Model: %q, BaseURL: %q, APIKey: %s, MaxTokens: %d, MaxTurns: %d}", c.Model, c.BaseURL, llm.KeyShown(c.APIKey), c.MaxTokens, c.MaxTurns)
}

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// Driver runs agent steps through the Messages API. It is safe for
// concurrent use.
type Driver struct {
	now  func() time.Time // the step deadline's clock; nil: time.Now
	cfg  Config
	svc  sdk.MessageService
	url  string // for errors: the request URL without query
	base string // for errors: BaseURL without query

	models sdk.ModelService // for Probe
}

// New returns a Driver for cfg. It sends nothing yet.
func New(cfg Config) (*Driver, error) {
	if cfg.Model == "" {
		return nil, errors.New("anthropic: no model")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	base, err := llm.BaseURL(Name, cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		// No redirect is followed: it would take the key and the
		// conversation elsewhere ([llm.Redirected]).
		option.WithHTTPClient(llm.NoRedirects(cfg.HTTPClient)),
		option.WithBaseURL(cfg.BaseURL),
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			llm.Attempted(req)
			res, err := next(req)
			return llm.Redirected(Name, req, res, err)
		}),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(cfg.Timeout))
	}
	switch {
	case cfg.MaxRetries < 0:
		opts = append(opts, option.WithMaxRetries(0))
	case cfg.MaxRetries > 0:
		opts = append(opts, option.WithMaxRetries(cfg.MaxRetries))
	}
	client2 := sdk.NewClient(opts...)
	return &Driver{cfg: cfg, svc: client2.Messages, models: client2.Models, base: base, url: strings.TrimSuffix(base, "/") + "/v1/messages"}, nil
}

// String shows the Driver without its API key.
func (d *Driver) String() string { return "anthropic.Driver{" + d.cfg.String() + "}" }

// GoString is String, for %#v.
func (d *Driver) GoString() string { return d.String() }

// RunStep runs the step's conversation: it sends the prompt and the tools,
// passes each tool_use block of a response, in order, to caller, sends the
// results back as tool_result blocks, and repeats until a response ends
// its turn without tool use; that response's text, as a JSON string, is
// the output. Each request streams its response (server-sent events),
// accumulated into the message before anything of it is used. The loop
// is the one every model driver shares ([llm.Loop]); this driver's
// [turn] only builds the requests and reads the replies.
//
// It returns caller's error unchanged ([driver.ErrSuspended],
// [driver.ErrCallLimit], ...), ctx's error, [driver.ErrTurnLimit] after
// MaxTurns requests, an error wrapping [driver.ErrStepTimeout] when the
// step runs out of Config.StepTimeout, a *[driver.ProviderError] when the
// API answers with an error status (after the SDK's retries), an error
// naming the URL when a request runs out of Config.Timeout, is answered
// with a redirect or the stream ends in an error event, and a
// *[driver.ReplyError] when a reply is refused whole (cut off, refused, a
// stream that ended before message_stop, stop signals that contradict
// each other, a tool_use input that is not exactly one JSON object,
// tool_use blocks without stop_reason "tool_use", or with an id given
// twice in the step): none of its calls reaches caller. No error holds
// the API key.
//
// When caller is a [driver.UsageRecorder], each response's usage goes to
// it before the response is acted on.
func (d *Driver) RunStep(ctx context.Context, in driver.StepInput, caller driver.Caller) (jsontext.Value, error) {
	tools, err := llm.Tools(Name, in)
	if err != nil {
		return nil, err
	}
	// Prompt caching: a breakpoint on the last tool caches the tool list,
	// one on the system block the tools and the system prompt.
	params := sdk.MessageNewParams{
		Model:     sdk.Model(d.cfg.Model),
		MaxTokens: int64(d.cfg.MaxTokens),
		System:    []sdk.TextBlockParam{{Text: llm.SystemPrompt(in), CacheControl: sdk.NewCacheControlEphemeralParam()}},
		Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(llm.UserPrompt))},
	}
	for i, t := range tools {
		tp := &sdk.ToolParam{
			Name:        t.Wire,
			InputSchema: param.Override[sdk.ToolInputSchemaParam](json.RawMessage(t.Schema)),
		}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		if i == len(tools)-1 {
			tp.CacheControl = sdk.NewCacheControlEphemeralParam()
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: tp})
	}
	t := &turn{d: d, params: params, shown: llm.Shown{Limit: d.cfg.MaxResultBytes, Images: true}}
	loop := llm.Loop{Provider: Name, Model: d.cfg.Model, MaxTurns: d.cfg.MaxTurns, StepTimeout: d.cfg.StepTimeout, Now: d.now, Binding: d.cfg.Binding}
	return loop.Run(ctx, in, caller, t)
}

// turn is the Messages API's half of a step's conversation ([llm.Turn]).
type turn struct {
	d       *Driver
	params  sdk.MessageNewParams
	shown   llm.Shown
	results []sdk.ContentBlockParamUnion // the answers of the accepted reply
}

// Send streams one response and reads it: its tool_use blocks as calls,
// its text blocks as the text, its stop signals and stream shape as
// signals ([readStop]).
func (t *turn) Send(ctx context.Context) (llm.Reply, error) {
	msg, signals, err := t.d.stream(ctx, t.params)
	if err != nil {
		return llm.Reply{}, err
	}
	r := llm.Reply{Stop: string(msg.StopReason), Signals: signals, Raw: msg}
	if msg.ID != "" {
		u := msg.Usage
		r.Usage = &driver.Usage{
			InputTokens:  u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
			OutputTokens: u.OutputTokens, CachedInputTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens,
		}
	}
	var text strings.Builder
	for _, b := range msg.Content {
		switch b.Type {
		case "tool_use":
			r.Calls = append(r.Calls, driver.Call{ID: b.ID, Name: driver.SpecName(b.Name), Arguments: jsontext.Value(b.Input)})
			r.Wires = append(r.Wires, b.Name)
		case "text":
			text.WriteString(b.Text)
		}
	}
	r.Text = text.String()
	readStop(&r, msg.StopReason)
	return r, nil
}

// Accept appends the assistant message: the response's blocks, each
// tool_use block's input in canonical form (what was decided); for a
// resumed step, one tool_use block per call made.
func (t *turn) Accept(r llm.Reply) {
	msg, ok := r.Raw.(sdk.Message)
	if !ok {
		uses := make([]sdk.ContentBlockParamUnion, len(r.Calls))
		for i, c := range r.Calls {
			uses[i] = sdk.NewToolUseBlock(c.ID, json.RawMessage(llm.CanonicalArgs(c.Arguments)), r.Wires[i])
		}
		t.params.Messages = append(t.params.Messages, sdk.NewAssistantMessage(uses...))
		return
	}
	asst := msg.ToParam()
	for i, b := range msg.Content {
		if b.Type == "tool_use" {
			asst.OfAssistant.Content[i] = sdk.NewToolUseBlock(b.ID, json.RawMessage(llm.CanonicalArgs(b.Input)), b.Name)
		}
	}
	t.params.Messages = append(t.params.Messages, asst)
}

// Answer adds the call's tool_result block.
func (t *turn) Answer(c driver.Call, res driver.Result) {
	t.results = append(t.results, toolResult(c.ID, res, t.shown))
}

// EndTurn appends the user message of the tool_result blocks.
func (t *turn) EndTurn() {
	t.params.Messages = append(t.params.Messages, sdk.NewUserMessage(t.results...))
	t.results = nil
}

// toolResult is the tool_result block of a call's answer: the error's
// text with is_error, or what the model is shown of the result (text
// blocks and image blocks, see [llm.Shown.Parts]).
func toolResult(id string, r driver.Result, shown llm.Shown) sdk.ContentBlockParamUnion {
	if r.Error != "" {
		return sdk.NewToolResultBlock(id, shown.ErrorText(r.Error), true)
	}
	tr := sdk.ToolResultBlockParam{ToolUseID: id, IsError: sdk.Bool(false)}
	for _, p := range shown.Parts(r.Content) {
		switch {
		case p.Image != nil:
			tr.Content = append(tr.Content, sdk.ToolResultBlockParamContentUnion{OfImage: &sdk.ImageBlockParam{
				Source: sdk.ImageBlockParamSourceUnion{OfBase64: &sdk.Base64ImageSourceParam{Data: p.Image.Data, MediaType: sdk.Base64ImageSourceMediaType(p.Image.MediaType)}},
			}})
		case p.Text != "":
			// The API refuses empty text blocks.
			tr.Content = append(tr.Content, sdk.ToolResultBlockParamContentUnion{OfText: &sdk.TextBlockParam{Text: p.Text}})
		}
	}
	return sdk.ContentBlockParamUnion{OfToolResult: &tr}
}

// stream sends one request with a streamed response and accumulates its
// events into the message. The reply is refused (a signal) when
// the stream ended before message_stop, or a tool_use block's input does
// not come as exactly one complete JSON value ([inputs]: the driver
// assembles each input from the events itself, since the SDK's
// accumulation makes an input it cannot join into {}, and a call with
// all its defaults must never run in its place). Errors are as
// [Driver.clean] makes them, or say the stream is malformed.
func (d *Driver) stream(ctx context.Context, params sdk.MessageNewParams) (msg sdk.Message, signals []llm.Signal, err error) {
	ctx, att := llm.CountAttempts(ctx)
	var res *http.Response
	s := d.svc.NewStreaming(ctx, params, option.WithResponseInto(&res))
	defer s.Close()
	events := 0
	complete := false
	var in inputs
	var stops []sdk.StopReason // every stop_reason the stream gave
	for s.Next() {
		ev := s.Current()
		events++
		if events == 1 && ev.Type != "message_start" {
			return msg, nil, llm.Noted(fmt.Errorf("anthropic: the response stream from %s begins with a %q event, not message_start", d.url, ev.Type), 0, d.cfg.Binding)
		}
		if complete {
			// Nothing follows message_stop: an event that does contradicts it.
			in.refuse("the response stream goes on after its message_stop event (a %q event)", ev.Type)
		}
		in.event(ev)
		switch {
		case ev.Type == "message_start" && ev.Message.StopReason != "":
			stops = append(stops, ev.Message.StopReason)
		case ev.Type == "message_delta" && ev.Delta.StopReason != "":
			stops = append(stops, ev.Delta.StopReason)
		}
		if err := msg.Accumulate(ev); err != nil {
			return msg, nil, llm.Noted(&llm.RedactedError{Msg: llm.Redact(fmt.Sprintf("anthropic: the response stream from %s is malformed: %v", d.url, err), d.cfg.APIKey), Err: err}, 0, d.cfg.Binding)
		}
		if ev.Type == "message_stop" {
			complete = true
		}
	}
	if err := s.Err(); err != nil {
		return msg, nil, d.clean(ctx, err, att.N())
	}
	if events == 0 {
		ct := ""
		if res != nil {
			ct = res.Header.Get("Content-Type")
		}
		return msg, nil, llm.Noted(fmt.Errorf("anthropic: the response from %s holds no stream events (Content-Type %q); the Messages API answers a streaming request with text/event-stream", d.url, ct), 0, d.cfg.Binding)
	}
	// The calls, refused or not, carry the inputs as the model sent them.
	why := in.assemble(&msg)
	if !complete {
		return msg, []llm.Signal{{Code: driver.ReplyTruncated, Reason: "the response stream ended before its message_stop event: the reply may be cut off"}}, nil
	}
	signals = d.stopSignals(stops, msg)
	if why != "" {
		signals = append(signals, llm.Signal{Code: driver.ReplyMalformed, Reason: why})
	}
	return msg, signals, nil
}

// stopSignals returns the signals of a stream whose stop signals
// contradict each other (none when they do not): two different
// stop_reasons (message_start's and message_delta's, or two
// message_deltas), or an output token count that reached max_tokens under
// a stop_reason that says otherwise. Each disagreeing stop_reason is a
// signal with the code it has alone (so that one that says cut off counts
// as cut off, [llm.Check]), and the disagreement is malformed.
func (d *Driver) stopSignals(stops []sdk.StopReason, msg sdk.Message) []llm.Signal {
	var signals []llm.Signal
	for _, r := range stops[min(1, len(stops)):] {
		if r == stops[0] {
			continue
		}
		why := fmt.Sprintf("the response stream gives stop_reason %q and also %q", stops[0], r)
		for _, stop := range []sdk.StopReason{stops[0], r} {
			var one llm.Reply
			readStop(&one, stop)
			for _, s := range one.Signals {
				if s.Code != driver.ReplyMalformed {
					signals = append(signals, llm.Signal{Code: s.Code, Reason: why + ": contradictory stop signals count as " + counted[s.Code]})
				}
			}
		}
		signals = append(signals, llm.Signal{Code: driver.ReplyMalformed, Reason: why})
		break
	}
	if !cutOff(msg.StopReason) && msg.Usage.OutputTokens >= int64(d.cfg.MaxTokens) {
		signals = append(signals, llm.Signal{Code: driver.ReplyTruncated, Reason: fmt.Sprintf("the response gives stop_reason %q, and its %d output tokens reached max_tokens (%d): it may be cut off; raise maxTokens", msg.StopReason, msg.Usage.OutputTokens, d.cfg.MaxTokens)})
	}
	return signals
}

// counted says how a contradictory stop signal counts, by its code.
var counted = map[driver.ReplyCode]string{driver.ReplyTruncated: "cut off", driver.ReplyRefused: "refused", driver.ReplyFiltered: "filtered"}

func cutOff(r sdk.StopReason) bool {
	return r == sdk.StopReasonMaxTokens || r == sdk.StopReasonModelContextWindowExceeded
}

// readStop adds to r the signal of its stop_reason stop (see
// docs/drivers.md, "Stop reasons"), if any. Only stop_reason "tool_use"
// lets tool_use blocks run; a reply without them is the final answer
// when it stops at end_turn or a stop sequence.
func readStop(r *llm.Reply, stop sdk.StopReason) {
	n := len(r.Calls)
	switch stop {
	case sdk.StopReasonToolUse:
		if n == 0 {
			r.Refuse(driver.ReplyMalformed, fmt.Sprintf("stop_reason %q, and the reply has no tool_use block", stop))
		}
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		r.Refuse(driver.ReplyTruncated, fmt.Sprintf("the model's answer was cut off (stop_reason %q); raise maxTokens", stop))
	case sdk.StopReasonRefusal:
		r.Refuse(driver.ReplyRefused, fmt.Sprintf("the model refused to answer (stop_reason %q)", stop))
	case sdk.StopReasonEndTurn, sdk.StopReasonStopSequence:
		if n > 0 {
			r.Refuse(driver.ReplyMalformed, fmt.Sprintf("the reply holds %d tool_use block(s), and its stop_reason %q does not ask for tool use (only \"tool_use\" does)", n, stop))
		}
	default:
		if n > 0 {
			r.Refuse(driver.ReplyMalformed, fmt.Sprintf("the reply holds %d tool_use block(s), and its stop_reason %q does not ask for tool use (only \"tool_use\" does)", n, stop))
		} else {
			r.Refuse(driver.ReplyMalformed, fmt.Sprintf("the model stopped without an answer (stop_reason %q)", stop))
		}
	}
}

// clean turns an SDK error into one that names the request URL, the
// status, how often the request was sent and the agent's binding, and
// never holds the API key.
func (d *Driver) clean(ctx context.Context, err error, attempts int) error {
	// When ctx is done, its error is the answer ([llm.RequestError]).
	if ctx.Err() != nil {
		return llm.RequestError(ctx, Name, d.url, d.cfg.APIKey, err)
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = llm.BodyMessage(apiErr.RawJSON())
		}
		if apiErr.StatusCode < 400 {
			// An error event in a stream that began well (overloaded_error,
			// api_error): the SDK does not retry it.
			return llm.Noted(&llm.RedactedError{Msg: llm.Redact(fmt.Sprintf("anthropic: model %q at %s: the response stream ended with an error event (%s): %s",
				d.cfg.Model, d.url, apiErr.Type(), strings.TrimSpace(msg)), d.cfg.APIKey), Err: err}, 0, d.cfg.Binding)
		}
		pe := llm.ProviderError(Name, d.cfg.Model, d.base, apiErr.StatusCode, string(apiErr.Type()), msg, d.cfg.APIKey)
		pe.URL, pe.Attempts, pe.Binding = d.url, attempts, d.cfg.Binding
		return pe
	}
	if terr := llm.TimeoutError(ctx, Name, d.url, d.cfg.Timeout, err); terr != nil {
		return llm.Noted(terr, attempts, d.cfg.Binding)
	}
	return llm.Noted(llm.RequestError(ctx, Name, d.url, d.cfg.APIKey, err), attempts, d.cfg.Binding)
}

var _ driver.Driver = (*Driver)(nil)
