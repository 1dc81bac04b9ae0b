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
	// Timeout is the most one HTTP request (each attempt) may take; a
	// request that runs out of it fails the step with an error naming
	// the URL. Zero: 60s; negative: none.
	Timeout time.Duration
}

// String shows the Config without its API key.
func (c Config) String() string {
	return fmt.Sprintf("anthropic.Config{Model: %q, BaseURL: %q, APIKey: %s, MaxTokens: %d, MaxTurns: %d}", c.Model, c.BaseURL, llm.KeyShown(c.APIKey), c.MaxTokens, c.MaxTurns)
}

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// Driver runs agent steps through the Messages API. It is safe for
// concurrent use.
type Driver struct {
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
	client := cfg.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(client),
		option.WithBaseURL(cfg.BaseURL),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = llm.DefaultTimeout
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
// the output.
//
// It returns caller's error unchanged ([driver.ErrSuspended],
// [driver.ErrCallLimit], ...), ctx's error, [driver.ErrTurnLimit] after
// MaxTurns requests, a *[driver.ProviderError] when the API answers with
// an error status, an error naming the URL when a request runs out of
// Config.Timeout, and a *[driver.ReplyError] when a reply is refused whole
// (cut off, refused, or tool_use blocks without stop_reason "tool_use",
// or with an id given twice in the step): none of its calls reaches
// caller. No error holds the API key.
func (d *Driver) RunStep(ctx context.Context, in driver.StepInput, caller driver.Caller) (jsontext.Value, error) {
	tools, err := llm.Tools(Name, in)
	if err != nil {
		return nil, err
	}
	params := sdk.MessageNewParams{
		Model:     sdk.Model(d.cfg.Model),
		MaxTokens: int64(d.cfg.MaxTokens),
		System:    []sdk.TextBlockParam{{Text: llm.SystemPrompt(in)}},
		Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(llm.UserPrompt))},
	}
	for _, t := range tools {
		tp := &sdk.ToolParam{
			Name:        t.Wire,
			InputSchema: param.Override[sdk.ToolInputSchemaParam](json.RawMessage(t.Schema)),
		}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: tp})
	}

	turns := llm.MaxTurns(d.cfg.MaxTurns, in)
	seen := llm.IDs{}
	if len(in.Made) > 0 {
		// A resumed step: the calls already made, and their answers, as
		// the conversation had them (docs/drivers.md, "Resumed steps").
		uses := make([]sdk.ContentBlockParamUnion, 0, len(in.Made))
		results := make([]sdk.ContentBlockParamUnion, 0, len(in.Made))
		for _, m := range in.Made {
			uses = append(uses, sdk.NewToolUseBlock(m.ID, json.RawMessage(llm.CanonicalArgs(m.Arguments)), driver.WireName(m.Name)))
			if m.Result.Error != "" {
				results = append(results, sdk.NewToolResultBlock(m.ID, m.Result.Error, true))
			} else {
				results = append(results, sdk.NewToolResultBlock(m.ID, llm.ResultText(m.Result), false))
			}
		}
		params.Messages = append(params.Messages, sdk.NewAssistantMessage(uses...), sdk.NewUserMessage(results...))
		seen.Add(llm.MadeCalls(in.Made))
	}
	for turn := 0; turn < turns; turn++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		msg, err := d.svc.New(ctx, params)
		if err != nil {
			return nil, d.clean(ctx, err)
		}
		var calls []driver.Call
		var text strings.Builder
		for _, b := range msg.Content {
			switch b.Type {
			case "tool_use":
				calls = append(calls, driver.Call{ID: b.ID, Name: driver.SpecName(b.Name), Arguments: jsontext.Value(b.Input)})
			case "text":
				text.WriteString(b.Text)
			}
		}
		if rerr := checkReply(msg.StopReason, calls, seen); rerr != nil {
			return nil, rerr
		}
		if len(calls) == 0 {
			return llm.Output(text.String())
		}
		seen.Add(calls)

		// The history holds the canonical form of what was decided: the
		// input as the runtime parses it, one tool_result per call id.
		asst := msg.ToParam()
		for i, b := range msg.Content {
			if b.Type == "tool_use" {
				asst.OfAssistant.Content[i] = sdk.NewToolUseBlock(b.ID, json.RawMessage(llm.CanonicalArgs(b.Input)), b.Name)
			}
		}
		params.Messages = append(params.Messages, asst)
		results := make([]sdk.ContentBlockParamUnion, 0, len(calls))
		for _, c := range calls {
			res, err := caller.Call(ctx, c)
			if err != nil {
				return nil, err
			}
			if res.Error != "" {
				results = append(results, sdk.NewToolResultBlock(c.ID, res.Error, true))
			} else {
				results = append(results, sdk.NewToolResultBlock(c.ID, llm.ResultText(res), false))
			}
		}
		params.Messages = append(params.Messages, sdk.NewUserMessage(results...))
	}
	return nil, fmt.Errorf("anthropic: step %q: %w (%d requests)", in.StepID, driver.ErrTurnLimit, turns)
}

// checkReply returns the *driver.ReplyError of a reply that may not run
// (see docs/drivers.md, "Stop reasons"), or nil. Only stop_reason
// "tool_use" lets tool_use blocks run; a reply without them is the final
// answer when it stops at end_turn or a stop sequence.
func checkReply(stop sdk.StopReason, calls []driver.Call, seen llm.IDs) error {
	reply := func(code driver.ReplyCode, reason string) error {
		return llm.Reply(Name, code, string(stop), reason, calls)
	}
	switch stop {
	case sdk.StopReasonToolUse:
		if len(calls) == 0 {
			return reply(driver.ReplyMalformed, fmt.Sprintf("stop_reason %q, and the reply has no tool_use block", stop))
		}
		if r := seen.Check(calls); r != "" {
			return reply(driver.ReplyMalformed, r)
		}
		return nil
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return reply(driver.ReplyTruncated, fmt.Sprintf("the model's answer was cut off (stop_reason %q); raise maxTokens", stop))
	case sdk.StopReasonRefusal:
		return reply(driver.ReplyRefused, fmt.Sprintf("the model refused to answer (stop_reason %q)", stop))
	case sdk.StopReasonEndTurn, sdk.StopReasonStopSequence:
		if len(calls) > 0 {
			return reply(driver.ReplyMalformed, fmt.Sprintf("the reply holds %d tool_use block(s), and its stop_reason %q does not ask for tool use (only \"tool_use\" does)", len(calls), stop))
		}
		return nil
	}
	if len(calls) > 0 {
		return reply(driver.ReplyMalformed, fmt.Sprintf("the reply holds %d tool_use block(s), and its stop_reason %q does not ask for tool use (only \"tool_use\" does)", len(calls), stop))
	}
	return reply(driver.ReplyMalformed, fmt.Sprintf("the model stopped without an answer (stop_reason %q)", stop))
}

// clean turns an SDK error into one that names the server and status and
// never holds the API key.
func (d *Driver) clean(ctx context.Context, err error) error {
	// When ctx is done, its error is the answer ([llm.RequestError]).
	var apiErr *sdk.Error
	if ctx.Err() == nil && errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = llm.BodyMessage(apiErr.RawJSON())
		}
		return llm.ProviderError(Name, d.cfg.Model, d.base, apiErr.StatusCode, string(apiErr.Type()), msg, d.cfg.APIKey)
	}
	if terr := llm.TimeoutError(ctx, Name, d.url, d.cfg.Timeout, err); terr != nil {
		return terr
	}
	return llm.RequestError(ctx, Name, d.base, d.cfg.APIKey, err)
}

var _ driver.Driver = (*Driver)(nil)
